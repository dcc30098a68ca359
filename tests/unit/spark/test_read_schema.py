"""A user's read schema (``ariane.spark.read_schema``): a subset of the source's columns in any
order, names matched as Spark matches them, types checked, one clear error otherwise."""

from __future__ import annotations

import pickle

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ariane.errors import InvalidArgumentError
from ariane.spark._arrow import ARROW_SCHEMA
from ariane.spark._trace import TRACE_ARROW_SCHEMA
from ariane.spark.options import SourceOptions
from ariane.spark.read_schema import ReadColumns, select_columns
from ariane.spark.source import ArianeDataSource, ArianeStreamReader

FULL = StructType(
    [
        StructField("topic", StringType()),
        StructField("brokerName", StringType()),
        StructField("queueId", IntegerType()),
        StructField("queueOffset", LongType()),
        StructField("msgId", StringType()),
        StructField("keys", StringType()),
        StructField("tags", StringType()),
        StructField("body", BinaryType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("bornTimestamp", TimestampType()),
        StructField("storeTimestamp", TimestampType()),
        StructField("bornHost", StringType()),
        StructField("storeHost", StringType()),
        StructField("reconsumeTimes", IntegerType()),
    ]
)


def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t) for n, t in fields])  # type: ignore[arg-type]


def test_the_fixed_schema_selects_everything() -> None:
    assert FULL.fieldNames() == ARROW_SCHEMA.names
    assert select_columns(FULL) is None


def test_a_subset_in_any_order_and_spelling() -> None:
    got = select_columns(schema(("BODY", BinaryType()), ("queueoffset", LongType())))
    assert got == ReadColumns(("body", "queueOffset"), ("BODY", "queueoffset"))
    batch = pa.RecordBatch.from_pydict(
        {"body": [b"x"], "queueOffset": [3]}, schema=pa.schema([ARROW_SCHEMA.field("body"),
                                                                ARROW_SCHEMA.field("queueOffset")])
    )  # fmt: skip
    assert got.rename(batch).schema.names == ["BODY", "queueoffset"]
    every = StructType(list(reversed(FULL.fields)))
    whole = select_columns(every)
    assert whole is not None
    assert whole.columns == tuple(reversed(ARROW_SCHEMA.names))
    trace = select_columns(
        schema(("traceQueueOffset", LongType()), ("costMs", IntegerType())), True
    )
    assert trace == ReadColumns(("traceQueueOffset", "costMs"), ("traceQueueOffset", "costMs"))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (schema(("body", BinaryType()), ("nope", StringType())), "unknown column 'nope'"),
        (schema(("queueOffset", IntegerType())), "'queueOffset' has type int in the schema, not "
                                                 "bigint"),
        (schema(("properties", MapType(StringType(), IntegerType()))), "map<string,int>"),
        (StructType([StructField("body", BinaryType(), False)]), "'body' is NOT NULL"),
        (schema(("body", BinaryType()), ("Body", BinaryType())), "'Body' is named twice"),
        (StructType([]), "the read schema is empty"),
        (schema(("costMs", IntegerType())), "unknown column 'costMs'"),
    ],
)  # fmt: skip
def test_a_wrong_schema_is_one_clear_error(bad: StructType, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as info:
        select_columns(bad)
    assert "(read any of them, in any order)" in str(info.value)
    assert "queueOffset BIGINT, msgId STRING" in str(info.value)


def test_trace_schema_errors_name_the_trace_columns() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown column 'body'") as info:
        select_columns(schema(("body", BinaryType())), trace=True)
    assert "traceQueueOffset BIGINT" in str(info.value)
    assert select_columns(
        StructType([StructField(f.name, StringType()) for f in TRACE_ARROW_SCHEMA][:1]), True
    ) == ReadColumns(("traceType",), ("traceType",))


def test_readers_carry_the_selection() -> None:
    source = ArianeDataSource({"nameserver": "127.0.0.1:9876", "topic": "T"})
    picked = schema(("body", BinaryType()))
    batch = source.reader(picked)
    assert batch.selected == ReadColumns(("body",), ("body",))  # type: ignore[attr-defined]
    stream = source.streamReader(picked)
    assert isinstance(stream, ArianeStreamReader)
    copy = pickle.loads(pickle.dumps(stream))
    assert copy.selected == ReadColumns(("body",), ("body",))
    assert source.reader(FULL).selected is None  # type: ignore[attr-defined]
    opts = SourceOptions.parse({"nameserver": "127.0.0.1:9876", "topic": "T"})
    assert ArianeStreamReader(opts).selected is None
    with pytest.raises(InvalidArgumentError, match="unknown column"):
        source.streamReader(schema(("nope", StringType())))
