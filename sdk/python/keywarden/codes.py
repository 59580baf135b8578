"""The SDK's error codes and verification reasons (same strings in every Keywarden SDK).

Both enums are ``str`` subclasses: ``err.code == "invalid_key"`` and
``err.code is ErrorCode.INVALID_KEY`` are both true for the same error.
"""
from __future__ import annotations

from enum import Enum

__all__ = ["ErrorCode", "VerificationReason"]


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
