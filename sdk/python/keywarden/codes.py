"""The SDK's error codes and verification reasons (same strings in every Keywarden SDK).

Both enums are ``str`` subclasses: ``err.code == "invalid_key"`` and
``err.code is ErrorCode.INVALID_KEY`` are both true for the same error.
"""
from __future__ import annotations

from enum import Enum

__all__ = ["ErrorCode", "VerificationReason", "OfflineReason"]


class ErrorCode(str, Enum):
    INVALID_KEY = "invalid_key"
    KEY_USED = "key_used"
    BANNED = "banned"
    EXPIRED = "expired"
    HWID_MISMATCH = "hwid_mismatch"
    APP_DISABLED = "app_disabled"
    UPDATE_REQUIRED = "update_required"
    RATE_LIMITED = "rate_limited"
    LOCKED_OUT = "locked_out"
    SESSION_EXPIRED = "session_expired"
    HEARTBEAT_KILLED = "heartbeat_killed"
    VERIFICATION = "verification"
    CLOCK_SKEW = "clock_skew"
    NETWORK = "network"
    TIMEOUT = "timeout"
    SERVER = "server"
    """The fallback: an answer that matches nothing else (status and detail stay on the error)."""
    TRIAL_DISABLED = "trial_disabled"
    """The application offers no trials."""
    TRIAL_USED = "trial_used"
    """This device already had its trial of this application."""
    OFFLINE_DISABLED = "offline_disabled"
    """The application issues no offline license files."""
    OFFLINE_INVALID = "offline_invalid"
    """An offline license file this SDK refuses; ``reason`` is an :class:`OfflineReason`."""
    SESSION_LIMIT = "session_limit"
    """heartbeat/start while the key's concurrent sessions are all taken."""

    def __str__(self) -> str:
        return self.value


class VerificationReason(str, Enum):
    """Why a response was not believed."""

    UNSIGNED = "unsigned"
    UNKNOWN_KID = "unknown_kid"
    BAD_BASE64 = "bad_base64"
    STALE = "stale"
    BAD_SIGNATURE = "bad_signature"
    BAD_PROOF = "bad_proof"
    MALFORMED = "malformed"
    BAD_MAC = "bad_mac"
    """Realtime channel: a frame whose MAC does not verify (forged, or recorded on another connection)."""
    OUT_OF_ORDER = "out_of_order"
    """Realtime channel: a frame whose seq is not the next one (replayed, dropped or reordered)."""

    def __str__(self) -> str:
        return self.value


class OfflineReason(str, Enum):
    """Why an offline license file was refused (same strings in every SDK; sdk/vectors/offline.json).
    Checked in this order, so a file wrong in two ways names the first."""

    MALFORMED = "malformed"
    """Not "kwlic1." base64url "." base64url, a signature that is not 64 bytes, or a payload that is
    not the JSON object docs/protocol.md 12.5 describes."""
    UNKNOWN_KID = "unknown_kid"
    """Signed under a key id this SDK does not pin."""
    BAD_SIGNATURE = "bad_signature"
    """The Ed25519 signature does not verify (edited, or signed by someone else)."""
    WRONG_APP = "wrong_app"
    WRONG_HWID = "wrong_hwid"
    CLOCK_ROLLED_BACK = "clock_rolled_back"
    """The clock reads more than 300 s before the latest time this SDK has seen (its state file)."""
    ISSUED_IN_FUTURE = "issued_in_future"
    """issued_at is more than 300 s ahead of the clock."""
    EXPIRED = "expired"
    """The clock has reached valid_until."""
    WRONG_REQUEST = "wrong_request"
    """An activation answer that does not carry the nonce of this machine's latest activation
    request (an answer to an older request, or no request kept here). Checked after the others."""

    def __str__(self) -> str:
        return self.value
