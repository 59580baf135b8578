"""docs/protocol.md 4 response verification, in the order sdk/vectors/response-signatures.json fixes:
headers present, kid pinned, signature encoding, freshness, Ed25519 over this request's nonce."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .codes import VerificationReason
from .config import ResponseKey
from .crypto import Bytesish, decode_signature, ed25519_public_key, ed25519_verify, response_message
from .errors import verification_error

__all__ = ["PinnedKeys", "pin_keys", "SignedAnswer", "verify_response"]

PinnedKeys = Mapping[str, Ed25519PublicKey]


def pin_keys(keys: Iterable[ResponseKey]) -> Dict[str, Ed25519PublicKey]:
    return {k.kid: ed25519_public_key(k.public_key) for k in keys}


@dataclass(frozen=True)
class SignedAnswer:
    method: str
    path: str
    status: int
    headers: Mapping[str, str]
    """Lower-cased header names."""
    body: Bytesish
    nonce: str
    """The X-Nonce this client sent."""


_TS_RE = re.compile(r"^[0-9]{1,12}$")


def verify_response(keys: PinnedKeys, a: SignedAnswer, now: float, max_skew_seconds: float) -> int:
    """Raises a ``verification`` KeywardenError, else returns the answer's timestamp (unix s).

    ``now`` is the verifier's idea of server time in seconds.
    """
    kid: Optional[str] = a.headers.get("x-response-kid")
    ts: Optional[str] = a.headers.get("x-response-timestamp")
    sig: Optional[str] = a.headers.get("x-response-signature")
    if not kid or not ts or not sig:
        raise verification_error(VerificationReason.UNSIGNED, f"answer {a.status} of {a.path} carries no signature")
    key = keys.get(kid)
    if key is None:
        raise verification_error(VerificationReason.UNKNOWN_KID, f"answer of {a.path} is signed by unpinned key {kid!r}")
    signature = decode_signature(sig)
    if signature is None:
        raise verification_error(VerificationReason.BAD_BASE64, f"signature of {a.path} is not base64 of 64 bytes")
    if not _TS_RE.match(ts):
        raise verification_error(VerificationReason.STALE, f"timestamp {ts[:40]!r} is not unix seconds")
    server_ts = int(ts)
    if abs(server_ts - now) > max_skew_seconds:
        raise verification_error(VerificationReason.STALE, f"timestamp {ts} is {round(server_ts - now)} s off")
    message = response_message(kid, a.method, a.path, a.status, ts, a.nonce, a.body)
    if not ed25519_verify(key, message, signature):
        raise verification_error(VerificationReason.BAD_SIGNATURE, f"signature of {a.path} ({a.status}) does not verify")
    return server_ts
