"""Latency fault tolerance for sends (RocketMQ ``LatencyFaultToleranceImpl``, ``FaultItem``,
``MQFaultStrategy``; book §3.7 and §17.30).

How it works: after every send attempt the producer reports the broker and how long the
attempt took (``update_fault_item``); an exception counts as an *isolation* with a latency of
30 000 ms. The latency maps through ``LATENCY_MAX_MS`` to ``NOT_AVAILABLE_DURATION_MS``: the
broker is avoided for that long (a send slower than 550 ms: 30 s; an exception: 10 minutes; a
fast send: not at all, which also lifts an earlier ban). This only happens with
``sendLatencyFaultEnable``; otherwise a failed broker is avoided only during the retries of one
send (``TopicPublishInfo.select_one_message_queue(last_broker_name)``).

Selection with the strategy on (``select_one_message_queue``): round robin over the queues,
taking the first queue whose broker is available and is not the broker the previous attempt of
this send used (RocketMQ 4.9 returns the first *available* queue; 4.4-4.7's literal condition
"available and equal to the last broker" is a known oddity we do not copy, see book §17.30);
then any available queue; if every broker is banned, the least bad one
(``pick_one_at_least``: available first, then lower latency, then earlier end of ban) gets a
queue chosen on it *as a copy* (Java mutates the shared route entry). Time comes from an
injected clock so tests run without sleeping.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ariane.client._route import TopicPublishInfo
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = [
    "ISOLATION_LATENCY_MS",
    "LATENCY_MAX_MS",
    "NOT_AVAILABLE_DURATION_MS",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "compute_not_available_duration",
]

#: Latency thresholds (ms) of ``MQFaultStrategy.latencyMax``.
LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
#: Ban durations (ms) for each threshold (``notAvailableDuration``).
NOT_AVAILABLE_DURATION_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: The latency an exception counts as (``isolation=true``): maps to a 600 s ban.
ISOLATION_LATENCY_MS = 30000


def compute_not_available_duration(latency_ms: int) -> int:
    """The ban (ms) for a send that took ``latency_ms`` (``computeNotAvailableDuration``)."""
    for threshold, duration in zip(
        reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS), strict=True
    ):
        if latency_ms >= threshold:
            return duration
    return 0


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency and the time (ms) from which it may be used again."""

    name: str
    current_latency_ms: int
    start_timestamp_ms: int

    def is_available(self, now_ms: int) -> bool:
        """Whether the ban is over."""
        return now_ms - self.start_timestamp_ms >= 0


class LatencyFaultTolerance:
    """Broker name -> ``FaultItem`` (``LatencyFaultToleranceImpl``).

    Args:
        now_ms: the clock (milliseconds); tests pass a manual one.
        rng: randomness for ``pick_one_at_least``'s shuffle.
    """

    def __init__(self, now_ms: Callable[[], int], rng: random.Random | None = None) -> None:
        self._now_ms = now_ms
        self._rng = rng or random.Random()
        self._items: dict[str, FaultItem] = {}
        self._which_worst = 0

    def update_fault_item(self, name: str, latency_ms: int, not_available_ms: int) -> None:
        """Record a latency and ban ``name`` for ``not_available_ms`` from now."""
        start = self._now_ms() + not_available_ms
        item = self._items.get(name)
        if item is None:
            self._items[name] = FaultItem(name, latency_ms, start)
        else:
            item.current_latency_ms = latency_ms
            item.start_timestamp_ms = start

    def is_available(self, name: str) -> bool:
        """Whether ``name`` is not banned (brokers never reported are available)."""
        item = self._items.get(name)
        return item is None or item.is_available(self._now_ms())

    def remove(self, name: str) -> None:
        """Forget ``name`` (it rejoins selection)."""
        self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker to use when all are banned: the better half, in turn (``pickOneAtLeast``)."""
        if not self._items:
            return None
        now = self._now_ms()
        items = list(self._items.values())
        self._rng.shuffle(items)
        items.sort(
            key=lambda it: (
                not it.is_available(now),
                it.current_latency_ms,
                it.start_timestamp_ms,
            )
        )
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        index = self._which_worst % half
        self._which_worst += 1
        return items[index].name

    def __contains__(self, name: str) -> bool:
        return name in self._items


class MQFaultStrategy:
    """Queue selection with or without latency fault tolerance (``MQFaultStrategy``).

    Args:
        enabled: ``sendLatencyFaultEnable`` (default off, as in RocketMQ).
        now_ms: the clock (milliseconds).
        rng: randomness for the tolerance table.
    """

    def __init__(
        self,
        *,
        enabled: bool = False,
        now_ms: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.enabled = enabled
        self.tolerance = LatencyFaultTolerance(now_ms, rng)

    def select_one_message_queue(
        self, info: TopicPublishInfo, last_broker_name: str | None
    ) -> MessageQueue:
        """Pick the queue for the next attempt of a send.

        Raises:
            IndexError: ``info`` has no queues.
        """
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        queues = info.message_queues
        size = len(queues)
        tolerance = self.tolerance
        index = info.next_index()
        fallback: MessageQueue | None = None
        for i in range(size):
            mq = queues[(index + i) % size]
            if tolerance.is_available(mq.broker_name):
                if mq.broker_name != last_broker_name:
                    return mq
                if fallback is None:
                    fallback = mq
        if fallback is not None:
            return fallback
        not_best = tolerance.pick_one_at_least()
        if not_best is not None:
            write_queues = info.write_queue_nums_of(not_best)
            if write_queues > 0:
                return MessageQueue(info.topic, not_best, info.next_index() % write_queues)
            tolerance.remove(not_best)
        return info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, latency_ms: int, isolation: bool) -> None:
        """Report one attempt; does nothing unless the strategy is enabled."""
        if not self.enabled:
            return
        duration = compute_not_available_duration(ISOLATION_LATENCY_MS if isolation else latency_ms)
        self.tolerance.update_fault_item(broker_name, latency_ms, duration)
