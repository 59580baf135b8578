"""Strict ISO 8601 UTC times as docs/protocol.md 1 writes them (``2026-11-21T22:00:00.000Z``): the form in
which offline license files and ``grace_until`` carry their times. Same rule in every SDK: date,
``T``, time, an optional fraction of 1-9 digits (cut to milliseconds), then ``Z``; nothing else."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional

__all__ = ["parse_utc_ms", "datetime_from_ms"]

_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_utc_ms(value: object) -> Optional[int]:
    """Unix milliseconds of a strict ISO 8601 UTC string, else None (also for any non-string)."""
    if not isinstance(value, str):
        return None
    m = _ISO.match(value)
    if m is None:
        return None
    try:
        d = datetime(*(int(g) for g in m.groups()[:6]), tzinfo=timezone.utc)
    except ValueError:  # month 13, 31 April, hour 24...
        return None
    ms = int((m.group(7) or "0").ljust(3, "0")[:3])
    return (d - _EPOCH) // timedelta(milliseconds=1) + ms


def datetime_from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)
