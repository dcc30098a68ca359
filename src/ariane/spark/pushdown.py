"""Filters on ``queueId`` and ``queueOffset`` pushed into a batch read's plan.

How it works: with ``spark.sql.python.filterPushdown.enabled`` and the option
``pushFilters=true``, Spark hands the batch reader the query's conjunctive filters
(``DataSourceReader.pushFilters``). ``push_filters`` turns those it can apply exactly into
``OffsetBounds`` (comparisons, ``=`` and ``IN`` of integers on ``queueId`` and
``queueOffset``) and returns the others for Spark to evaluate (and ``queueOffset IN``, which
only narrows the read to its lowest..highest offset); ``narrow`` then drops the
queues a read does not need and clamps every queue's ``[start, end)``, so the executors never
pull the rows the filters reject (the reads keep exactly ``[start, end)``, which is why the
applied filters need no second check). Only ``pyspark.sql.datasource`` is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from ariane.spark.options import QueueKey

__all__ = ["OffsetBounds", "narrow", "push_filters"]

_NO_LIMIT = 2**63


@dataclass(frozen=True)
class _Interval:
    """Integers ``[low, high)`` (and, when ``values`` is given, only those)."""

    low: int = -_NO_LIMIT
    high: int = _NO_LIMIT
    values: frozenset[int] | None = None

    def admits(self, value: int) -> bool:
        return self.low <= value < self.high and (self.values is None or value in self.values)

    def apply(self, kind: type[Filter], value: object) -> _Interval | None:
        """This interval also bounded by ``column <kind> value``; ``None``: not applicable."""
        if kind is In:  # Spark passes a list (the type hint says tuple)
            if not isinstance(value, (tuple, list)) or not value:
                return None
            if not all(_integer(v) for v in value):
                return None
            kept = frozenset(value) if self.values is None else self.values & frozenset(value)
            return replace(self, values=kept)
        if not _integer(value):
            return None
        v = int(value)  # type: ignore[call-overload]
        bounds = {
            EqualTo: (v, v + 1),
            GreaterThan: (v + 1, _NO_LIMIT),
            GreaterThanOrEqual: (v, _NO_LIMIT),
            LessThan: (-_NO_LIMIT, v),
            LessThanOrEqual: (-_NO_LIMIT, v + 1),
        }.get(kind)
        if bounds is None:
            return None
        return replace(self, low=max(self.low, bounds[0]), high=min(self.high, bounds[1]))


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class OffsetBounds:
    """What the pushed filters allow: queue ids and queue offsets."""

    queue_id: _Interval = _Interval()
    queue_offset: _Interval = _Interval()


_COLUMNS = {"queueid": "queue_id", "queueoffset": "queue_offset"}
_KINDS = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In)


def push_filters(
    filters: Iterable[Filter], bounds: OffsetBounds | None = None
) -> tuple[OffsetBounds, list[Filter]]:
    """The bounds of the filters that can be applied exactly, and the others (by reference).

    Column names are matched without regard to case (Spark's default resolution).
    """
    got = bounds or OffsetBounds()
    rest: list[Filter] = []
    for f in filters:
        attribute: tuple[str, ...] = getattr(f, "attribute", ())
        field = _COLUMNS.get(attribute[0].lower()) if len(attribute) == 1 else None
        if field is None or type(f) not in _KINDS:
            rest.append(f)
            continue
        applied = getattr(got, field).apply(type(f), getattr(f, "value", None))
        if applied is None:
            rest.append(f)
            continue
        got = replace(got, **{field: applied})
        if field == "queue_offset" and type(f) is In:
            rest.append(f)  # the read is narrowed to its lowest..highest; Spark keeps the rest
    return got, rest


def narrow(
    bounds: OffsetBounds, start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]
) -> tuple[dict[QueueKey, int], dict[QueueKey, int]]:
    """``start``/``end`` of the queues the bounds admit, clamped to their offsets (a queue
    left with nothing to read gets ``end == start``)."""
    ids, offsets = bounds.queue_id, bounds.queue_offset
    lo, hi = offsets.low, offsets.high
    if offsets.values is not None:
        lo = max(lo, min(offsets.values, default=hi))
        hi = min(hi, max(offsets.values, default=lo - 1) + 1)
    begin: dict[QueueKey, int] = {}
    stop: dict[QueueKey, int] = {}
    for key, first in start.items():
        if key not in end or not ids.admits(key[2]):
            continue
        a = max(first, lo)
        begin[key] = a
        stop[key] = max(a, min(end[key], hi))
    return begin, stop
