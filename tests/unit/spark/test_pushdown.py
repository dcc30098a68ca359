"""Filters on ``queueId``/``queueOffset`` pushed into a batch read's plan
(``ariane.spark.pushdown``): which are taken, which go back to Spark, and the exact ranges."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from ariane.spark.options import QueueKey
from ariane.spark.planning import plan_ranges
from ariane.spark.pushdown import OffsetBounds, narrow, push_filters
from ariane.spark.source import ArianeBatchReader, ArianeDataSource, ArianeFilteringBatchReader

START: dict[QueueKey, int] = {("T", "b", q): 10 for q in range(4)}
END: dict[QueueKey, int] = {("T", "b", q): 50 for q in range(4)}


def ranges(*filters: object) -> list[tuple[int, int, int]]:
    bounds, rest = push_filters(filters)  # type: ignore[arg-type]
    assert rest == []
    begin, stop = narrow(bounds, START, END)
    return [(r.queue_id, r.start, r.end) for r in plan_ranges(begin, stop)]


def test_queue_id_filters_drop_queues() -> None:
    assert ranges(EqualTo(("queueId",), 2)) == [(2, 10, 50)]
    assert ranges(In(("QUEUEID",), (0, 3, 9))) == [(0, 10, 50), (3, 10, 50)]
    spark_in = In(("queueId",), [1, 2])  # type: ignore[arg-type]  # what Spark 4.3 passes
    assert ranges(spark_in) == [(1, 10, 50), (2, 10, 50)]
    assert ranges(GreaterThan(("queueId",), 1), LessThanOrEqual(("queueId",), 2)) == [(2, 10, 50)]
    assert ranges(EqualTo(("queueId",), 1), EqualTo(("queueId",), 2)) == []


def test_queue_offset_filters_clamp_every_queue() -> None:
    got = ranges(GreaterThanOrEqual(("queueOffset",), 20), LessThan(("queueOffset",), 25))
    assert got == [(q, 20, 25) for q in range(4)]
    assert ranges(GreaterThan(("queueoffset",), 48)) == [(q, 49, 50) for q in range(4)]
    assert ranges(LessThanOrEqual(("queueOffset",), 10)) == [(q, 10, 11) for q in range(4)]
    assert ranges(EqualTo(("queueOffset",), 30), EqualTo(("queueId",), 0)) == [(0, 30, 31)]
    assert ranges(LessThan(("queueOffset",), 5)) == []  # below every queue's start
    assert ranges(GreaterThan(("queueOffset",), 99)) == []


def test_other_filters_go_back_to_spark() -> None:
    offsets_in = In(("queueOffset",), (12, 40))
    others = [
        EqualTo(("tags",), "A"),
        IsNotNull(("queueId",)),
        Not(EqualTo(("queueId",), 1)),
        StringStartsWith(("topic",), "T"),
        EqualTo(("queueId",), None),
        EqualTo(("queueId",), "1"),
        EqualTo(("queueId",), True),
        In(("queueId",), ()),
        EqualTo(("properties", "x"), 1),
    ]
    bounds, rest = push_filters([*others, offsets_in, EqualTo(("queueId",), 1)])
    assert rest == [*others, offsets_in]  # IN on offsets only narrows to 12..40
    assert all(a is b for a, b in zip(rest, [*others, offsets_in], strict=True))
    begin, stop = narrow(bounds, START, END)
    assert [(r.queue_id, r.start, r.end) for r in plan_ranges(begin, stop)] == [(1, 12, 41)]
    assert push_filters([]) == (OffsetBounds(), [])


def test_the_option_picks_the_filtering_reader() -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = StructType([StructField("body", BinaryType())])
    plain = ArianeDataSource({"nameserver": "n:1", "topic": "T"}).reader(schema)
    assert type(plain) is ArianeBatchReader
    on = {"nameserver": "n:1", "topic": "T", "pushFilters": "true"}
    reader = ArianeDataSource(on).reader(schema)
    assert isinstance(reader, ArianeFilteringBatchReader)
    kept = EqualTo(("tags",), "A")
    assert list(reader.pushFilters([EqualTo(("queueId",), 3), kept])) == [kept]
    assert list(reader.pushFilters([LessThan(("queueOffset",), 7)])) == []
    assert reader.bounds is not None
    assert narrow(reader.bounds, START, END) == ({("T", "b", 3): 10}, {("T", "b", 3): 10})
