"""The grace period (docs/protocol.md 12.6): how long the license stays valid while the service cannot be
reached. Only verified answers move it: each verified answer of license, login, register, trial,
heartbeat/start or an accepted beat sets it to its ``grace_until`` (an answer without one, or with
one that is not a strict ISO 8601 UTC time, grants none); a verified refusal ends it at once. An
answer that fails verification never reaches this module."""
from __future__ import annotations

import threading
from typing import Any, Mapping, Optional

from .utc import parse_utc_ms

__all__ = ["Grace", "grace_until_of", "is_refusal"]


def grace_until_of(answer: Mapping[str, Any]) -> Optional[int]:
    """The unix milliseconds ``answer`` grants, or None."""
    return parse_utc_ms(answer.get("grace_until"))


def is_refusal(status: Optional[int]) -> bool:
    """A verified answer that refuses: any 4xx but 429 (which says "not now", not "no")."""
    return status is not None and 400 <= status < 500 and status != 429


class Grace:
    """The latest verified grace_until, shared by a client and its heartbeat threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until_ms: Optional[int] = None

    @property
    def until_ms(self) -> Optional[int]:
        with self._lock:
            return self._until_ms

    def note(self, answer: Mapping[str, Any]) -> None:
        until = grace_until_of(answer)
        with self._lock:
            self._until_ms = until

    def end(self) -> None:
        with self._lock:
            self._until_ms = None

    def active(self, now_seconds: float) -> bool:
        until = self.until_ms
        return until is not None and now_seconds * 1000 < until
