"""One error type for every failure: the host program gets a :class:`KeywardenError` with a
:class:`ErrorCode`, never ``sys.exit`` and never an untyped exception from a network call.

Server answers are mapped by the table in error_table.py (checked against
sdk/vectors/errors.json); the SDK raises network, timeout, verification and clock_skew itself.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Union, cast

from .codes import ErrorCode, OfflineReason, VerificationReason
from .error_table import ERROR_ENTRIES, FALLBACK_CODE, STATUS_FALLBACKS

__all__ = ["KeywardenError", "code_for", "error_from_answer", "verification_error", "offline_error"]

_MISSING = object()


class KeywardenError(Exception):
    """Every failure of this SDK.

    Attributes:
        code: an :class:`ErrorCode`.
        status: HTTP status of a (verified) server answer, else None.
        detail: the answer's ``detail`` exactly as sent (string, 426 object or 422 list).
        reason: a :class:`VerificationReason` for code ``verification``, an :class:`OfflineReason`
            for ``offline_invalid``.
        retry_after: seconds, for ``rate_limited`` and ``locked_out`` (from ``Retry-After``).
        latest_version, update_url: for ``update_required``.
        not_sent: True when the request certainly never reached the server (safe to send again).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: Optional[int] = None,
        detail: Any = None,
        reason: Union[VerificationReason, OfflineReason, None] = None,
        retry_after: Optional[float] = None,
        latest_version: Optional[str] = None,
        update_url: Optional[str] = None,
        not_sent: bool = False,
    ) -> None:
        super().__init__(message)
        self.code: ErrorCode = ErrorCode(code)
        self.message = message
        self.status = status
        self.detail = detail
        self.reason: Union[VerificationReason, OfflineReason, None] = (
            reason if reason is None or isinstance(reason, OfflineReason) else VerificationReason(reason)
        )
        self.retry_after = retry_after
        self.latest_version = latest_version
        self.update_url = update_url
        self.not_sent = not_sent

    def __repr__(self) -> str:
        extra = f", reason={self.reason.value!r}" if self.reason is not None else ""
        status = f", status={self.status}" if self.status is not None else ""
        return f"KeywardenError(code={self.code.value!r}{status}{extra}, message={self.message!r})"


def verification_error(reason: VerificationReason, message: str) -> KeywardenError:
    return KeywardenError(
        ErrorCode.VERIFICATION, f"response refused ({VerificationReason(reason).value}): {message}", reason=reason
    )


def offline_error(reason: OfflineReason, message: str) -> KeywardenError:
    return KeywardenError(ErrorCode.OFFLINE_INVALID, f"offline license refused ({reason.value}): {message}", reason=reason)


def code_for(status: int, detail: Any) -> ErrorCode:
    """The code for a failure answer: exact (status, detail) entry, else status fallback, else ``server``."""
    if isinstance(detail, str):
        for s, d, code in ERROR_ENTRIES:
            if s == status and d == detail:
                return code
    return STATUS_FALLBACKS.get(status, FALLBACK_CODE)


def _retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        n = float(value.strip())
    except ValueError:
        return None  # an HTTP-date form: the server never sends one
    if n != n or n < 0 or n == float("inf"):
        return None
    return int(n) if n.is_integer() else n


def error_from_answer(status: int, detail: Any, retry_after_header: Optional[str] = None) -> KeywardenError:
    """Builds the error for a verified non-200 answer."""
    code = code_for(status, detail)
    text = detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False, default=str)
    latest: Optional[str] = None
    url: Optional[str] = None
    if code is ErrorCode.UPDATE_REQUIRED and isinstance(detail, Mapping):
        d = cast(Mapping[str, Any], detail)
        v = d.get("latest_version", _MISSING)
        latest = v if isinstance(v, str) else None
        u = d.get("update_url", _MISSING)
        url = u if isinstance(u, str) else None
        m = d.get("message")
        if isinstance(m, str):
            text = m
    return KeywardenError(
        code,
        f"{code.value}: {status} {text}",
        status=status,
        detail=detail,
        retry_after=_retry_after(retry_after_header),
        latest_version=latest,
        update_url=url,
    )
