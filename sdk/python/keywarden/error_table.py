"""This SDK's copy of the error table (sdk/vectors/errors.json, generated from the server's
src/errors.ts through sdk/vectors/error-map.ts). tests/test_errors.py fails when the two differ:
update both together.
"""
from __future__ import annotations

from typing import Dict, Tuple

from .codes import ErrorCode

__all__ = ["ERROR_ENTRIES", "STATUS_FALLBACKS", "FALLBACK_CODE"]

# (status, detail, code): an answer with exactly this status and detail string maps to code.
ERROR_ENTRIES: Tuple[Tuple[int, str, ErrorCode], ...] = (
    (413, "Payload too large", ErrorCode.SERVER),
    (400, "Malformed JSON body", ErrorCode.SERVER),
    (429, "Rate limit exceeded", ErrorCode.RATE_LIMITED),
    (404, "Not found", ErrorCode.SERVER),
    (405, "Method not allowed", ErrorCode.SERVER),
    (500, "Internal server error", ErrorCode.SERVER),
    (503, "Service unavailable", ErrorCode.SERVER),
    (404, "Application not found", ErrorCode.APP_DISABLED),
    (401, "Invalid or expired session", ErrorCode.SESSION_EXPIRED),
    (401, "Invalid request signature", ErrorCode.CLOCK_SKEW),
    (403, "Access denied", ErrorCode.BANNED),
    (403, "Application disabled", ErrorCode.APP_DISABLED),
    (429, "Too many failed attempts, try again later.", ErrorCode.LOCKED_OUT),
    (426, "A new version is required.", ErrorCode.UPDATE_REQUIRED),
    (400, "Encryption key required", ErrorCode.SERVER),
    (403, "Binary hash mismatch", ErrorCode.SERVER),
    (403, "Invalid binary token", ErrorCode.SERVER),
    (400, "Invalid license key", ErrorCode.INVALID_KEY),
    (400, "License key already used", ErrorCode.KEY_USED),
    (400, "Username already taken", ErrorCode.SERVER),
    (403, "License key is banned", ErrorCode.BANNED),
    (403, "License validation is temporarily paused for this application.", ErrorCode.APP_DISABLED),
    (403, "Access is temporarily paused for this application.", ErrorCode.APP_DISABLED),
    (403, "Heartbeat session required. Call /heartbeat/start first.", ErrorCode.SERVER),
    (409, "License state changed mid-activation, please retry", ErrorCode.SERVER),
    (409, "License activation in progress, retry.", ErrorCode.SERVER),
    # Login: wrong name or password, banned, expired or HWID mismatch all answer this one text.
    (401, "Invalid username or password", ErrorCode.INVALID_KEY),
    (403, "License not valid", ErrorCode.INVALID_KEY),
    (403, "HWID mismatch. Key locked to another device.", ErrorCode.HWID_MISMATCH),
    (403, "License expired", ErrorCode.EXPIRED),
    (403, "Session not activated. Call /login, /register or /license first.", ErrorCode.SESSION_EXPIRED),
    (409, "heartbeat session already exists for this nonce", ErrorCode.SERVER),
    (403, "rejected", ErrorCode.HEARTBEAT_KILLED),
    (401, "Invalid heartbeat token", ErrorCode.HEARTBEAT_KILLED),
    # docs/protocol.md 12 (licensing models).
    (403, "Trials are not enabled for this application.", ErrorCode.TRIAL_DISABLED),
    (403, "Trial already used on this device.", ErrorCode.TRIAL_USED),
    (403, "Offline licenses are not enabled for this application.", ErrorCode.OFFLINE_DISABLED),
    (409, "Concurrent session limit reached", ErrorCode.SESSION_LIMIT),
    # A download link (update downloads report these as UpdateError download_failed).
    (403, "Download link expired", ErrorCode.SERVER),
    (416, "Range not satisfiable", ErrorCode.SERVER),
)

# Used when no entry matches: data-driven details (an app's disabled_message, the 426 object,
# any other 429).
STATUS_FALLBACKS: Dict[int, ErrorCode] = {
    403: ErrorCode.APP_DISABLED,
    426: ErrorCode.UPDATE_REQUIRED,
    429: ErrorCode.RATE_LIMITED,
}

FALLBACK_CODE: ErrorCode = ErrorCode.SERVER
