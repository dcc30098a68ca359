"""The clock seam: production code asks a ``Clock`` for time so tests can control it."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "monotonic_ms"]


class Clock(Protocol):
    """Wall-clock milliseconds and a monotonic reading in seconds."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...


def monotonic_ms(clock: Clock) -> int:
    """The clock's monotonic reading in whole milliseconds."""
    return int(clock.monotonic() * 1000)


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to (for tests).

    Args:
        now_ms: the starting wall-clock time in milliseconds.
    """

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._mono = 0.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._mono

    def advance(self, ms: int) -> None:
        """Move both readings forward by ``ms`` milliseconds."""
        self._now_ms += ms
        self._mono += ms / 1000
