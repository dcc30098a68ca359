"""Trace-topic messages as rows of decoded trace records (``option("decode", "trace")``).

How it works: with ``decode=trace`` the source reads the trace topic like any topic, but each
pulled message becomes one row per trace record it holds (``ariane.client.trace.
trace_entries``) under the fixed schema ``TRACE_SCHEMA_DDL``: the record's fields (null where
a record type has none), the trace message's position (``traceBrokerName``, ``traceQueueId``,
``traceQueueOffset``, ``traceMsgId``) and ``decodeError``, which is null for good records and
says what is wrong for a record that does not decode (its other fields are then null), so a
bad body never stops a query. Consume records do not carry the topic; join SubBefore and
SubAfter on ``requestId`` and ``msgId``. Only pyarrow is imported here, never Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ariane.client.trace import TraceEntry, UndecodableTraceMessage, trace_entries
from ariane.common.message import MessageExt

__all__ = ["TRACE_ARROW_SCHEMA", "TRACE_SCHEMA_DDL", "trace_messages_to_batch"]

#: The schema of ``decode=trace`` reads (Spark DDL).
TRACE_SCHEMA_DDL = (
    "traceType STRING, timestamp TIMESTAMP, groupName STRING, clientHost STRING, "
    "storeHost STRING, costMs INT, success BOOLEAN, retryTimes INT, msgId STRING, "
    "topic STRING, tags STRING, keys STRING, regionId STRING, requestId STRING, "
    "offsetMsgId STRING, bodyLength INT, msgType STRING, consumeResult STRING, "
    "transactionId STRING, transactionState STRING, fromTransactionCheck BOOLEAN, "
    "traceMsgId STRING, traceBrokerName STRING, traceQueueId INT, traceQueueOffset BIGINT, "
    "traceStoreTimestamp TIMESTAMP, decodeError STRING"
)

_TS = pa.timestamp("us", tz="UTC")
_S, _I, _B = pa.string(), pa.int32(), pa.bool_()
#: (column, arrow type, entry attribute or None for the trace message's own columns)
_COLUMNS: list[tuple[str, pa.DataType, str | None]] = [
    ("traceType", _S, "trace_type"),
    ("timestamp", _TS, "timestamp_ms"),
    ("groupName", _S, "group"),
    ("clientHost", _S, "client_host"),
    ("storeHost", _S, "store_host"),
    ("costMs", _I, "cost_ms"),
    ("success", _B, "success"),
    ("retryTimes", _I, "retry_times"),
    ("msgId", _S, "msg_id"),
    ("topic", _S, "topic"),
    ("tags", _S, "tags"),
    ("keys", _S, "keys"),
    ("regionId", _S, "region_id"),
    ("requestId", _S, "request_id"),
    ("offsetMsgId", _S, "offset_msg_id"),
    ("bodyLength", _I, "body_length"),
    ("msgType", _S, "msg_type"),
    ("consumeResult", _S, "consume_result"),
    ("transactionId", _S, "transaction_id"),
    ("transactionState", _S, "transaction_state"),
    ("fromTransactionCheck", _B, "from_transaction_check"),
    ("traceMsgId", _S, None),
    ("traceBrokerName", _S, None),
    ("traceQueueId", _I, None),
    ("traceQueueOffset", pa.int64(), None),
    ("traceStoreTimestamp", _TS, None),
    ("decodeError", _S, None),
]
TRACE_ARROW_SCHEMA = pa.schema([(name, kind) for name, kind, _ in _COLUMNS])


def _value(entry: TraceEntry, attr: str) -> Any:
    value = getattr(entry, attr)
    if attr == "trace_type":
        return value.value
    if attr == "timestamp_ms":
        return value * 1000 if value else None
    if isinstance(value, str):
        return value or None
    return value


def trace_messages_to_batch(
    msgs: Sequence[MessageExt], broker: str, columns: Sequence[str] | None = None
) -> pa.RecordBatch:
    """One record batch (``TRACE_ARROW_SCHEMA``, or its ``columns`` in that order) of the
    records in trace-topic messages pulled from ``broker`` (every record is decoded: only
    the Arrow columns are left out)."""
    rows: list[dict[str, Any]] = []
    for msg in msgs:
        own: dict[str, Any] = {
            "traceMsgId": msg.offset_msg_id,
            "traceBrokerName": broker,
            "traceQueueId": msg.queue_id,
            "traceQueueOffset": msg.queue_offset,
            "traceStoreTimestamp": msg.store_timestamp_ms * 1000,
        }
        for item in trace_entries(msg):
            row: dict[str, Any]
            if isinstance(item, UndecodableTraceMessage):
                row = {"clientHost": item.client_host, "decodeError": item.error}
            else:
                row = {name: _value(item, attr) for name, _, attr in _COLUMNS if attr}
            row.update(own)
            rows.append(row)
    schema = TRACE_ARROW_SCHEMA
    if columns is not None:
        schema = pa.schema([TRACE_ARROW_SCHEMA.field(name) for name in columns])
    arrays = [pa.array([r.get(f.name) for r in rows], f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
