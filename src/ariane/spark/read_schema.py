"""A read schema given by the user: which of the source's columns a read builds.

How it works: the ``ariane`` source has a fixed schema (messages, or trace records with
``decode=trace``). PySpark's Python Data Source API has no column-pruning hook, so a read of a
few columns says so with a schema (``spark.read.format("ariane").schema("queueOffset BIGINT,
body BINARY")``): ``select_columns`` checks it against the fixed schema (every field one of its
columns, matched as Spark matches names by default, case-insensitively; the same type; nullable)
and returns the ``ReadColumns`` the reader builds, in the user's order and spelling, or
``None`` for the fixed schema itself. Only ``pyspark.sql.types`` is imported here (Spark's
planner workers unpickle the readers); the Arrow schemas are imported when checking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from ariane.errors import InvalidArgumentError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ReadColumns", "select_columns"]


@dataclass(frozen=True)
class ReadColumns:
    """The columns a read builds: the source's names (``columns``) and the user's spelling of
    them (``names``), both in the user's order."""

    columns: tuple[str, ...]
    names: tuple[str, ...]

    def rename(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (of ``columns``) with the user's names."""
        if self.names == self.columns:
            return batch
        return batch.rename_columns(list(self.names))


def _spark_type(kind: pa.DataType) -> DataType:
    import pyarrow as pa

    if pa.types.is_map(kind):
        return MapType(StringType(), StringType(), True)
    if pa.types.is_timestamp(kind):
        return TimestampType()
    simple: dict[pa.DataType, DataType] = {
        pa.string(): StringType(),
        pa.int32(): IntegerType(),
        pa.int64(): LongType(),
        pa.binary(): BinaryType(),
        pa.bool_(): BooleanType(),
    }
    return simple[kind]


def _fixed(trace: bool) -> tuple[dict[str, DataType], str]:
    """The fixed schema's columns and types, and its DDL (for messages)."""
    if trace:
        from ariane.spark._trace import TRACE_ARROW_SCHEMA as arrow_schema
        from ariane.spark._trace import TRACE_SCHEMA_DDL as ddl
    else:
        from ariane.spark._arrow import ARROW_SCHEMA as arrow_schema
        from ariane.spark._arrow import SCHEMA_DDL as ddl
    return {f.name: _spark_type(f.type) for f in arrow_schema}, ddl


def _match(name: str, known: Sequence[str]) -> str | None:
    if name in known:
        return name
    folded = [k for k in known if k.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def select_columns(schema: StructType, trace: bool = False) -> ReadColumns | None:
    """The columns ``schema`` selects, or ``None`` when it is the fixed schema itself.

    Raises:
        InvalidArgumentError: a field is not one of the source's columns, has another type,
            is not nullable or is named twice, or the schema is empty.
    """
    types, ddl = _fixed(trace)
    known = list(types)
    allowed = f"the ariane source's columns are {ddl} (read any of them, in any order)"
    if not schema.fields:
        raise InvalidArgumentError(f"the read schema is empty: {allowed}")
    columns: list[str] = []
    for field in schema.fields:
        column = _match(field.name, known)
        if column is None:
            raise InvalidArgumentError(f"unknown column {field.name!r} in the schema: {allowed}")
        if field.dataType != types[column]:
            raise InvalidArgumentError(
                f"column {field.name!r} has type {field.dataType.simpleString()} in the schema, "
                f"not {types[column].simpleString()}: {allowed}"
            )
        if not field.nullable:
            raise InvalidArgumentError(
                f"column {field.name!r} is NOT NULL in the schema: {allowed}, all nullable"
            )
        if column in columns:
            raise InvalidArgumentError(
                f"column {field.name!r} is named twice in the schema: {allowed}"
            )
        columns.append(column)
    if columns == known and schema.fieldNames() == known:
        return None
    return ReadColumns(tuple(columns), tuple(schema.fieldNames()))
