"""Updates: the upgrade check's offer and the verified download of an artifact.

An offer is believed only when every artifact in it carries an Ed25519 signature, by a pinned
response-signing key, over ``kwart1.<app_id>.<version>.<filename>.<sha512 hex>`` (the server's
docs/releases.md "Artifacts"; sdk/vectors/artifacts.json fixes the order of the checks).
A download streams into a temporary file next to the target, checks size, SHA-512 and that
signature, and only then renames it over the target; any failure removes the temporary file and
raises an :class:`UpdateError`.
"""
from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Callable, Mapping, Optional, Tuple

from .codes import ErrorCode
from .crypto import decode_signature, ed25519_verify
from .errors import KeywardenError
from .transport import DefaultTransport, TransportRequest
from .verify import PinnedKeys

__all__ = ["UpdateReason", "UpdateError", "Artifact", "UpdateOffer", "ProgressCallback", "artifact_message",
           "verify_artifact", "download_artifact"]

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(received_bytes, total_bytes)`` after every chunk written."""

_CHUNK = 64 * 1024


class UpdateReason(str, Enum):
    """Why an artifact or its download was refused (same strings in every SDK)."""

    UNKNOWN_KID = "unknown_kid"
    """Signed under a key id this SDK does not pin."""
    BAD_SIGNATURE = "bad_signature"
    """The signature is not base64 of 64 bytes, or does not verify for this app, version, file name and SHA-512."""
    SIZE_MISMATCH = "size_mismatch"
    """The download produced another number of bytes than the offer's ``size``."""
    SHA512_MISMATCH = "sha512_mismatch"
    """The downloaded bytes do not hash to the offer's ``sha512``."""
    DOWNLOAD_FAILED = "download_failed"
    """The link answered something other than 200 (e.g. 403 ``Download link expired``), the connection
    failed, or the file could not be written; ``code`` is ``server``, ``network`` or ``timeout``."""

    def __str__(self) -> str:
        return self.value


class UpdateError(KeywardenError):
    """An update refused: a :class:`KeywardenError` whose ``reason`` is an :class:`UpdateReason`.

    ``code`` is ``verification`` for the first four reasons; for ``download_failed`` it is ``server``
    (``status`` and ``detail`` of the answer kept), ``network`` or ``timeout``.
    """

    def __init__(self, reason: UpdateReason, message: str, *, code: ErrorCode = ErrorCode.VERIFICATION,
                 status: Optional[int] = None, detail: Any = None) -> None:
        super().__init__(code, f"update refused ({reason.value}): {message}", status=status, detail=detail)
        self.reason = reason  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"UpdateError(code={self.code.value!r}, reason={self.reason.value!r}, message={self.message!r})"


@dataclass(frozen=True)
class Artifact:
    """One file of an offered release, its signature already verified."""

    app_id: str
    version: str
    """The release's version (part of the signed message)."""
    filename: str
    platform: str
    arch: str
    size: int
    sha512: str
    signature: str
    kid: str
    url: str
    url_expires_at: Optional[datetime]


@dataclass(frozen=True)
class UpdateOffer:
    version: str
    channel: str
    notes: str
    published_at: Optional[datetime]
    artifacts: Tuple[Artifact, ...]


def artifact_message(app_id: str, version: str, filename: str, sha512_hex: str) -> str:
    return f"kwart1.{app_id}.{version}.{filename}.{sha512_hex}"


def verify_artifact(keys: PinnedKeys, app_id: str, version: str, filename: str, sha512_hex: str, kid: str,
                    signature: str) -> None:
    """Raises :class:`UpdateError` (``unknown_kid`` or ``bad_signature``) unless the signature holds."""
    key = keys.get(kid)
    if key is None:
        raise UpdateError(UpdateReason.UNKNOWN_KID, f"{filename} is signed by unpinned key {kid!r}")
    sig = decode_signature(signature)
    if sig is None or not ed25519_verify(key, artifact_message(app_id, version, filename, sha512_hex), sig):
        raise UpdateError(UpdateReason.BAD_SIGNATURE, f"signature of {filename} {version} does not verify")


def _detail(raw: bytes) -> Any:
    """The ``detail`` of a refusal's JSON body, else its text."""
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except ValueError:
        return raw.decode("utf-8", "replace")
    return parsed.get("detail") if isinstance(parsed, dict) else parsed


def _fail_download(message: str, e: BaseException) -> UpdateError:
    timeout = isinstance(e, TimeoutError) or "timed out" in str(e)
    code = ErrorCode.TIMEOUT if timeout else ErrorCode.NETWORK
    return UpdateError(UpdateReason.DOWNLOAD_FAILED, f"{message}: {type(e).__name__}: {e}", code=code)


def download_artifact(keys: PinnedKeys, artifact: Artifact, target_path: "os.PathLike[str] | str",
                      progress: Optional[ProgressCallback], transport: DefaultTransport, timeout: float) -> str:
    """Streams ``artifact.url`` into a temporary file beside ``target_path``, verifies it, renames it
    into place and returns the target path. ``timeout`` bounds each connect and each read, not the
    whole download. Never holds more than one chunk in memory."""
    target = os.path.abspath(os.fspath(target_path))
    verify_artifact(keys, artifact.app_id, artifact.version, artifact.filename, artifact.sha512, artifact.kid,
                    artifact.signature)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".part", dir=os.path.dirname(target))
    try:
        digest = hashlib.sha512()
        received = 0
        with os.fdopen(fd, "wb") as out:
            conn, path = transport._connection(
                TransportRequest(method="GET", url=artifact.url, headers={}, body=b"", timeout=timeout))
            try:
                try:
                    conn.request("GET", path, headers={"Accept": "application/octet-stream", "Connection": "close"})
                    resp = conn.getresponse()
                except OSError as e:
                    raise _fail_download(f"GET {artifact.filename}", e) from None
                if resp.status != 200:
                    detail = _detail(resp.read(4096))
                    raise UpdateError(UpdateReason.DOWNLOAD_FAILED, f"{artifact.filename}: {resp.status} {detail}",
                                      code=ErrorCode.SERVER, status=resp.status, detail=detail)
                while True:
                    try:
                        chunk = resp.read(_CHUNK)
                    except OSError as e:
                        raise _fail_download(f"reading {artifact.filename}", e) from None
                    if not chunk:
                        break
                    received += len(chunk)
                    if received > artifact.size:
                        raise UpdateError(UpdateReason.SIZE_MISMATCH,
                                          f"{artifact.filename}: more than the offered {artifact.size} bytes")
                    digest.update(chunk)
                    out.write(chunk)
                    if progress is not None:
                        progress(received, artifact.size)
            except (ValueError, http.client.HTTPException) as e:  # a broken or short chunked body
                raise _fail_download(f"reading {artifact.filename}", e) from None
            finally:
                conn.close()
            out.flush()
            os.fsync(out.fileno())
        if received != artifact.size:
            raise UpdateError(UpdateReason.SIZE_MISMATCH, f"{artifact.filename}: {received} bytes, offered {artifact.size}")
        if not hmac.compare_digest(digest.hexdigest(), artifact.sha512.lower()):
            raise UpdateError(UpdateReason.SHA512_MISMATCH, f"{artifact.filename}: SHA-512 differs from the offer")
        # The file on disk is what was hashed; the signature covers that hash: move it into place.
        os.replace(tmp, target)
        return target
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def parse_offer(upgrade: Mapping[str, Any], app_id: str, keys: PinnedKeys,
                to_datetime: Callable[[Any], Optional[datetime]]) -> UpdateOffer:
    """The offer of an upgrade answer with every artifact's signature checked. Raises ValueError when
    a field is missing or of the wrong type (the caller reports it as a ``malformed`` answer)."""
    def text(o: Mapping[str, Any], name: str) -> str:
        v = o.get(name)
        if not isinstance(v, str) or not v:
            raise ValueError(f"upgrade answer lacks {name}")
        return v

    version = text(upgrade, "version")
    listed = upgrade.get("artifacts")
    if not isinstance(listed, list) or not listed:
        raise ValueError("upgrade answer lists no artifacts")
    artifacts = []
    for a in listed:
        if not isinstance(a, dict):
            raise ValueError("an artifact is not an object")
        size = a.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("artifact size is not a count of bytes")
        art = Artifact(
            app_id=app_id, version=version, filename=text(a, "filename"), platform=text(a, "platform"),
            arch=text(a, "arch"), size=size, sha512=text(a, "sha512"), signature=text(a, "signature"),
            kid=text(a, "kid"), url=text(a, "url"), url_expires_at=to_datetime(a.get("url_expires_at")),
        )
        verify_artifact(keys, app_id, version, art.filename, art.sha512, art.kid, art.signature)
        artifacts.append(art)
    return UpdateOffer(version=version, channel=str(upgrade.get("channel") or ""), notes=str(upgrade.get("notes") or ""),
                       published_at=to_datetime(upgrade.get("published_at")), artifacts=tuple(artifacts))
