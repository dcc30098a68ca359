"""Timer messages stored as RocketMQ 5 does: the timer wheel, the timer log and the checkpoint
(:mod:`.format` byte by byte, :mod:`.files`), driven by :class:`TimerMessageStore`."""

from __future__ import annotations

from ariane.store.timer.service import TimerMessageStore, TimerStats

__all__ = ["TimerMessageStore", "TimerStats"]
