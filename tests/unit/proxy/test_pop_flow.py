"""Receive, ack, change invisibility, redelivery, dead letters and FIFO through the gRPC
services on a real broker with POP (in-process, manual clock, no sockets)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from ariane.common.record import decode_records
from ariane.common.trace import TraceContext, TraceType, decode_trace_body
from ariane.proxy.config import ProxyConfig
from ariane.proxy.server import GrpcProxy
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from tests.unit.broker.harness import Broker, run
from tests.unit.proxy.test_services import Ctx, Env, env, message, settings


def consumer_settings(group: str, topic: str, fifo: bool = False) -> pb.Settings:
    return pb.Settings(
        client_type=pb.SIMPLE_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name=group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name=topic),
                    expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                )
            ],
        ),
    )


async def receive(
    e: Env, group: str, topic: str, invisible_s: int = 20, **kw: Any
) -> list[spb.ReceiveMessageResponse]:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression=kw.pop("expression", "*")),
        batch_size=kw.pop("batch", 32),
    )
    request.invisible_duration.seconds = invisible_s
    request.long_polling_timeout.seconds = 0
    e.b.c.store.wait_dispatched()
    return [f async for f in e.c.ReceiveMessage(request, Ctx(**kw))]  # type: ignore[attr-defined]


def messages_of(frames: list[spb.ReceiveMessageResponse]) -> list[pb.Message]:
    return [f.message for f in frames if f.WhichOneof("content") == "message"]


async def revive(e: Env) -> int:
    """Write held checkpoints that are due, deliver the due revive records (the timer
    wheel), then revive."""
    e.b.c.pop.buffer.scan()
    e.b.c.store.wait_dispatched()
    e.b.c.timer.wheel.run_pass()
    e.b.c.store.wait_dispatched()
    n: int = await e.b.c.pop.revive.revive_all()
    e.b.c.store.wait_dispatched()
    return n


def test_receive_ack_change_and_redelivery(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path, min_long_polling_ms=0)
        _, task, replies = await settings(e, consumer_settings("G", "T"))
        assert replies[0].settings.subscription.receive_batch_size == 32
        for i in range(5):
            r = await e.p.SendMessage(
                spb.SendMessageRequest(messages=[message("T", b"m%d" % i, f"ID{i}", tag="A")]),
                Ctx("producer"),
            )
            assert r.status.code == pb.OK
        frames = await receive(e, "G", "T")
        kinds = [f.WhichOneof("content") for f in frames]
        assert kinds[0] == "status"
        assert kinds[-1] == "delivery_timestamp"
        assert frames[0].status.code == pb.OK
        got = messages_of(frames)
        assert sorted(m.body for m in got) == [b"m%d" % i for i in range(5)]
        assert all(m.system_properties.delivery_attempt == 1 for m in got)
        # nothing more while they are invisible
        empty = await receive(e, "G", "T")
        assert empty[0].status.code == pb.MESSAGE_NOT_FOUND
        acks = [
            spb.AckMessageEntry(
                message_id=m.system_properties.message_id,
                receipt_handle=m.system_properties.receipt_handle,
            )
            for m in got[:3]
        ]
        ack = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"), entries=acks
            ),
            Ctx(),
        )
        assert ack.status.code == pb.OK, ack
        again = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"), entries=acks[:1]
            ),
            Ctx(),
        )
        assert again.entries[0].status.code in (pb.OK, pb.INVALID_RECEIPT_HANDLE)
        change = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
            receipt_handle=got[3].system_properties.receipt_handle, message_id=got[3].system_properties.message_id,
        )  # fmt: skip
        change.invisible_duration.seconds = 60
        changed = await e.c.ChangeInvisibleDuration(change, Ctx())
        assert changed.status.code == pb.OK, changed.status
        assert changed.receipt_handle != got[3].system_properties.receipt_handle
        # past the first lease: the unacked, unchanged message comes back, attempt 2
        e.b.clock.advance(20_000)
        assert await revive(e) == 1
        back = messages_of(await receive(e, "G", "T"))
        assert [m.body for m in back] == [got[4].body]
        assert back[0].system_properties.delivery_attempt == 2
        assert back[0].topic.name == "T"
        ack = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"),
                topic=pb.Resource(name="T"),
                entries=[
                    spb.AckMessageEntry(
                        message_id=back[0].system_properties.message_id,
                        receipt_handle=back[0].system_properties.receipt_handle,
                    )
                ],
            ),
            Ctx(),
        )
        assert ack.status.code == pb.OK, ack
        # the changed one with its new handle
        ack = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"),
                topic=pb.Resource(name="T"),
                entries=[
                    spb.AckMessageEntry(message_id="x", receipt_handle=changed.receipt_handle)
                ],
            ),
            Ctx(),
        )
        assert ack.status.code == pb.OK, ack
        e.b.clock.advance(120_000)
        n = await revive(e)
        if n:
            print(
                "REVIVED",
                [
                    (m.body, m.system_properties.delivery_attempt)
                    for m in messages_of(await receive(e, "G", "T"))
                ],
                changed.receipt_handle,
                got[3].system_properties.receipt_handle,
            )
        assert n == 0
        task.cancel()
        await e.b.stop()

    run(go())


def test_dead_letter_after_max_attempts_and_forward(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path, min_long_polling_ms=0)
        e.b.c.groups.find("G")
        e.b.c.groups.table["G"].retry_max_times = 1
        _, task, replies = await settings(e, consumer_settings("G", "T"))
        assert replies[0].settings.backoff_policy.max_attempts == 2
        await e.p.SendMessage(
            spb.SendMessageRequest(
                messages=[message("T", b"dead", "D1"), message("T", b"fwd", "F1")]
            ),
            Ctx("producer"),
        )
        first = messages_of(await receive(e, "G", "T"))
        assert sorted(m.body for m in first) == [b"dead", b"fwd"]
        fwd = next(m for m in first if m.body == b"fwd")
        r = await e.c.ForwardMessageToDeadLetterQueue(
            spb.ForwardMessageToDeadLetterQueueRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                receipt_handle=fwd.system_properties.receipt_handle, message_id="F1",
                delivery_attempt=1, max_delivery_attempts=2,
            ), Ctx())  # fmt: skip
        assert r.status.code == pb.OK, r.status
        e.b.clock.advance(20_000)
        assert await revive(e) == 1  # only the unacked "dead" one
        second = messages_of(await receive(e, "G", "T"))
        assert [m.body for m in second] == [b"dead"]
        assert second[0].system_properties.delivery_attempt == 2
        e.b.clock.advance(20_000)
        await revive(e)
        third = await receive(e, "G", "T")
        assert third[0].status.code == pb.MESSAGE_NOT_FOUND  # went to the DLQ instead
        e.b.c.store.wait_dispatched()
        dlq = "%DLQ%G"
        assert e.b.c.store.get_max_offset_in_queue(dlq, 0) == 2
        task.cancel()
        await e.b.stop()

    run(go())


def test_auto_renew_keeps_a_slow_push_consumers_message_invisible(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path, min_long_polling_ms=0)
        _, task, _ = await settings(e, consumer_settings("G", "T"))
        await e.p.SendMessage(
            spb.SendMessageRequest(messages=[message("T", b"slow", "S1")]), Ctx("producer")
        )
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name="G"),
            message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
            batch_size=8,
            auto_renew=True,
        )
        e.b.c.store.wait_dispatched()
        (got,) = messages_of([f async for f in e.c.ReceiveMessage(request, Ctx())])  # type: ignore[attr-defined]
        original = got.system_properties.receipt_handle
        e.b.clock.advance(45_000)
        assert await e.c.renew() == 0  # not due yet (60 s lease, renewed 10 s ahead)
        e.b.clock.advance(6_000)
        assert await e.c.renew() == 1
        e.b.clock.advance(30_000)  # past the first lease: still invisible
        assert await revive(e) == 0
        assert (await receive(e, "G", "T"))[0].status.code == pb.MESSAGE_NOT_FOUND
        ack = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                entries=[spb.AckMessageEntry(message_id="S1", receipt_handle=original)],
            ),
            Ctx(),
        )  # fmt: skip
        assert ack.status.code == pb.OK, ack  # the client's first handle, mapped to the newest
        e.b.clock.advance(600_000)
        assert await revive(e) == 0
        assert await e.c.renew() == 0
        task.cancel()
        await e.b.stop()

    run(go())


def test_limits_and_unknown_enums_on_receive(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path, min_long_polling_ms=0, max_inflight_receives=1)
        _, task, _ = await settings(e, consumer_settings("G", "Quiet"))
        await e.p.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Quiet")), Ctx())

        def request(**kw: Any) -> spb.ReceiveMessageRequest:
            r = spb.ReceiveMessageRequest(
                group=pb.Resource(name="G"),
                message_queue=pb.MessageQueue(topic=pb.Resource(name="Quiet")), batch_size=4,
                **kw,
            )  # fmt: skip
            r.invisible_duration.seconds = 20
            return r

        async def collect(r: spb.ReceiveMessageRequest) -> list[spb.ReceiveMessageResponse]:
            return [f async for f in e.c.ReceiveMessage(r, Ctx())]  # type: ignore[attr-defined]

        parked_request = request()
        parked_request.long_polling_timeout.seconds = 5
        parked = asyncio.create_task(collect(parked_request))
        for _ in range(100):
            await asyncio.sleep(0.005)
            if e.c.inflight:
                break
        assert e.c.inflight == 1
        refused = await collect(request())
        # refused before reaching the broker: one status frame, as upstream's flow limit
        assert [f.status.code for f in refused] == [pb.TOO_MANY_REQUESTS]
        parked.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await parked
        assert e.c.inflight == 0
        bad = request(filter_expression=pb.FilterExpression(type=7, expression="*"))  # type: ignore[arg-type]
        frames = await collect(bad)
        assert frames[0].status.code == pb.ILLEGAL_FILTER_EXPRESSION
        bad_time = request()
        bad_time.invisible_duration.seconds = 1
        frames = await collect(bad_time)
        assert frames[0].status.code == pb.ILLEGAL_INVISIBLE_TIME
        assert "min is 10000" in frames[0].status.message
        task.cancel()
        await e.b.stop()

    run(go())


def test_grpc_calls_write_4x_traces_when_enabled(tmp_path: Path) -> None:
    """grpcMessageTraceEnable: Pub per send, SubBefore per receive, SubAfter per ack
    (success) and per invisible-time change (failure), paired by request id, in the trace
    topic keyed by the message ids, as a 4.x client with enableMsgTrace writes them."""

    async def go() -> None:
        broker = await Broker(
            tmp_path, grpc_message_trace_enable=True, trace_topic_enable=True
        ).start()
        proxy = GrpcProxy(broker.c, ProxyConfig(port=8081, min_long_polling_ms=0))  # type: ignore[arg-type]
        e = Env(broker, proxy)
        _, task, _ = await settings(e, consumer_settings("G", "T"))
        for i in range(2):
            sent = await e.p.SendMessage(
                spb.SendMessageRequest(
                    messages=[message("T", b"m%d" % i, f"ID{i}", tag="A", keys=[f"k{i}"])]
                ),
                Ctx("producer"),
            )
            assert sent.status.code == pb.OK
        got = sorted(messages_of(await receive(e, "G", "T")), key=lambda m: m.body)
        assert [m.system_properties.message_id for m in got] == ["ID0", "ID1"]
        ack = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                entries=[spb.AckMessageEntry(
                    message_id="ID0", receipt_handle=got[0].system_properties.receipt_handle
                )],
            ),
            Ctx(),
        )  # fmt: skip
        assert ack.status.code == pb.OK
        change = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="G"), topic=pb.Resource(name="T"), message_id="ID1",
            receipt_handle=got[1].system_properties.receipt_handle,
        )  # fmt: skip
        change.invisible_duration.seconds = 60
        assert (await e.c.ChangeInvisibleDuration(change, Ctx())).status.code == pb.OK
        assert proxy.tracer is not None
        await proxy.tracer.drain()
        assert (proxy.tracer.written, proxy.tracer.failed) == (5, 0)
        broker.c.store.wait_dispatched()
        res = broker.c.store.get_message("G", "RMQ_SYS_TRACE_TOPIC", 0, 0, 100)
        stored = decode_records(b"".join(res.messages))
        contexts = [c for m in stored for c in decode_trace_body(m.body)]
        assert all(isinstance(c, TraceContext) for c in contexts)
        by_type: dict[TraceType, list[TraceContext]] = {}
        for c in contexts:
            assert isinstance(c, TraceContext)
            by_type.setdefault(c.trace_type, []).append(c)
        pubs = sorted(by_type[TraceType.Pub], key=lambda c: c.bean.msg_id)
        assert [(c.group, c.bean.topic, c.bean.msg_id, c.bean.keys, c.bean.tags) for c in pubs] == [
            ("T", "T", "ID0", "k0", "A"), ("T", "T", "ID1", "k1", "A"),
        ]  # fmt: skip
        assert all(c.success and c.bean.offset_msg_id and c.bean.body_length == 2 for c in pubs)
        befores = by_type[TraceType.SubBefore]  # one record per message of the receive
        assert sorted(c.bean.msg_id for c in befores) == ["ID0", "ID1"]
        assert {(c.group, c.request_id) for c in befores} == {("G", befores[0].request_id)}
        before = befores[0]
        afters = sorted(by_type[TraceType.SubAfter], key=lambda c: c.bean.msg_id)
        assert [(c.bean.msg_id, c.success, c.context_code, c.request_id) for c in afters] == [
            ("ID0", True, 0, before.request_id), ("ID1", False, 4, before.request_id),
        ]  # fmt: skip
        assert {"ID0", "ID1", "k0", "k1"} <= {k for m in stored for k in m.keys}
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await proxy.stop()
        await broker.stop()

    run(go())
