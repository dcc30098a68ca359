"""``decode=trace``: trace-topic messages as rows of decoded records (pyarrow only)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

from ariane.common.message import HostPort, MessageExt
from ariane.errors import InvalidArgumentError
from ariane.spark._trace import TRACE_ARROW_SCHEMA, trace_messages_to_batch
from ariane.spark.options import SourceOptions

PUB = "Pub\x011000\x01R\x01pg\x01T\x01M1\x01t\x01k\x01h:1\x015\x017\x010\x01OFF\x01true\x02"
AFTER = "SubAfter\x01REQ\x01M1\x013\x01false\x01k\x014\x012000\x01cg\x02"


def trace_msg(body: bytes, offset: int) -> MessageExt:
    return MessageExt(
        "RMQ_SYS_TRACE_TOPIC",
        body,
        queue_id=0,
        queue_offset=offset,
        store_timestamp_ms=3000,
        born_host=HostPort.parse("10.1.2.3:5555"),
        store_host=HostPort.parse("127.0.0.1:10911"),
        commit_log_offset=100 + offset,
    )


def test_one_row_per_record_and_bad_records_as_rows() -> None:
    msgs = [trace_msg((PUB + AFTER).encode(), 0), trace_msg(b"Nope\x01x\x02", 1)]
    batch = trace_messages_to_batch(msgs, "broker-t")
    assert batch.schema == TRACE_ARROW_SCHEMA
    rows = batch.to_pylist()
    assert len(rows) == 3
    pub, after, bad = rows
    assert (pub["traceType"], pub["groupName"], pub["storeHost"], pub["costMs"]) == (
        "Pub",
        "pg",
        "h:1",
        7,
    )
    assert (pub["msgType"], pub["offsetMsgId"], pub["success"], pub["bodyLength"]) == (
        "Normal_Msg",
        "OFF",
        True,
        5,
    )
    assert pub["timestamp"].timestamp() == 1.0
    assert pub["retryTimes"] is None
    assert pub["clientHost"] == "10.1.2.3"
    assert (after["traceType"], after["consumeResult"], after["success"]) == (
        "SubAfter",
        "FAILED",
        False,
    )
    assert (after["requestId"], after["groupName"], after["topic"], after["storeHost"]) == (
        "REQ",
        "cg",
        None,
        None,
    )
    assert after["decodeError"] is None
    assert bad["decodeError"] == "trace record 0: unknown trace type 'Nope'"
    assert bad["traceType"] is None
    assert (bad["traceBrokerName"], bad["traceQueueOffset"], bad["traceQueueId"]) == (
        "broker-t",
        1,
        0,
    )
    assert bad["traceMsgId"] == msgs[1].offset_msg_id
    assert trace_messages_to_batch([], "b").num_rows == 0


def test_a_subset_of_trace_columns() -> None:
    msgs = [trace_msg((PUB + AFTER).encode(), 0), trace_msg(b"Nope\x01x\x02", 1)]
    full = trace_messages_to_batch(msgs, "broker-t")
    columns = ("decodeError", "traceQueueOffset", "traceType")
    got = trace_messages_to_batch(msgs, "broker-t", columns)
    assert got.schema.names == list(columns)
    assert got.equals(full.select(list(columns)))
    assert got.to_pylist()[2] == {
        "decodeError": "trace record 0: unknown trace type 'Nope'",
        "traceQueueOffset": 1,
        "traceType": None,
    }


def test_decode_option() -> None:
    base = {"nameserver": "h:1"}
    opts = SourceOptions.parse({**base, "decode": "TRACE"})
    assert opts.decode_trace
    assert opts.topics == ("RMQ_SYS_TRACE_TOPIC",)
    assert SourceOptions.parse({**base, "decode": "trace", "topic": "MyTrace"}).topics == (
        "MyTrace",
    )
    assert not SourceOptions.parse({**base, "topic": "T", "decode": "none"}).decode_trace
    with pytest.raises(InvalidArgumentError, match="option decode must be none or trace"):
        SourceOptions.parse({**base, "topic": "T", "decode": "json"})
