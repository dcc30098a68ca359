"""Message trace end to end (book ch. 8): producers and consumers with ``enable_trace`` write
Pub, SubBefore/SubAfter and EndTransaction records to the trace topic of a real broker, and
``Admin.query_message_trace`` reads them back as a timeline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from ariane.admin.cli import admin as admin_cli
from ariane.client import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    TransactionProducer,
)
from ariane.client.trace import MessageTrace
from ariane.common.trace import TraceType
from tests.integration.client.conftest import run, wait_for_route
from tests.integration.client.consumer_support import create_topic, fast_config, send_all
from tests.support.cluster import Cluster
from tests.support.polling import await_for, await_until

pytestmark = pytest.mark.integration

BROKER_CONF = {
    "traceTopicEnable": "true",
    "messageDelayLevel": " ".join(["1s"] * 18),
    "transactionCheckInterval": 1000,
    "transactionTimeOut": 1000,
}
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


@pytest.fixture(scope="module")
def tcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("trace-cluster"))
    try:
        yield c.start(**BROKER_CONF)
    finally:
        c.stop()


async def trace_of(
    admin: Admin, msg_id: str, ready: dict[TraceType, int], trace_topic: str | None = None
) -> MessageTrace:
    """Query ``msg_id``'s trace until it holds at least ``ready[type]`` records of each type."""

    async def probe() -> MessageTrace | None:
        try:
            return await admin.query_message_trace(msg_id, trace_topic)
        except Exception:
            return None

    def enough(t: MessageTrace | None) -> bool:
        return t is not None and all(len(t.of_type(k)) >= n for k, n in ready.items())

    trace = await await_for(probe, enough, timeout_s=30)
    assert enough(trace), f"trace of {msg_id} incomplete: {trace}"
    assert trace is not None
    return trace


def traced_consumer(cluster: Cluster, group: str, topic: str, listener: Any) -> PushConsumer:
    """A traced push consumer of ``topic`` from its first offset, with fast client settings."""
    consumer = PushConsumer(
        group,
        client_config=fast_config(cluster, f"{group}-c"),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_trace=True,
    )
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer


def mqadmin(cluster: Cluster, *args: str) -> tuple[int, str, str]:
    """``mqadmin <args> -n <namesrv>`` in-process: (exit code, stdout, stderr)."""
    r = CliRunner().invoke(
        admin_cli, [*args, "-n", cluster.namesrv_addr], prog_name="mqadmin", catch_exceptions=False
    )
    return r.exit_code, r.stdout, r.stderr


def test_send_then_consume_gives_pub_sub_before_sub_after(tcluster: Cluster) -> None:
    async def go() -> str:
        addr = tcluster.namesrv_addr
        await create_topic(tcluster, "TraceOk", queues=2)
        got: list[MessageExt] = []

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = traced_consumer(tcluster, "cg_trace_ok", "TraceOk", listener)
        async with (
            Producer("pg_trace_ok", namesrv_addr=addr, enable_trace=True) as producer,
            consumer,
            Admin(namesrv_addr=addr) as admin,
        ):
            msg = Message("TraceOk", b"traced body", tags="TagT", keys=["order-7", "user-9"])
            sent = await producer.send(msg)
            await await_until(lambda: sent.msg_id in {m.msg_id for m in got}, what="delivery")
            ready = {TraceType.Pub: 1, TraceType.SubBefore: 1, TraceType.SubAfter: 1}
            trace = await trace_of(admin, sent.msg_id, ready)
            # found by the business key as well: the trace message's keys hold both
            by_key = await admin.query_message(TRACE_TOPIC, "order-7")
            assert any(sent.msg_id in m.keys for m in by_key)
            assert producer.trace_dispatcher is not None
            assert producer.trace_dispatcher.stats.discarded == 0
        pub, before, after = trace.entries
        assert [e.trace_type for e in trace.entries] == [
            TraceType.Pub,
            TraceType.SubBefore,
            TraceType.SubAfter,
        ]
        assert not trace.undecodable
        assert {e.msg_id for e in trace.entries} == {sent.msg_id}
        assert {e.topic for e in trace.entries} == {"TraceOk"}
        assert pub.group == "pg_trace_ok"
        assert before.group == after.group == "cg_trace_ok"
        assert pub.store_host == tcluster.broker_addr()
        assert pub.offset_msg_id == sent.offset_msg_id
        assert {e.client_host for e in trace.entries} == {"127.0.0.1"}
        assert (pub.tags, pub.keys, pub.body_length) == ("TagT", "order-7 user-9", 11)
        assert (pub.msg_type, pub.region_id, pub.status) == (
            "Normal_Msg",
            "DefaultRegion",
            "success",
        )
        assert (before.retry_times, after.retry_times) == (0, 0)
        assert after.request_id == before.request_id
        assert (after.status, after.consume_result) == ("success", "SUCCESS")
        # plausible times: in order, costs of a local round trip
        assert pub.timestamp_ms <= before.timestamp_ms <= after.timestamp_ms
        assert pub.cost_ms is not None
        assert 0 <= pub.cost_ms < 10_000
        assert after.cost_ms is not None
        assert 0 <= after.cost_ms < 10_000
        return sent.msg_id

    msg_id = run(go())
    # mqadmin: the timeline as a table, as JSON, and the hint of the message query commands
    code, out, err = mqadmin(tcluster, "queryMsgTraceById", "-i", msg_id)
    assert code == 0, err
    assert f"Trace of {msg_id} (TraceOk)" in out
    rows = [
        line.split()
        for line in out.splitlines()
        if line.split()[:1] in (["Pub"], ["SubBefore"], ["SubAfter"])
    ]
    assert [(r[0], r[3], r[4]) for r in rows] == [
        ("Pub", "pg_trace_ok", "127.0.0.1"),
        ("SubBefore", "cg_trace_ok", "127.0.0.1"),
        ("SubAfter", "cg_trace_ok", "127.0.0.1"),
    ]
    assert rows[0][5] == tcluster.broker_addr()
    assert rows[2][-1] == "SUCCESS"
    code, out, err = mqadmin(tcluster, "queryMsgTraceById", "-i", msg_id, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["msgId"], data["traceTopic"], data["undecodable"]) == (msg_id, TRACE_TOPIC, [])
    assert [(e["traceType"], e["msgId"], e["group"]) for e in data["entries"]] == [
        ("Pub", msg_id, "pg_trace_ok"),
        ("SubBefore", msg_id, "cg_trace_ok"),
        ("SubAfter", msg_id, "cg_trace_ok"),
    ]
    assert [e["retryTimes"] for e in data["entries"][1:]] == [0, 0]
    hint = f"message {msg_id} has a trace: mqadmin queryMsgTraceById -i {msg_id}"
    code, out, err = mqadmin(tcluster, "queryMsgByUniqueKey", "-i", msg_id, "-t", "TraceOk")
    assert code == 0, err
    assert hint in out
    code, out, err = mqadmin(tcluster, "queryMsgByKey", "-t", "TraceOk", "-k", "user-9")
    assert code == 0, err
    assert hint in out
    # an untraced message gets no hint
    code, out, err = mqadmin(tcluster, "queryMsgByKey", "-t", "TraceOk", "-k", "never-sent")
    assert code == 0, err
    assert "has a trace" not in out


def test_every_message_of_a_drained_backlog_has_its_trace(tcluster: Cluster) -> None:
    """300 messages drained at once: their records share a few big trace messages (hundreds
    of index keys each, indexed in bulk by the broker), and each message's trace is found."""

    async def go() -> None:
        addr = tcluster.namesrv_addr
        await create_topic(tcluster, "TraceMany", queues=2)
        ids = await send_all(tcluster, [Message("TraceMany", f"m{i}".encode()) for i in range(300)])
        got: set[str] = set()

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.update(m.msg_id for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = traced_consumer(tcluster, "cg_trace_many", "TraceMany", listener)
        async with consumer, Admin(namesrv_addr=addr) as admin:
            await await_until(lambda: got >= set(ids), what="every delivery")
            tracer = consumer.tracer
            assert tracer is not None
            assert await tracer.dispatcher.flush(10_000)
            stats = tracer.dispatcher.stats
            assert (stats.sent_records, stats.discarded, stats.lost_records) == (600, 0, 0)
            for msg_id in ids:
                ready = {TraceType.SubBefore: 1, TraceType.SubAfter: 1}
                trace = await trace_of(admin, msg_id, ready)
                assert [(e.trace_type, e.msg_id) for e in trace.entries] == [
                    (TraceType.SubBefore, msg_id),
                    (TraceType.SubAfter, msg_id),
                ]
                assert {e.group for e in trace.entries} == {"cg_trace_many"}

    run(go())


def test_two_failures_then_success_and_a_transaction_checked_back(tcluster: Cluster) -> None:
    async def go() -> None:
        addr = tcluster.namesrv_addr
        await create_topic(tcluster, "TraceRetry", queues=1)
        attempts: list[int] = []

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            attempts.extend(m.reconsume_times for m in msgs)
            if msgs[0].reconsume_times < 2:
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = traced_consumer(tcluster, "cg_trace_retry", "TraceRetry", listener)
        tx = TransactionProducer(
            "txg_trace",
            checker=lambda m: LocalTransactionState.COMMIT_MESSAGE,
            namesrv_addr=addr,
            enable_trace=True,
        )
        async with (
            Producer("pg_trace_retry", namesrv_addr=addr, enable_trace=True) as producer,
            consumer,
            tx,
            Admin(namesrv_addr=addr) as admin,
        ):
            sent = await producer.send(Message("TraceRetry", b"flaky"))
            half = await tx.send_in_transaction(
                Message("TraceTx", b"pay", keys="tx-7"), lambda m, a: LocalTransactionState.UNKNOW
            )
            await await_until(lambda: attempts == [0, 1, 2], what="three deliveries")
            ready = {TraceType.SubBefore: 3, TraceType.SubAfter: 3}
            trace = await trace_of(admin, sent.msg_id, ready)
            tx_trace = await trace_of(admin, half.msg_id, {TraceType.EndTransaction: 2})
        befores = trace.of_type(TraceType.SubBefore)
        afters = trace.of_type(TraceType.SubAfter)
        assert [e.retry_times for e in befores] == [0, 1, 2]
        assert [e.retry_times for e in afters] == [0, 1, 2]
        assert [e.consume_result for e in afters] == ["FAILED", "FAILED", "SUCCESS"]
        assert [e.status for e in afters] == ["failed", "failed", "success"]
        assert len({e.request_id for e in befores}) == 3
        assert {e.topic for e in trace.entries} == {"TraceRetry"}

        pub = tx_trace.of_type(TraceType.Pub)
        assert [(e.msg_type, e.topic) for e in pub] == [("Trans_Msg_Half", "TraceTx")]
        ends = tx_trace.of_type(TraceType.EndTransaction)
        assert [(e.transaction_state, e.from_transaction_check) for e in ends] == [
            ("UNKNOW", False),
            ("COMMIT_MESSAGE", True),
        ]
        assert {(e.group, e.topic, e.keys, e.store_host) for e in ends} == {
            ("txg_trace", "TraceTx", "tx-7", tcluster.broker_addr())
        }
        assert ends[0].transaction_id == half.transaction_id

    run(go())


def test_pull_consumer_and_batch_sends_are_traced(tcluster: Cluster) -> None:
    """The producer traces to the default topic, the pull consumer to its own trace topic
    (``trace_topic=``), read back with ``trace_topic=`` and ``mqadmin ... -t``."""

    async def go() -> list[str]:
        addr = tcluster.namesrv_addr
        await create_topic(tcluster, "TraceBatch", queues=1)
        await create_topic(tcluster, "TraceCustom", queues=1)
        consumer = PullConsumer(
            "cg_trace_pull",
            client_config=fast_config(tcluster, "trace-pull-c"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            enable_trace=True,
            trace_topic="TraceCustom",
        )
        consumer.subscribe("TraceBatch")
        async with (
            Producer("pg_trace_batch", namesrv_addr=addr, enable_trace=True) as producer,
            consumer,
            Admin(namesrv_addr=addr) as admin,
        ):
            batch = [Message("TraceBatch", f"b{i}".encode(), keys=f"bk{i}") for i in range(3)]
            (result,) = await producer.send_batch(batch)
            ids = result.msg_id.split(",")
            polled: list[MessageExt] = []
            while len(polled) < 3:
                polled.extend(await consumer.poll(1000))
            trace = await trace_of(admin, ids[1], {TraceType.Pub: 1})
            custom = await trace_of(
                admin, ids[1], {TraceType.SubBefore: 1, TraceType.SubAfter: 1}, "TraceCustom"
            )
        (pub,) = trace.entries
        assert pub.trace_type is TraceType.Pub
        assert pub.msg_id == result.msg_id  # one Pub record for the batch, as upstream
        assert pub.keys == "bk0 bk1 bk2"
        before, after = custom.entries
        assert (before.trace_type, before.msg_id, before.retry_times) == (
            TraceType.SubBefore,
            ids[1],
            0,
        )
        assert (after.msg_id, after.group, after.status) == (ids[1], "cg_trace_pull", "success")
        return ids

    ids = run(go())
    code, out, err = mqadmin(
        tcluster, "queryMsgTraceById", "-i", ids[2], "-t", "TraceCustom", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["traceTopic"] == "TraceCustom"
    assert [(e["traceType"], e["msgId"], e["group"]) for e in data["entries"]] == [
        ("SubBefore", ids[2], "cg_trace_pull"),
        ("SubAfter", ids[2], "cg_trace_pull"),
    ]
    code, out, err = mqadmin(tcluster, "queryMsgTraceById", "-i", ids[2], "-t", "NoSuchTrace")
    assert code != 0
    assert "trace topic 'NoSuchTrace' does not exist" in out + err
    assert "Traceback" not in out + err


def test_trace_on_its_own_broker_and_a_dead_trace_broker(fresh_cluster: Cluster) -> None:
    """Business topic on broker-a, trace topic only on broker-t; then broker-t dies: sends
    and consumes go on, lost trace records are counted."""
    c = fresh_cluster
    c.start(("broker-a",), autoCreateTopicEnable="false")
    c.start_broker("broker-t", traceTopicEnable="true", autoCreateTopicEnable="false")

    async def go() -> None:
        addr = c.namesrv_addr
        async with Admin(namesrv_addr=addr) as admin:
            await admin.create_topic("TraceSplit", broker_addr=c.broker_addr("broker-a"))
            await wait_for_route(admin, "TraceSplit")
        got: list[str] = []

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.extend(m.msg_id for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = traced_consumer(c, "cg_trace_split", "TraceSplit", listener)
        async with (
            Producer("pg_trace_split", namesrv_addr=addr, enable_trace=True) as producer,
            consumer,
            Admin(namesrv_addr=addr) as admin,
        ):
            first = await producer.send(Message("TraceSplit", b"one"))
            await await_until(lambda: first.msg_id in got, what="first delivery")
            trace = await trace_of(admin, first.msg_id, {TraceType.SubAfter: 1, TraceType.Pub: 1})
            route = await admin.topic_route("TraceSplit")
            assert {bd.broker_name for bd in route.broker_datas} == {"broker-a"}
            (pub,) = trace.of_type(TraceType.Pub)
            assert pub.store_host == c.broker_addr("broker-a")
            trace_msgs = await admin.query_message(TRACE_TOPIC, first.msg_id)
            assert {str(m.store_host) for m in trace_msgs} == {c.broker_addr("broker-t")}

            c.brokers["broker-t"].kill()
            dispatcher = producer.trace_dispatcher
            assert dispatcher is not None
            before_lost = dispatcher.stats.lost_records + dispatcher.stats.discarded
            results = [
                await producer.send(Message("TraceSplit", f"m{i}".encode())) for i in range(20)
            ]
            assert all(r.ok for r in results)
            await await_until(
                lambda: {r.msg_id for r in results} <= set(got), what="deliveries after the kill"
            )
            assert await dispatcher.flush(10_000)
            stats = dispatcher.stats
            assert stats.lost_records + stats.discarded - before_lost >= 20
            tracer = consumer.tracer
            assert tracer is not None
            assert await tracer.dispatcher.flush(10_000)
            assert tracer.dispatcher.stats.lost_records >= 20

    run(go())


def test_undecodable_trace_bodies_are_reported_not_raised(tcluster: Cluster) -> None:
    async def go() -> None:
        addr = tcluster.namesrv_addr
        async with (
            Producer("pg_trace_junk", namesrv_addr=addr) as plain,
            Admin(namesrv_addr=addr) as admin,
        ):
            good = "Pub\x011\x01R\x01g\x01T\x01JUNK-ID\x01t\x01k\x01h:1\x013\x014\x010\x01O\x01true\x02"
            body = (good + "Pub\x01notanumber\x02").encode() + b"\xff\x02"
            await plain.send(Message(TRACE_TOPIC, body, keys="JUNK-ID"))
            trace = await await_for(
                lambda: admin.query_message_trace("JUNK-ID"), lambda t: t.found, timeout_s=30
            )
        (entry,) = trace.entries
        assert (entry.trace_type, entry.group, entry.cost_ms) == (TraceType.Pub, "g", 4)
        assert [(u.index, u.error) for u in trace.undecodable] == [
            (1, "trace record 1: Pub record has 2 fields, needs at least 13"),
            (2, "trace record 2 is not UTF-8 (invalid start byte)"),
        ]
        assert {u.client_host for u in trace.undecodable} == {"127.0.0.1"}

    run(go())
    code, out, err = mqadmin(tcluster, "queryMsgTraceById", "-i", "JUNK-ID")
    assert code == 0, err
    assert "Undecodable trace records" in out
    assert "2 trace record(s) could not be decoded" in out
