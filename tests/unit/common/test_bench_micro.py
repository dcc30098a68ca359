"""``ariane bench micro``: each row's input is what the row says, and the JSON's shape
(no timing is asserted: the command prints numbers, it checks none)."""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from ariane.acl.validator import allows_fast
from ariane.bench import _micro_cases as mc
from ariane.bench._child import proc_cpu_seconds
from ariane.bench._micro_broker import RequestCall
from ariane.bench.micro import micro_bench, result_doc, select
from ariane.bench.producer import _broker_cpu_fields
from ariane.common import native, properties
from ariane.common.batch import BatchEntry
from ariane.common.message import MessageExt
from ariane.remoting.protocol.codec import decode_frame
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand


def _call(name: str) -> Any:
    (case,) = [c for c in mc.CASES if c.name == name]
    return case.build()()


def test_row_names_are_unique_and_twins_are_the_compiled_modules() -> None:
    names = [c.name for c in mc.CASES]
    assert len(set(names)) == len(names) == 20
    assert [c.name for c in mc.CASES if c.twin] == [
        "properties.encode",
        "properties.decode",
        "send_batch.decode",
        "record.decode",
        "acl.sign",
        "acl.sign_encode",
        "acl.canonical",
        "acl.verify",
        "acl.broker_check",
        "store.index_key_hash",
        "broker.send_single",
        "broker.send_batch64",
    ]
    assert {c.name: c.per for c in mc.CASES if c.per != 1} == {
        "send_batch.decode": 64,
        "broker.send_batch64": 64,
    }


def test_codec_inputs() -> None:
    text = _call("properties.encode")
    assert properties.decode_properties_py(text) == mc.PRODUCER_PROPERTIES
    assert list(mc.PRODUCER_PROPERTIES) == ["TAGS", "UNIQ_KEY", "KEYS", "WAIT"]
    assert _call("properties.decode") == mc.PRODUCER_PROPERTIES
    entries = _call("send_batch.decode")
    assert len(entries) == 64
    assert entries[0] == BatchEntry(
        mc.BODY, 0, properties.encode_properties_py(mc.PRODUCER_PROPERTIES)
    )
    assert len(mc.BODY) == 1024
    msg, end = _call("record.decode")
    assert isinstance(msg, MessageExt)
    assert (msg.body, msg.properties, end) == (mc.BODY, mc.RECORD_PROPERTIES, msg.store_size)
    assert len(msg.properties) == 5


def test_send_request_and_acl_inputs() -> None:
    header = _call("send.header_parse")
    assert (header.topic, header.producer_group, header.queue_id) == ("BenchSingle", mc.GROUP, 1)
    assert properties.decode_properties_py(header.properties) == mc.PRODUCER_PROPERTIES
    frame = _call("acl.encode")
    request = decode_frame(frame[4:])
    assert request.code == RequestCode.SEND_MESSAGE_V2
    assert request.body == mc.BODY
    assert request.ext_fields["AccessKey"] == "benchuser"
    # the signature the client computes is one the broker's fast path accepts
    hook = mc.acl_hook()
    assert allows_fast(hook.rules, request.code, request.ext_fields, request.body)
    assert not hook.rules.accounts["benchuser"].admin
    assert _call("acl.broker_check") is None  # allowed
    assert _call("acl.sign") == request.ext_fields["Signature"]
    assert decode_frame(_call("acl.sign_encode")[4:]).ext_fields == request.ext_fields
    canonical = _call("acl.canonical")
    assert b"BenchSingle" in canonical
    assert b"benchuser" in canonical
    assert len(_call("acl.hmac_sha1")) == 20
    assert _call("acl.verify") is True


def test_trace_and_rewriter_inputs() -> None:
    record = _call("trace.pub_record")
    assert record.startswith("Pub\x01")
    assert record.endswith("\x02")
    assert record.count("\x01") == 13
    assert _call("trace.pub_hook") is None
    before = _call("trace.consume_hooks")
    assert before is not None
    _tracer, data, after = before  # the open pair, completed by the listener call's end
    # one message per listener call: (time, region, request id, topic, msgId, reconsume
    # times, keys) flat
    assert data[3:] == (mc.TOPIC, mc.PRODUCER_PROPERTIES["UNIQ_KEY"], 0, "order-20261206-0001")
    assert after == mc.BORN_MS * 1_000_000  # the usual end (one message, SUCCESS): its time alone
    assert _call("broker.timer_check") is None  # a plain send goes on untouched
    assert _call("broker.send_rewriters") == [None, None]


def _broker_row(name: str) -> tuple[list[RemotingCommand], Any]:
    """Two calls of a broker row: the answers of the second one, and the broker's store."""
    (case,) = [c for c in mc.CASES if c.name == name]
    call = case.build()
    assert isinstance(call, RequestCall)
    try:
        assert call.timer is time.thread_time
        call()
        call()
        store = call.broker.controller.store
        store.wait_dispatched()
        return call.answers(), (store.get_max_offset_in_queue("BenchSingle", 1), call.broker.root)
    finally:
        call.close()


def test_broker_rows_store_and_answer_each_request() -> None:
    (single,), (stored, root) = _broker_row("broker.send_single")
    assert not os.path.exists(root)  # close() removed the store
    assert stored == 3  # the set-up request and two timed calls
    assert (single.code, single.flag) == (ResponseCode.SUCCESS, 1)
    ext = single.ext_fields
    assert (ext["queueId"], ext["queueOffset"]) == ("1", "2")
    assert ext["transactionId"] == mc.PRODUCER_PROPERTIES["UNIQ_KEY"]
    (batch,), (stored, _) = _broker_row("broker.send_batch64")
    assert stored == 3 * 64
    assert batch.code == ResponseCode.SUCCESS
    assert (batch.ext_fields["queueId"], batch.ext_fields["queueOffset"]) == ("1", "128")
    assert len(batch.ext_fields["msgId"].split(",")) == 64


def test_json_of_a_run() -> None:
    run = CliRunner().invoke(micro_bench, ["--rounds", "1", "--number", "1", "--no-pure", "--json"])
    assert run.exit_code == 0, run.output
    doc = orjson.loads(run.output.splitlines()[-1])
    assert set(doc) == {"build", "pure_build", "python", "rounds", "number", "rows"}
    assert (doc["build"], doc["pure_build"], doc["rounds"], doc["number"]) == (
        native.build_name(),
        None,
        1,
        1,
    )
    assert [r["name"] for r in doc["rows"]] == [c.name for c in mc.CASES]
    for row in doc["rows"]:
        assert set(row) == {
            "name",
            "input",
            "compiled_twin",
            "us_per_call",
            "pure_us_per_call",
            "pure_over_build",
        }
        assert row["us_per_call"] > 0
        assert row["pure_us_per_call"] is None


def test_pure_column_and_ratio() -> None:
    cases = select(["properties.encode", "acl.encode"])
    doc = result_doc(
        cases, {"properties.encode": 0.5, "acl.encode": 2.0}, {"properties.encode": 2.5}, 3, 9
    )
    enc, acl = doc["rows"]
    assert (enc["pure_us_per_call"], enc["pure_over_build"]) == (2.5, 5.0)
    assert (acl["pure_us_per_call"], acl["pure_over_build"]) == (None, None)
    assert doc["pure_build"] == "pure (ARIANE_PURE=1, child interpreter)"


def test_unknown_row_is_refused() -> None:
    run = CliRunner().invoke(micro_bench, ["--only", "nope"])
    assert run.exit_code == 2
    assert "unknown rows ['nope']" in run.output
    with pytest.raises(Exception, match="unknown rows"):
        select(["properties.encode", "x"])


def test_pure_child_fills_the_pure_column() -> None:
    """One row through the ARIANE_PURE=1 child (a subprocess, no socket)."""
    args = ["--only", "properties.encode", "--rounds", "1", "--number", "1", "--json"]
    run = CliRunner().invoke(micro_bench, args)
    assert run.exit_code == 0, run.output
    (row,) = orjson.loads(run.output.splitlines()[-1])["rows"]
    if native.COMPILED:
        assert row["pure_us_per_call"] > 0
    else:
        assert row["pure_us_per_call"] is None


def test_producer_broker_cpu_fields() -> None:
    """``ariane bench producer --broker-pid``: the per-message arithmetic and the /proc read."""
    assert _broker_cpu_fields(None, 1.0, 10) == {}
    assert _broker_cpu_fields(4242, 0.5, 1000) == {
        "broker_pid": 4242,
        "broker_cpu_us_per_msg": 500.0,
    }
    assert _broker_cpu_fields(4242, 0.5, 0) == {"broker_pid": 4242, "broker_cpu_us_per_msg": 0.0}
    assert proc_cpu_seconds(os.getpid()) > 0.0  # this process has run
    assert proc_cpu_seconds(2**22 + 1) == 0.0  # above pid_max: no such process
