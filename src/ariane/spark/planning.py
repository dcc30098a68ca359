"""Planning reads: queue ranges, splitting for parallelism, rate limits (no Spark, no I/O).

How it works: a read is a set of half-open queue ranges ``[start, end)``, one per queue, as
Spark's Kafka source plans ``KafkaOffsetRange``s. ``split_ranges`` cuts big ranges so that a
read of few queues still has ``minPartitions`` tasks (Kafka's ``KafkaOffsetRangeCalculator``:
each range gets a share of the partitions proportional to its size). ``rate_limit`` bounds a
micro-batch to ``maxOffsetsPerTrigger`` offsets in total, shared among queues in proportion
to their backlog; unlike Kafka's (which rounds small shares up and may overshoot) it hands out
exactly ``min(limit, backlog)`` offsets by largest remainder, so a batch never exceeds the
limit and still always advances. Every function is deterministic in its inputs, which is what
makes a replayed micro-batch read the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ariane.spark.options import QueueKey

__all__ = ["QueueRange", "plan_ranges", "rate_limit", "split_ranges"]


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue; the unit of work of one Spark task."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        """(topic, broker, queue id)."""
        return (self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        """Number of offsets covered."""
        return max(0, self.end - self.start)


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[QueueRange]:
    """One range per queue of ``end`` with something to read, sorted by queue.

    Queues missing from ``start`` are skipped (the caller resolves new queues first).
    """
    out = []
    for key in sorted(end):
        begin = start.get(key)
        if begin is None or end[key] <= begin:
            continue
        out.append(QueueRange(key[0], key[1], key[2], begin, end[key]))
    return out


def split_ranges(ranges: list[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """Cut ranges so there are at least ``min_partitions`` of them (when offsets allow).

    A range gets a share of ``min_partitions`` proportional to its size (largest remainder,
    at least 1, at most one piece per offset), cut into pieces of near-equal size;
    nothing is split when the ranges already number ``min_partitions`` or more.
    """
    if not min_partitions or len(ranges) >= min_partitions:
        return list(ranges)
    total = sum(r.size for r in ranges)
    if total == 0:
        return list(ranges)
    # largest-remainder shares of min_partitions, at least 1 and at most size per range
    counts = [max(1, r.size * min_partitions // total) for r in ranges]
    order = sorted(
        range(len(ranges)), key=lambda i: (-(ranges[i].size * min_partitions % total), i)
    )
    while sum(counts) < min_partitions:
        grown = False
        for i in order:
            if sum(counts) >= min_partitions:
                break
            if counts[i] < ranges[i].size:
                counts[i] += 1
                grown = True
        if not grown:
            break
    out: list[QueueRange] = []
    for r, count in zip(ranges, counts, strict=True):
        parts = min(count, max(1, r.size))
        step, extra = divmod(r.size, parts)
        begin = r.start
        for i in range(parts):
            stop = begin + step + (1 if i < extra else 0)
            out.append(QueueRange(r.topic, r.broker, r.queue_id, begin, stop))
            begin = stop
    return out


def rate_limit(
    start: Mapping[QueueKey, int], end: Mapping[QueueKey, int], limit: int
) -> dict[QueueKey, int]:
    """``end`` moved back so that at most ``limit`` offsets lie between ``start`` and it.

    Shares are proportional to each queue's backlog; remainders go to the largest fractions
    (ties: queue order). Queues absent from ``start`` keep their ``end``.
    """
    backlog = {k: end[k] - start[k] for k in sorted(end) if k in start and end[k] > start[k]}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    shares: dict[QueueKey, int] = {}
    remainders: list[tuple[int, int, QueueKey]] = []
    for index, (key, size) in enumerate(backlog.items()):
        whole, rem = divmod(size * limit, total)
        shares[key] = whole
        remainders.append((-rem, index, key))
    left = limit - sum(shares.values())
    for _, _, key in sorted(remainders)[:left]:
        shares[key] += 1
    out = dict(end)
    for key, share in shares.items():
        out[key] = start[key] + share
    return out
