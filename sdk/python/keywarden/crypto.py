"""docs/protocol.md 3-6 with the ``cryptography`` package and hashlib/hmac. Each function matches one
file of sdk/vectors (tests/test_vectors.py checks them)."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from typing import Any, Optional, Union

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
except ImportError as e:  # the one dependency: say how to get it instead of a bare traceback
    raise ImportError(
        "keywarden needs the 'cryptography' package (Ed25519, AES): pip install cryptography "
        "(Debian/Ubuntu: apt install python3-cryptography, then use /usr/bin/python3)"
    ) from e

__all__ = [
    "sha256_hex",
    "canonical_request",
    "request_signature",
    "response_message",
    "ed25519_public_key",
    "decode_signature",
    "ed25519_verify",
    "ed25519_verify_bytes",
    "start_proof",
    "beat_proof",
    "proof_equals",
    "decrypt_response",
]

Bytesish = Union[bytes, bytearray, memoryview, str]


def _b(data: Bytesish) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def sha256_hex(data: Bytesish) -> str:
    return hashlib.sha256(_b(data)).hexdigest()


def canonical_request(method: str, path: str, timestamp: str, nonce: str, body: Bytesish) -> str:
    """docs/protocol.md 3: METHOD \\n PATH \\n X-Timestamp \\n X-Nonce \\n hex(sha256(body))."""
    return f"{method.upper()}\n{path}\n{timestamp}\n{nonce}\n{sha256_hex(body)}"


def request_signature(api_secret: str, canonical: str) -> str:
    """X-Signature: hex(HMAC-SHA256(key = utf8(api_secret), canonical))."""
    return hmac.new(api_secret.encode("utf-8"), canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def response_message(
    kid: str, method: str, path: str, status: int, timestamp: str, nonce: str, body: Bytesish
) -> str:
    """docs/protocol.md 4: kw1 \\n KID \\n METHOD \\n PATH \\n STATUS \\n TS \\n NONCE \\n hex(sha256(body))."""
    return f"kw1\n{kid}\n{method.upper()}\n{path}\n{status}\n{timestamp}\n{nonce}\n{sha256_hex(body)}"


def ed25519_public_key(b64: str) -> Ed25519PublicKey:
    raw = base64.b64decode(b64, validate=True)
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


# Strict: base64 of exactly 64 bytes is 86 characters and "==". A lenient decoder would skip
# junk characters and could turn garbage into "some" signature.
_SIG_RE = re.compile(r"^[A-Za-z0-9+/]{86}==$")


def decode_signature(value: object) -> Optional[bytes]:
    """The 64 signature bytes of a strict base64 string, else None."""
    if not isinstance(value, str) or not _SIG_RE.match(value):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 64 else None


def ed25519_verify(key: Ed25519PublicKey, message: str, signature: bytes) -> bool:
    return ed25519_verify_bytes(key, message.encode("utf-8"), signature)


def ed25519_verify_bytes(key: Ed25519PublicKey, message: bytes, signature: bytes) -> bool:
    try:
        key.verify(signature, message)
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


def start_proof(session: str, system_id: str, token: str) -> str:
    """docs/protocol.md 6, heartbeat/start."""
    mac = hmac.new(session.encode("utf-8"), f"kwhs1\n{system_id}\n{token}".encode("utf-8"), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode("ascii")


def beat_proof(previous_token: str, session: str, beat_index: int, new_token: str, beat_count: int) -> str:
    """docs/protocol.md 6, heartbeat (integers in decimal)."""
    msg = f"kwhb1\n{session}\n{int(beat_index)}\n{new_token}\n{int(beat_count)}"
    mac = hmac.new(previous_token.encode("utf-8"), msg.encode("utf-8"), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode("ascii")


def proof_equals(given: Any, expected: str) -> bool:
    """Constant-time comparison of a received proof with the expected one."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def decrypt_response(ciphertext_b64: str, enc_key: str, api_secret: str, init_iv: str) -> bytes:
    """docs/protocol.md 5: the plaintext bytes; raises ValueError on a wrong key or damaged ciphertext."""
    key = hashlib.sha256(f"{enc_key}-{api_secret}".encode("utf-8")).digest()
    iv = hashlib.sha256(init_iv.encode("utf-8")).digest()[:16]
    try:
        data = base64.b64decode(ciphertext_b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"ciphertext is not base64: {e}") from e
    if not data or len(data) % 16:
        raise ValueError("ciphertext is not a whole number of AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    padded = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()
