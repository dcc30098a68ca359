"""Timestamps as ``mqadmin`` reads and shows them (no I/O).

RocketMQ's tools take a time as epoch milliseconds, ``now``, or local time written
``yyyy-MM-dd#HH:mm:ss:SSS`` (``UtilAll.parseDate``); ISO 8601 (``2024-05-01T12:00:00``) is
accepted too. Times are shown in local time with milliseconds.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

__all__ = ["format_timestamp", "parse_timestamp"]

#: the largest timestamp a request carries (an int64 of epoch milliseconds)
MAX_TIMESTAMP_MS = 2**63 - 1
_ROCKETMQ = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})#(\d{1,2}):(\d{1,2}):(\d{1,2})(?::(\d{1,3}))?")


def parse_timestamp(text: str, *, now_ms: int | None = None) -> int:
    """Epoch milliseconds of ``text``.

    Args:
        text: ``now``, epoch milliseconds (``1714557600000``), ``yyyy-MM-dd#HH:mm:ss:SSS``
            (local time; the ``:SSS`` part may be left out) or ISO 8601 (local time unless
            it names an offset).
        now_ms: what ``now`` means (default: the clock).

    Raises:
        ValueError: none of these forms (the message says which are accepted).
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms if now_ms is not None else int(time.time() * 1000)
    if re.fullmatch(r"-?\d+", value):
        ms = int(value)
        if ms < 0:
            raise ValueError(f"timestamp {text!r} is negative")
        if ms > MAX_TIMESTAMP_MS:
            raise ValueError(f"timestamp {text!r} is past the largest one ({MAX_TIMESTAMP_MS} ms)")
        return ms
    match = _ROCKETMQ.fullmatch(value)
    try:
        if match is not None:
            y, mo, d, h, mi, s, frac = match.groups()
            dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int(frac or 0) * 1000)
        else:
            dt = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"bad timestamp {text!r}: use milliseconds, 'now' or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return (
        int(dt.timestamp() * 1000)
        if dt.tzinfo
        else int(time.mktime(dt.timetuple())) * 1000 + (dt.microsecond // 1000)
    )


def format_timestamp(ms: int | None) -> str:
    """``2024-05-01 12:00:00.123`` (local time); ``N/A`` for ``None`` or times <= 0."""
    if ms is None or ms <= 0:
        return "N/A"
    try:
        dt = datetime.fromtimestamp(ms / 1000)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"
