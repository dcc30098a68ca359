"""Rows as Arrow: messages to record batches (reads) and record batches to messages (writes).

How it works: the source's schema is fixed (``SCHEMA_DDL``); ``messages_to_batch`` builds one
``pyarrow.RecordBatch`` per pull, column by column, which Spark takes without converting rows
one by one. ``batch_to_rows`` reads the sink's input columns (by name, any subset of
``SINK_COLUMNS``) back into plain Python values. Only pyarrow is imported here, never Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ariane.common import properties as props
from ariane.common.message import MessageExt
from ariane.errors import InvalidArgumentError
from ariane.spark.options import PropertiesMode

__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA_DDL",
    "SINK_COLUMNS",
    "SinkRow",
    "batch_to_rows",
    "keys_column",
    "messages_to_batch",
]

#: The source's schema (Spark DDL).
SCHEMA_DDL = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, msgId STRING, "
    "keys STRING, tags STRING, body BINARY, properties MAP<STRING, STRING>, "
    "bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, bornHost STRING, storeHost STRING, "
    "reconsumeTimes INT"
)

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("brokerName", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("bornTimestamp", _TS),
        ("storeTimestamp", _TS),
        ("bornHost", pa.string()),
        ("storeHost", pa.string()),
        ("reconsumeTimes", pa.int32()),
    ]
)

#: Columns the sink understands (all optional but ``body``).
SINK_COLUMNS = ("topic", "body", "tags", "keys", "properties", "delayLevel", "shardingKey")


def _properties(msg: MessageExt, mode: PropertiesMode) -> list[tuple[str, str]] | None:
    if mode is PropertiesMode.NONE:
        return None
    if mode is PropertiesMode.ALL:
        return list(msg.properties.items())
    system = props.SYSTEM_KEYS
    return [(k, v) for k, v in msg.properties.items() if k not in system]


def messages_to_batch(
    msgs: Sequence[MessageExt], broker: str, mode: PropertiesMode
) -> pa.RecordBatch:
    """One record batch (``ARROW_SCHEMA``) of messages pulled from ``broker``."""
    n = len(msgs)
    get = [m.properties.get for m in msgs]
    columns = [
        pa.array([m.topic for m in msgs], pa.string()),
        pa.array([broker] * n, pa.string()),
        pa.array([m.queue_id for m in msgs], pa.int32()),
        pa.array([m.queue_offset for m in msgs], pa.int64()),
        pa.array([m.msg_id for m in msgs], pa.string()),
        pa.array([g(props.KEYS) for g in get], pa.string()),
        pa.array([g(props.TAGS) for g in get], pa.string()),
        pa.array([m.body for m in msgs], pa.binary()),
        pa.array([_properties(m, mode) for m in msgs], pa.map_(pa.string(), pa.string())),
        pa.array([m.born_timestamp_ms * 1000 for m in msgs], _TS),
        pa.array([m.store_timestamp_ms * 1000 for m in msgs], _TS),
        pa.array([str(m.born_host) for m in msgs], pa.string()),
        pa.array([str(m.store_host) for m in msgs], pa.string()),
        pa.array([m.reconsume_times for m in msgs], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


@dataclass(slots=True)
class SinkRow:
    """One row of the sink's input, as plain values."""

    topic: str | None
    body: bytes
    tags: str | None
    keys: list[str] | None
    properties: dict[str, str] | None
    delay_level: int
    sharding_key: str | None


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    values: list[Any] = batch.column(index).to_pylist()
    return values


def check_sink_schema(names: Sequence[str]) -> None:
    """Reject an input without ``body`` or with columns the sink does not know.

    Raises:
        InvalidArgumentError: naming the offending columns.
    """
    if "body" not in names:
        raise InvalidArgumentError("the ariane sink needs a body column (binary or string)")
    unknown = [n for n in names if n not in SINK_COLUMNS]
    if unknown:
        raise InvalidArgumentError(
            f"the ariane sink does not know the columns {unknown}; it takes {list(SINK_COLUMNS)}"
        )


def _keys(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [k for k in value.split(props.KEY_SEPARATOR) if k] or None
    return [str(k) for k in value if k] or None


def keys_column(column: pa.Array) -> list[str | None]:
    """Per row, the ``KEYS`` property the sink's message gets for the keys column's value
    (``None``: no keys), as ``Message(keys=...)`` joins them."""
    out: list[str | None] = []
    for value in column.to_pylist():
        keys = _keys(value)
        joined = props.KEY_SEPARATOR.join(k for k in keys if k).strip() if keys else ""
        out.append(joined or None)
    return out


def batch_to_rows(batch: pa.RecordBatch) -> Iterator[SinkRow]:
    """The rows of a sink input batch (columns by name; missing ones are ``None``/0).

    Raises:
        InvalidArgumentError: a null body, a system property name, a negative delay level.
    """
    n = batch.num_rows
    none: list[Any] = [None] * n
    bodies = _column(batch, "body")
    if bodies is None:
        raise InvalidArgumentError("the ariane sink needs a body column")
    topics = _column(batch, "topic") or none
    tags = _column(batch, "tags") or none
    keys = _column(batch, "keys") or none
    properties = _column(batch, "properties") or none
    delays = _column(batch, "delayLevel") or none
    shards = _column(batch, "shardingKey") or none
    system = props.SYSTEM_KEYS
    for i in range(n):
        body = bodies[i]
        if body is None:
            raise InvalidArgumentError("the body column must not be null")
        if isinstance(body, str):
            body = body.encode()
        user: dict[str, str] | None = None
        raw = properties[i]
        if raw:
            pairs = raw.items() if isinstance(raw, dict) else raw
            user = {}
            for k, v in pairs:
                if k in system:
                    raise InvalidArgumentError(
                        f"property {k!r} is reserved by RocketMQ; use the tags/keys/delayLevel "
                        "columns instead"
                    )
                if v is not None:
                    user[str(k)] = str(v)
        delay = delays[i] or 0
        if delay < 0:
            raise InvalidArgumentError(f"delayLevel must be >= 0, not {delay}")
        yield SinkRow(
            topics[i], bytes(body), tags[i] or None, _keys(keys[i]), user, int(delay), shards[i]
        )
