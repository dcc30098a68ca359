"""Sliding-window counters (RocketMQ ``StatsItemSet``/``StatsItem``/``StatsSnapshot``).

How it works: a ``StatsItemSet`` holds, per key (``topic``, ``topic@group``, ...), a cumulative
``value`` and the number of increments ``times``. Three sampling rings keep snapshots of every
key taken at the same instants: every 10 s into the minute ring (7 kept), every 10 min into the
hour ring (7 kept), every hour into the day ring (25 kept), as RocketMQ's ``samplingInSeconds``,
``samplingInMinutes`` and ``samplingInHour`` do. ``minute/hour/day(key)`` compute RocketMQ's
``computeStatsData`` over the key's window: ``sum = last.value - first.value``,
``tps = sum * 1000 / (last.ts - first.ts)``, ``avgpt = sum / (last.times - first.times)``.

RocketMQ gives every item its own lists, seeded at the item's first sampling with a synthetic
``(now - period, 0, 0)`` snapshot so the first window already means something. Here the
snapshots are columns of one numpy array per ring (a few hundred bytes per key instead of
dozens of Java objects); each key remembers the sequence number of its first sampling in
each ring, and the window of a key younger than the ring starts at that synthetic snapshot,
so the results are the same as RocketMQ's. Increments are one dict lookup and two list
additions; sampling copies two columns per ring.

Memory is bounded: at most ``max_keys`` keys (increments of further keys are dropped and
counted in ``dropped``), and ``expire_idle`` forgets keys whose value has not moved for a
while. Nothing here reads a clock: callers pass monotonic milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "DAY_PERIOD_MS",
    "HOUR_PERIOD_MS",
    "MINUTE_PERIOD_MS",
    "StatsItemSet",
    "StatsSnapshot",
]

#: Sampling period of the minute, hour and day windows (ms) and how many samples each keeps.
MINUTE_PERIOD_MS = 10_000
HOUR_PERIOD_MS = 600_000
DAY_PERIOD_MS = 3_600_000
_KEEP = {MINUTE_PERIOD_MS: 7, HOUR_PERIOD_MS: 7, DAY_PERIOD_MS: 25}

_I64 = np.int64


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One window of one key (RocketMQ ``StatsSnapshot``).

    Attributes:
        sum: how much the value grew over the window.
        tps: ``sum`` per second over the window.
        avgpt: ``sum`` per increment (average value per call; for latency items the average
            latency).
        times: increments over the window.
    """

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


class _Ring:
    """Snapshots of every column at the same instants, the newest ``keep``."""

    __slots__ = ("born", "keep", "period_ms", "seq", "times", "ts", "values")

    def __init__(self, period_ms: int, capacity: int) -> None:
        self.period_ms = period_ms
        self.keep = _KEEP[period_ms]
        self.seq = 0  # snapshots taken so far; snapshot s lives in slot s % keep
        self.ts = np.zeros(self.keep, dtype=_I64)
        self.values = np.zeros((self.keep, capacity), dtype=_I64)
        self.times = np.zeros((self.keep, capacity), dtype=_I64)
        self.born = np.full(capacity, -1, dtype=_I64)  # seq of a column's first snapshot

    def grow(self, capacity: int) -> None:
        extra = capacity - self.born.shape[0]
        pad = np.zeros((self.keep, extra), dtype=_I64)
        self.values = np.concatenate([self.values, pad], axis=1)
        self.times = np.concatenate([self.times, pad], axis=1)
        self.born = np.concatenate([self.born, np.full(extra, -1, dtype=_I64)])

    def sample(
        self,
        now_ms: int,
        values: npt.NDArray[np.int64],
        times: npt.NDArray[np.int64],
        n: int,
    ) -> None:
        slot = self.seq % self.keep
        self.ts[slot] = now_ms
        self.values[slot, :n] = values
        self.times[slot, :n] = times
        fresh = self.born[:n] < 0
        self.born[:n][fresh] = self.seq
        self.seq += 1

    def clear(self, col: int) -> None:
        self.values[:, col] = 0
        self.times[:, col] = 0
        self.born[col] = -1

    def snapshot(self, col: int) -> StatsSnapshot:
        born = int(self.born[col])
        if born < 0 or self.seq == 0:
            return StatsSnapshot()
        last_seq = self.seq - 1
        last = last_seq % self.keep
        if born >= last_seq - self.keep + 2:  # the synthetic first snapshot is still kept
            first_ts = int(self.ts[born % self.keep]) - self.period_ms
            first_value = first_times = 0
        else:
            first = (last_seq - self.keep + 1) % self.keep
            first_ts = int(self.ts[first])
            first_value = int(self.values[first, col])
            first_times = int(self.times[first, col])
        total = int(self.values[last, col]) - first_value
        span = int(self.ts[last]) - first_ts
        times = int(self.times[last, col]) - first_times
        tps = total * 1000.0 / span if span > 0 else 0.0
        avgpt = total / times if times > 0 else 0.0
        return StatsSnapshot(total, tps, avgpt, times)


class StatsItemSet:
    """Counters of one stats name (``TOPIC_PUT_NUMS``...) for many keys.

    Args:
        name: the stats name.
        max_keys: most keys kept; increments of more keys are dropped (``dropped`` counts
            them).
        now_ms: monotonic milliseconds of creation; every ring takes its first sample then,
            as RocketMQ's schedulers (initial delay 0) do.

    Raises:
        ValueError: ``max_keys`` < 1.
    """

    def __init__(self, name: str, *, max_keys: int = 20_000, now_ms: int = 0) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be >= 1")
        self.name = name
        self.max_keys = max_keys
        self.dropped = 0
        self._index: dict[str, int] = {}
        self._keys: list[str | None] = []
        self._free: list[int] = []
        self._value: list[int] = []
        self._times: list[int] = []
        cap = 16
        self._rings = {p: _Ring(p, cap) for p in _KEEP}
        self._last_change_ms = np.zeros(cap, dtype=_I64)
        for ring in self._rings.values():
            ring.sample(now_ms, self._column(self._value), self._column(self._times), 0)

    # -- hot path ---------------------------------------------------------------------------

    def add(self, key: str, value: int, times: int = 1) -> None:
        """Add ``value`` to ``key`` in ``times`` calls' worth (RocketMQ ``addValue``)."""
        i = self._index.get(key)
        if i is None:
            i = self._new_key(key)
            if i < 0:
                return
        self._value[i] += value
        self._times[i] += times

    def _new_key(self, key: str) -> int:
        if len(self._index) >= self.max_keys:
            self.dropped += 1
            return -1
        if self._free:
            i = self._free.pop()
            self._keys[i] = key
            for ring in self._rings.values():  # samples taken while it was free
                ring.clear(i)
        else:
            i = len(self._keys)
            self._keys.append(key)
            self._value.append(0)
            self._times.append(0)
            cap = self._last_change_ms.shape[0]
            if i >= cap:
                for ring in self._rings.values():
                    ring.grow(cap * 2)
                self._last_change_ms = np.concatenate(
                    [self._last_change_ms, np.zeros(cap, dtype=_I64)]
                )
        self._index[key] = i
        return i

    # -- queries ------------------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def value(self, key: str) -> int:
        """The cumulative value of ``key`` (0 when unknown)."""
        i = self._index.get(key)
        return 0 if i is None else self._value[i]

    def times(self, key: str) -> int:
        """The cumulative increment count of ``key`` (0 when unknown)."""
        i = self._index.get(key)
        return 0 if i is None else self._times[i]

    def items(self) -> Iterator[tuple[str, int, int]]:
        """``(key, value, times)`` of every key (a snapshot; safe to mutate the set after)."""
        return iter([(k, self._value[i], self._times[i]) for k, i in self._index.items()])

    def _window(self, key: str, period_ms: int) -> StatsSnapshot | None:
        i = self._index.get(key)
        return None if i is None else self._rings[period_ms].snapshot(i)

    def minute(self, key: str) -> StatsSnapshot | None:
        """The last minute of ``key`` (``getStatsDataInMinute``), None when unknown."""
        return self._window(key, MINUTE_PERIOD_MS)

    def hour(self, key: str) -> StatsSnapshot | None:
        """The last hour of ``key`` (``getStatsDataInHour``), None when unknown."""
        return self._window(key, HOUR_PERIOD_MS)

    def day(self, key: str) -> StatsSnapshot | None:
        """The last day of ``key`` (``getStatsDataInDay``), None when unknown."""
        return self._window(key, DAY_PERIOD_MS)

    # -- sampling ------------------------------------------------------------------------------

    def _column(self, values: list[int]) -> npt.NDArray[np.int64]:
        return np.fromiter(values, dtype=_I64, count=len(values))

    def sample(self, period_ms: int, now_ms: int) -> None:
        """Take the snapshot of one window (``period_ms`` is one of the three periods).

        Raises:
            KeyError: ``period_ms`` is not a window period.
        """
        ring = self._rings[period_ms]
        n = len(self._keys)
        values = self._column(self._value)
        times = self._column(self._times)
        if period_ms == MINUTE_PERIOD_MS and ring.seq > 0:
            prev = (ring.seq - 1) % ring.keep
            moved = (ring.values[prev, :n] != values) | (ring.times[prev, :n] != times)
            moved |= ring.born[:n] < 0
            self._last_change_ms[:n][moved] = now_ms
        ring.sample(now_ms, values, times, n)

    # -- forgetting ----------------------------------------------------------------------------

    def delete(self, key: str) -> bool:
        """Forget ``key``; True if it existed."""
        i = self._index.pop(key, None)
        if i is None:
            return False
        self._keys[i] = None
        self._value[i] = 0
        self._times[i] = 0
        for ring in self._rings.values():
            ring.clear(i)
        self._last_change_ms[i] = 0
        self._free.append(i)
        return True

    def delete_where(self, predicate: str, part: str, sep: str = "@") -> int:
        """Forget the keys whose ``sep``-separated parts include ``part`` as the prefix
        (``predicate="prefix"``), the suffix (``"suffix"``) or an inner part (``"infix"``),
        as RocketMQ's ``delValueByPrefixKey``/``SuffixKey``/``InfixKey``; returns how many.

        Raises:
            ValueError: unknown predicate.
        """
        if predicate == "prefix":
            doomed = [k for k in self._index if k.startswith(part + sep)]
        elif predicate == "suffix":
            doomed = [k for k in self._index if k.endswith(sep + part)]
        elif predicate == "infix":
            doomed = [k for k in self._index if sep + part + sep in k]
        else:
            raise ValueError(f"unknown predicate {predicate!r}")
        for key in doomed:
            self.delete(key)
        return len(doomed)

    def expire_idle(self, now_ms: int, idle_ms: int) -> int:
        """Forget keys whose value has not changed at a minute sampling for ``idle_ms``
        (RocketMQ ``cleanResource``); returns how many."""
        cutoff = now_ms - idle_ms
        born = self._rings[MINUTE_PERIOD_MS].born
        doomed = [
            k for k, i in self._index.items() if born[i] >= 0 and self._last_change_ms[i] < cutoff
        ]
        for key in doomed:
            self.delete(key)
        return len(doomed)
