"""Broker statistics (RocketMQ ``BrokerStatsManager``, ``BrokerStats`` and the rate part of
``StoreStatsService``).

How it works: each stats name (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``...) is a
:class:`~ariane.common.stats.StatsItemSet` keyed as RocketMQ keys it (``topic``,
``topic@group``, ``queueId@topic@group``, the cluster name for the ``BROKER_*`` totals).
The send and pull processors call ``on_put``/``on_get``; the remoting hook
(:mod:`ariane.broker.metrics_hook`) adds what it sees around requests (pulled bytes, pull and
put latency, send-backs). Increments are a dict lookup and two list additions.

``tick()`` runs every second on the event loop: it samples the windows when due (10 s, 10 min,
1 h), samples the store's totals for the ``putTps``/``getFoundTps``... strings (10 s, 60 s and
10 min rates, as ``StoreStatsService``), shifts the ``msgPutTotal*Morning`` totals at local
midnight (``BrokerStats.record``) and, every 10 minutes, forgets keys idle for
``maxStatsIdleTimeInMinutes`` and keys of topics and groups that no longer exist.
"""

from __future__ import annotations

import datetime
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ariane.common.clock import Clock
from ariane.common.histogram import Histogram
from ariane.common.stats import (
    DAY_PERIOD_MS,
    HOUR_PERIOD_MS,
    MINUTE_PERIOD_MS,
    StatsItemSet,
    StatsSnapshot,
)
from ariane.remoting.protocol.stats_bodies import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    STATS_NAMES,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_LATENCY",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "MESSAGE_SIZE_BUCKETS",
    "SNDBCK_PUT_NUMS",
    "STATS_NAMES",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStats",
    "StoreCounters",
]

#: ``rocketmq_message_size`` buckets (bytes), RocketMQ 5's view: 1 KiB ... 4 MiB.
MESSAGE_SIZE_BUCKETS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
_SIZE_BOUNDS = tuple(float(b) for b in MESSAGE_SIZE_BUCKETS)

_TICK_WINDOWS = (MINUTE_PERIOD_MS, HOUR_PERIOD_MS, DAY_PERIOD_MS)
_CLEAN_PERIOD_MS = 600_000
_STORE_SAMPLES = 601  # one a second: enough for the 600 s rate
_RATE_SPANS_S = (10, 60, 600)


@dataclass(frozen=True, slots=True)
class StoreCounters:
    """The store's running totals sampled for the rate strings (``StoreStatsService``).

    Attributes:
        put_times: messages appended to the CommitLog.
        get_found: reads that found messages.
        get_miss: reads that found none.
        get_transferred: messages handed out by reads.
    """

    put_times: int = 0
    get_found: int = 0
    get_miss: int = 0
    get_transferred: int = 0


def _rates(samples: deque[tuple[int, StoreCounters]], field: Callable[[StoreCounters], int]) -> str:
    """``"tps10 tps60 tps600"`` as RocketMQ formats them (a sample a second; windows that
    are not full yet use the oldest sample)."""
    if len(samples) < 2:
        return " ".join(["0.0"] * len(_RATE_SPANS_S))
    last_ms, last = samples[-1]
    out = []
    for span in _RATE_SPANS_S:
        then_ms, then = samples[max(0, len(samples) - 1 - span)]
        dt = last_ms - then_ms
        out.append(repr(float((field(last) - field(then)) * 1000 / dt)) if dt > 0 else "0.0")
    return " ".join(out)


class BrokerStats:
    """The broker's statistics.

    Args:
        clock: time source (``monotonic`` drives the windows, ``now_ms`` the local midnight).
        cluster_name: the key of the ``BROKER_*`` totals.
        max_keys: most keys per stats name.
        idle_minutes: forget keys that have not moved for this long (< 0: never).
        store_counters: reads the store's totals (None: zeros).
    """

    def __init__(
        self,
        clock: Clock,
        cluster_name: str = "DefaultCluster",
        *,
        max_keys: int = 20_000,
        idle_minutes: int = 1500,
        store_counters: Callable[[], StoreCounters] | None = None,
    ) -> None:
        self.clock = clock
        self.cluster_name = cluster_name
        self.idle_minutes = idle_minutes
        self.store_counters = store_counters or StoreCounters
        now = self._mono_ms()
        self.sets = {
            name: StatsItemSet(name, max_keys=max_keys, now_ms=now) for name in STATS_NAMES
        }
        self._topic_put_nums = self.sets[TOPIC_PUT_NUMS]
        self._topic_put_size = self.sets[TOPIC_PUT_SIZE]
        self._group_get_nums = self.sets[GROUP_GET_NUMS]
        self._broker_put = self.sets[BROKER_PUT_NUMS]
        self._broker_get = self.sets[BROKER_GET_NUMS]
        # the BROKER_* totals are plain counters, moved into their stats items when read
        self._put_total = self._put_synced = 0
        self._get_total = self._get_synced = 0
        #: ``rocketmq_message_size`` per topic (one observation per put: bytes / messages).
        self.message_size: dict[str, Histogram] = {}
        self._next_due = {p: now + p for p in _TICK_WINDOWS}
        self._next_clean = now + _CLEAN_PERIOD_MS
        # the store's totals start at zero with the process (the store may not exist yet)
        self._store_samples: deque[tuple[int, StoreCounters]] = deque(maxlen=_STORE_SAMPLES)
        self._store_samples.append((now, StoreCounters()))
        self._today = self._local_date()
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0
        #: topics / groups that still exist (set by the broker; None: keep everything).
        self.live_topics: Callable[[], Iterable[str]] | None = None

    def _mono_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    def _local_date(self) -> datetime.date:
        return datetime.datetime.fromtimestamp(self.clock.now_ms() / 1000).date()

    # -- hot path (processors) -----------------------------------------------------------------

    def on_put(self, topic: str, msgs: int, size: int) -> None:
        """Count ``msgs`` messages (``size`` stored bytes) put into ``topic`` by one request."""
        self._topic_put_nums.add(topic, msgs)
        self._topic_put_size.add(topic, size)
        self._put_total += msgs
        hist = self.message_size.get(topic)
        if hist is None:
            if topic not in self._topic_put_nums:  # over the key limit: not tracked
                return
            hist = self.message_size[topic] = Histogram(MESSAGE_SIZE_BUCKETS)
        each = size / msgs if msgs else size
        hist.counts[bisect_left(_SIZE_BOUNDS, each)] += 1
        hist.sum += each
        hist.count += 1

    def on_put_each(self, topic: str, sizes: list[int]) -> None:
        """``on_put(topic, 1, size)`` for each of ``sizes`` (single sends of one read), with
        one lookup per counter: the same counts, sums and histogram buckets."""
        n = len(sizes)
        total = sum(sizes)
        self._topic_put_nums.add(topic, n, n)
        self._topic_put_size.add(topic, total, n)
        self._put_total += n
        hist = self.message_size.get(topic)
        if hist is None:
            if topic not in self._topic_put_nums:  # over the key limit: not tracked
                return
            hist = self.message_size[topic] = Histogram(MESSAGE_SIZE_BUCKETS)
        counts = hist.counts
        if n:
            # a read's sends are mostly of one size: when the smallest and the largest fall in
            # one bucket, every size between them does (bisect is monotonic), so no loop
            first = bisect_left(_SIZE_BOUNDS, min(sizes))
            if first == bisect_left(_SIZE_BOUNDS, max(sizes)):
                counts[first] += n
            else:
                for size in sizes:
                    counts[bisect_left(_SIZE_BOUNDS, size)] += 1
        hist.sum += float(total)
        hist.count += n

    def on_get(self, group: str, topic: str, msgs: int) -> None:
        """Count ``msgs`` messages of ``topic`` handed to ``group`` by one pull."""
        self._group_get_nums.add(f"{topic}@{group}", msgs)
        self._get_total += msgs

    def _sync_totals(self) -> None:
        if self._put_total != self._put_synced:
            self._broker_put.add(self.cluster_name, self._put_total - self._put_synced, 0)
            self._put_synced = self._put_total
        if self._get_total != self._get_synced:
            self._broker_get.add(self.cluster_name, self._get_total - self._get_synced, 0)
            self._get_synced = self._get_total

    # -- from the remoting hook ----------------------------------------------------------------

    def on_get_size(self, group: str, topic: str, size: int) -> None:
        """Count the bytes of one pull answer (``GROUP_GET_SIZE``)."""
        self.sets[GROUP_GET_SIZE].add(f"{topic}@{group}", size)

    def on_get_latency(self, group: str, topic: str, queue_id: int, ms: int) -> None:
        """Record how long one successful pull took (``GROUP_GET_LATENCY``)."""
        self.sets[GROUP_GET_LATENCY].add(f"{queue_id}@{topic}@{group}", ms)

    def on_send_back(self, group: str, topic: str) -> None:
        """Count one message a consumer sent back (``SNDBCK_PUT_NUMS``)."""
        self.sets[SNDBCK_PUT_NUMS].add(f"{topic}@{group}", 1)

    # -- queries -------------------------------------------------------------------------------

    @property
    def put_total(self) -> int:
        """Messages put by clients since start (``BROKER_PUT_NUMS``)."""
        return self._put_total

    @property
    def get_total(self) -> int:
        """Messages handed to consumers since start (``BROKER_GET_NUMS``)."""
        return self._get_total

    def topic_put_tps(self, topic: str) -> float:
        """``TOPIC_PUT_NUMS`` minute TPS of ``topic`` (``tpsTopicPutNums``)."""
        snap = self._topic_put_nums.minute(topic)
        return 0.0 if snap is None else snap.tps

    def group_get_tps(self, group: str, topic: str) -> float:
        """``GROUP_GET_NUMS`` minute TPS of ``topic@group`` (``tpsGroupGetNums``)."""
        snap = self._group_get_nums.minute(f"{topic}@{group}")
        return 0.0 if snap is None else snap.tps

    def view(
        self, name: str, key: str
    ) -> tuple[StatsSnapshot, StatsSnapshot, StatsSnapshot] | None:
        """Minute, hour and day windows of one item (VIEW_BROKER_STATS_DATA); None when the
        name or key is unknown."""
        items = self.sets.get(name)
        if items is None:
            return None
        self._sync_totals()
        minute, hour, day = items.minute(key), items.hour(key), items.day(key)
        if minute is None or hour is None or day is None:
            return None
        return minute, hour, day

    def msg_put_total_today_now(self) -> int:
        """Messages appended by the store since start (``getMsgPutTotalTodayNow``)."""
        return self.store_counters().put_times

    def runtime_rates(self) -> dict[str, str]:
        """``putTps``, ``getFoundTps``, ``getMissTps``, ``getTotalTps``, ``getTransferredTps``:
        each ``"<10 s> <60 s> <600 s>"`` messages (or reads) per second."""
        s = self._store_samples
        return {
            "putTps": _rates(s, lambda c: c.put_times),
            "getFoundTps": _rates(s, lambda c: c.get_found),
            "getMissTps": _rates(s, lambda c: c.get_miss),
            "getTotalTps": _rates(s, lambda c: c.get_found + c.get_miss),
            "getTransferredTps": _rates(s, lambda c: c.get_transferred),
        }

    # -- periodic work -------------------------------------------------------------------------

    def tick(self) -> None:
        """Every second: take due samples, shift the morning totals, forget idle keys."""
        now = self._mono_ms()
        self._store_samples.append((now, self.store_counters()))
        self._sync_totals()
        for period, due in self._next_due.items():
            if now >= due:
                for items in self.sets.values():
                    items.sample(period, now)
                # a late tick does not bunch samples up: the next one is a period away
                self._next_due[period] = due + period if now - due < period else now + period
        today = self._local_date()
        if today != self._today:
            self._today = today
            self.record_morning()
        if now >= self._next_clean:
            self._next_clean = now + _CLEAN_PERIOD_MS
            self.clean(now)

    def record_morning(self) -> None:
        """Shift the daily totals (RocketMQ ``BrokerStats.record``, run at midnight)."""
        self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
        self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
        self.msg_put_total_today_morning = self.msg_put_total_today_now()
        self.msg_get_total_today_morning = self.get_total

    def clean(self, now_ms: int) -> None:
        """Forget idle keys and keys of deleted topics (``cleanAllResource``)."""
        if self.idle_minutes >= 0:
            # RocketMQ: anything from 0 to 10 minutes means 30
            idle_ms = (30 if self.idle_minutes <= 10 else self.idle_minutes) * 60_000
            for name, items in self.sets.items():
                if name not in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
                    items.expire_idle(now_ms, idle_ms)
        if self.live_topics is not None:
            live = set(self.live_topics())
            for items in self.sets.values():
                for key, _, _ in items.items():
                    topic = _topic_of(items.name, key)
                    if topic is not None and topic not in live:
                        items.delete(key)
        for topic in [t for t in self.message_size if t not in self._topic_put_nums]:
            del self.message_size[topic]

    def on_topic_deleted(self, topic: str) -> None:
        """Forget everything about ``topic`` (``onTopicDeleted``)."""
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sets[name].delete(topic)
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            self.sets[name].delete_where("prefix", topic)
        self.sets[GROUP_GET_LATENCY].delete_where("infix", topic)
        self.message_size.pop(topic, None)

    def on_group_deleted(self, group: str) -> None:
        """Forget everything about ``group`` (``onGroupDeleted``)."""
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, GROUP_GET_LATENCY):
            self.sets[name].delete_where("suffix", group)


def _topic_of(name: str, key: str) -> str | None:
    """The topic inside a stats key (None for the cluster-keyed totals)."""
    if name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
        return None
    if name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
        return key
    parts = key.split("@")
    if name == GROUP_GET_LATENCY:
        return parts[1] if len(parts) > 1 else None
    return parts[0]
