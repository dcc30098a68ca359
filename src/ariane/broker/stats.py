"""Counters behind the runtime-info and stats answers (a small part of RocketMQ's
``BrokerStatsManager``).

Counters grow on the hot paths (one dict update per request); ``sample()`` runs every 10 s and
keeps the last minute of totals so rates are computed over that window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ariane.common.clock import Clock

__all__ = ["BrokerStats"]

_WINDOW_S = 60.0


@dataclass(slots=True)
class _Sample:
    at_s: float
    put: int
    get: int
    topic_put: dict[str, int] = field(default_factory=dict)
    group_get: dict[str, int] = field(default_factory=dict)


class BrokerStats:
    """Message counters and their rates.

    Args:
        clock: time source.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.put_total = 0
        self.put_bytes_total = 0
        self.get_total = 0
        self.topic_put: dict[str, int] = {}
        self.group_get: dict[str, int] = {}
        self._samples: deque[_Sample] = deque()
        self.sample()

    def on_put(self, topic: str, msgs: int, size: int) -> None:
        """Count stored messages."""
        self.put_total += msgs
        self.put_bytes_total += size
        self.topic_put[topic] = self.topic_put.get(topic, 0) + msgs

    def on_get(self, group: str, topic: str, msgs: int) -> None:
        """Count messages handed to a consumer."""
        self.get_total += msgs
        key = f"{topic}@{group}"
        self.group_get[key] = self.group_get.get(key, 0) + msgs

    def sample(self) -> None:
        """Record the totals now (every 10 s) and forget samples older than a minute."""
        now = self.clock.monotonic()
        self._samples.append(
            _Sample(now, self.put_total, self.get_total, dict(self.topic_put), dict(self.group_get))
        )
        while len(self._samples) > 2 and now - self._samples[0].at_s > _WINDOW_S:
            self._samples.popleft()

    def _rate(self, now_value: int, then_value: int) -> float:
        then = self._samples[0]
        span = self.clock.monotonic() - then.at_s
        return (now_value - then_value) / span if span > 0 else 0.0

    def put_tps(self) -> float:
        """Messages stored per second over the last minute."""
        return self._rate(self.put_total, self._samples[0].put)

    def get_tps(self) -> float:
        """Messages delivered per second over the last minute."""
        return self._rate(self.get_total, self._samples[0].get)

    def topic_put_tps(self, topic: str) -> float:
        """Messages stored in ``topic`` per second over the last minute."""
        return self._rate(self.topic_put.get(topic, 0), self._samples[0].topic_put.get(topic, 0))

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages of ``topic`` delivered to ``group`` per second over the last minute."""
        key = f"{topic}@{group}"
        return self._rate(self.group_get.get(key, 0), self._samples[0].group_get.get(key, 0))
