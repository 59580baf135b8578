"""Offline license files (docs/protocol.md 12.5) and the clock record that guards them.

A file is ``"kwlic1." base64url(PAYLOAD) "." base64url(Ed25519("kwlic1." base64url(PAYLOAD)))``,
signed by one of the response-signing keys this SDK pins. It is accepted only when, in this order
(the order is shared by every SDK and fixed by sdk/vectors/offline.json):

1. it has that shape and PAYLOAD is the JSON object 12.5 describes       (else ``malformed``)
2. its ``kid`` is pinned                                                 (``unknown_kid``)
3. the signature verifies                                                (``bad_signature``)
4. ``app_id`` is this application's                                     (``wrong_app``)
5. ``hwid`` is this machine's (compared lower-cased)                     (``wrong_hwid``)
6. the clock is not more than 300 s below the latest time seen           (``clock_rolled_back``)
7. ``issued_at`` is at most 300 s ahead of the clock                     (``issued_in_future``)
8. the clock is before ``valid_until``                                   (``expired``)

The latest time seen lives in a small JSON state file, ``{"v": 1, "last_seen": <unix seconds>}``;
every check records its clock reading there (never lowering it). Deleting the file forgets the
record: like anything on an end user's machine it is a speed bump, which is why files carry a
bounded ``valid_until``.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from .codes import OfflineReason
from .crypto import ed25519_verify_bytes
from .errors import offline_error
from .utc import datetime_from_ms, parse_utc_ms
from .verify import PinnedKeys

__all__ = ["OfflineLicense", "verify_license_file", "ClockRecord", "default_state_file", "MAX_FUTURE_SECONDS", "MAX_ROLLBACK_SECONDS"]

MAX_FUTURE_SECONDS = 300
MAX_ROLLBACK_SECONDS = 300
_TAG = "kwlic1"
_B64URL = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class OfflineLicense:
    """A verified offline license file: what it grants and until when."""

    app_id: str
    license_id: str
    user: Optional[str]
    """The username of a user license, None for a license-only key."""
    hwid: str
    level: int
    entitlements: Tuple[str, ...]
    """Sorted codes."""
    expires_at: Optional[datetime]
    """The key's own expiry (UTC), None for a lifetime key."""
    issued_at: datetime
    valid_until: datetime
    """The file is accepted until this moment (UTC)."""
    kid: str

    def has_entitlement(self, code: str) -> bool:
        return code in self.entitlements


def _b64url(text: str) -> Optional[bytes]:
    if not _B64URL.match(text) or len(text) % 4 == 1:
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _text(p: Mapping[str, Any], name: str) -> bool:
    v = p.get(name)
    return isinstance(v, str) and v != ""


def _open(text: object, tag: str) -> Tuple[str, bytes, Dict[str, Any]]:
    """(signed text, signature, payload object) of ``<tag>.<payload>.<signature>``; raises ``malformed``.
    Shared by license files (kwlic1) and seat pools (kwpool1)."""
    if not isinstance(text, str):
        raise offline_error(OfflineReason.MALFORMED, f"a {tag} text is a string")
    parts = text.strip(" \t\r\n").split(".")
    if len(parts) != 3 or parts[0] != tag:
        raise offline_error(OfflineReason.MALFORMED, f'not "{tag}.<payload>.<signature>"')
    raw, sig = _b64url(parts[1]), _b64url(parts[2])
    if raw is None or sig is None or len(sig) != 64:
        raise offline_error(OfflineReason.MALFORMED, "payload or signature is not base64url (a signature is 64 bytes)")
    try:
        p: object = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise offline_error(OfflineReason.MALFORMED, "payload is not UTF-8 JSON") from None
    if not isinstance(p, dict):
        raise offline_error(OfflineReason.MALFORMED, "payload is not a JSON object")
    return f"{tag}.{parts[1]}", sig, p


def _integer(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _grant_fields(p: Mapping[str, Any]) -> bool:
    """What files and pools both grant: v 1, an integer level, entitlement codes, the times."""
    ents = p.get("entitlements")
    return (
        _integer(p.get("v")) and p.get("v") == 1 and _integer(p.get("level"))
        and isinstance(ents, list) and all(isinstance(e, str) for e in ents)
        and "expires_at" in p and (p["expires_at"] is None or parse_utc_ms(p["expires_at"]) is not None)
        and parse_utc_ms(p.get("issued_at")) is not None and parse_utc_ms(p.get("valid_until")) is not None
    )


def _parse(file: object) -> Tuple[str, bytes, Dict[str, Any]]:
    """(signed text, signature, payload) of a well-formed file; raises ``malformed``."""
    signed, sig, p = _open(file, _TAG)
    good = (
        _grant_fields(p) and all(_text(p, k) for k in ("kid", "app_id", "license_id", "hwid"))
        and "user" in p and (p["user"] is None or isinstance(p["user"], str))
    )
    if not good:
        raise offline_error(OfflineReason.MALFORMED, "payload lacks a field of docs/protocol.md 12.5 or has one of the wrong type")
    return signed, sig, p


def verify_license_file(
    file: str, keys: PinnedKeys, app_id: str, hwid: str, now: float, last_seen: Optional[float]
) -> OfflineLicense:
    """Checks ``file`` as the module docstring says; ``now`` and ``last_seen`` in unix seconds
    (``last_seen`` None: no record). Raises ``offline_invalid`` with an :class:`OfflineReason`."""
    signed, sig, p = _parse(file)
    key = keys.get(p["kid"])
    if key is None:
        raise offline_error(OfflineReason.UNKNOWN_KID, f"signed under key {p['kid']!r}, which this SDK does not pin")
    if not ed25519_verify_bytes(key, signed.encode("ascii"), sig):
        raise offline_error(OfflineReason.BAD_SIGNATURE, "the signature does not verify")
    if p["app_id"] != app_id:
        raise offline_error(OfflineReason.WRONG_APP, f"issued for application {p['app_id']!r}")
    if p["hwid"] != hwid.lower():
        raise offline_error(OfflineReason.WRONG_HWID, "issued for another machine")
    now_ms = now * 1000
    if last_seen is not None and now_ms < (last_seen - MAX_ROLLBACK_SECONDS) * 1000:
        raise offline_error(OfflineReason.CLOCK_ROLLED_BACK, f"the clock reads {round(last_seen - now)} s before a time already seen")
    issued, until = parse_utc_ms(p["issued_at"]), parse_utc_ms(p["valid_until"])
    assert issued is not None and until is not None  # checked by _parse
    if issued > now_ms + MAX_FUTURE_SECONDS * 1000:
        raise offline_error(OfflineReason.ISSUED_IN_FUTURE, f"issued {round(issued / 1000 - now)} s ahead of the clock")
    if now_ms >= until:
        raise offline_error(OfflineReason.EXPIRED, f"valid until {p['valid_until']}")
    expires = parse_utc_ms(p.get("expires_at"))
    return OfflineLicense(
        app_id=p["app_id"], license_id=p["license_id"], user=p.get("user"), hwid=p["hwid"], level=p["level"],
        entitlements=tuple(sorted(set(p["entitlements"]))), expires_at=datetime_from_ms(expires) if expires is not None else None,
        issued_at=datetime_from_ms(issued), valid_until=datetime_from_ms(until), kid=p["kid"],
    )


def default_state_file(api_key: str) -> Path:
    """Per user and application: ``<state dir>/keywarden/<first 16 hex of sha256(api_key)>.json``,
    the state dir being %LOCALAPPDATA% (Windows), ~/Library/Application Support (macOS), else
    $XDG_STATE_HOME or ~/.local/state."""
    name = hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:16] + ".json"
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "Keywarden"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support" / "Keywarden"
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "keywarden"
    return base / name


def write_json_atomically(path: Path, value: Any) -> None:
    """Writes JSON to a temporary file beside ``path``, then renames it over ``path`` (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kwstate-", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class ClockRecord:
    """The latest clock reading seen, kept in a JSON file. An unreadable or damaged file counts as
    no record; a file that cannot be written is logged and the check goes on (both are things the
    end user can do anyway by deleting it)."""

    def __init__(self, path: "os.PathLike[str] | str", log: Any) -> None:
        self.path = Path(path)
        self._log = log
        self._lock = threading.Lock()

    def last_seen(self) -> Optional[float]:
        try:
            with open(self.path, "rb") as f:
                v = json.loads(f.read(4096).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, UnicodeDecodeError) as e:
            self._log.warning("keywarden.offline.state_unreadable: %s: %s", self.path, e)
            return None
        seen = v.get("last_seen") if isinstance(v, dict) else None
        if isinstance(seen, bool) or not isinstance(seen, (int, float)) or seen != seen:
            self._log.warning("keywarden.offline.state_unreadable: %s: no last_seen", self.path)
            return None
        return float(seen)

    def record(self, now: float) -> None:
        """last_seen = max(last_seen, now), written atomically (a temporary file, then a rename)."""
        with self._lock:
            seen = self.last_seen()
            if seen is not None and seen >= now:
                return
            try:
                write_json_atomically(self.path, {"v": 1, "last_seen": int(now)})
            except OSError as e:
                self._log.warning("keywarden.offline.state_unwritable: %s: %s", self.path, e)
