"""The gRPC services on a real broker and store, driven in-process (no sockets): every call
goes through the client's local channel into the broker's processors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ariane.common import properties as p
from ariane.common.pop import ReceiptHandle
from ariane.common.record import decode_records
from ariane.proxy.config import ProxyConfig
from ariane.proxy.convert import to_timestamp
from ariane.proxy.server import GrpcProxy
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.unit.broker.harness import Broker, run


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class Ctx:
    """Just enough of ``grpc.aio.ServicerContext``."""

    def __init__(self, client_id: str = "client-1", remaining_s: float | None = 30.0) -> None:
        self.client_id = client_id
        self.remaining_s = remaining_s

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        if not self.client_id:
            return ()
        return (("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"))

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50001"

    def time_remaining(self) -> float | None:
        return self.remaining_s

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class Env:
    def __init__(self, broker: Broker, proxy: GrpcProxy) -> None:
        self.b = broker
        self.proxy = proxy
        self.p = proxy.producer
        self.c = proxy.consumer
        self.t = proxy.telemetry


async def env(tmp_path: Path, **cfg: Any) -> Env:
    broker = await Broker(tmp_path, transaction_timeout_ms=0).start()
    proxy = GrpcProxy(broker.c, ProxyConfig(port=8081, **cfg))  # type: ignore[arg-type]
    return Env(broker, proxy)


def message(topic: str, body: bytes, msg_id: str, **sysp: Any) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name=topic), body=body)
    m.system_properties.message_id = msg_id
    for key, value in sysp.items():
        if key == "keys":
            m.system_properties.keys.extend(value)
        else:
            setattr(m.system_properties, key, value)
    return m


async def settings(
    e: Env, s: pb.Settings, client_id: str = "client-1"
) -> tuple[
    asyncio.Queue[spb.TelemetryCommand | None], asyncio.Task[None], list[spb.TelemetryCommand]
]:
    """Open a Telemetry stream, send ``s`` and return (input queue, pump task, replies)."""
    inbox: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
    replies: list[spb.TelemetryCommand] = []

    async def requests() -> AsyncIterator[spb.TelemetryCommand]:
        while True:
            item = await inbox.get()
            if item is None:
                return
            yield item

    async def pump() -> None:
        async for reply in e.t.Telemetry(requests(), Ctx(client_id)):  # type: ignore[arg-type]
            replies.append(reply)

    task = asyncio.create_task(pump())
    inbox.put_nowait(spb.TelemetryCommand(settings=s))
    for _ in range(200):
        if replies:
            break
        await asyncio.sleep(0.001)
    return inbox, task, replies


def producer_settings(*topics: str) -> pb.Settings:
    return pb.Settings(
        client_type=pb.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics]),
    )


def test_route_auto_creates_and_describes_queues(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path)
        endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="10.1.1.1", port=9)])
        r = await e.p.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="Fresh"), endpoints=endpoints), Ctx()
        )
        assert r.status.code == pb.OK
        assert [q.id for q in r.message_queues] == list(range(8))
        q = r.message_queues[0]
        assert q.permission == pb.READ_WRITE
        assert list(q.accept_message_types) == [pb.NORMAL]
        assert q.broker.name == "broker-a"
        assert q.broker.id == 0
        assert q.broker.endpoints == endpoints
        e.b.c.topics.table["Fresh"].attributes["message.type"] = "MIXED"
        r = await e.p.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Fresh")), Ctx())
        assert list(r.message_queues[0].accept_message_types) == [1, 2, 3, 4]
        assert r.message_queues[0].broker.endpoints.addresses[0].port == 8081
        bad = await e.p.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="a b")), Ctx())
        assert bad.status.code == pb.ILLEGAL_TOPIC
        anon = await e.p.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="Fresh")), Ctx(client_id="")
        )
        assert anon.status.code == pb.CLIENT_ID_REQUIRED
        await e.b.stop()

    run(go())


def test_route_of_unknown_topic_without_auto_create(tmp_path: Path) -> None:
    async def go() -> None:
        broker = await Broker(tmp_path, auto_create_topic_enable=False).start()
        proxy = GrpcProxy(broker.c, ProxyConfig())  # type: ignore[arg-type]
        r = await proxy.producer.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="Nope")), Ctx()
        )
        assert r.status.code == pb.TOPIC_NOT_FOUND
        assert "Nope" in r.status.message
        await broker.stop()

    run(go())


def test_settings_heartbeat_send_and_pull_back(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path)
        hb = await e.p.Heartbeat(spb.HeartbeatRequest(client_type=pb.PRODUCER), Ctx())
        assert hb.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
        inbox, task, replies = await settings(e, producer_settings("T1"))
        (reply,) = replies
        assert reply.status.code == pb.OK
        assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
        assert e.b.c.clients.find_producer_channel("T1") is not None
        hb = await e.p.Heartbeat(spb.HeartbeatRequest(client_type=pb.PRODUCER), Ctx())
        assert hb.status.code == pb.OK
        sent = await e.p.SendMessage(
            spb.SendMessageRequest(
                messages=[message("T1", b"body-%d" % i, f"ID{i}", tag="A") for i in range(3)]
            ),
            Ctx(),
        )
        assert sent.status.code == pb.OK
        assert [x.message_id for x in sent.entries] == ["ID0", "ID1", "ID2"]
        e.b.c.store.wait_dispatched()
        seen = {}
        for qid in range(8):
            frames = [
                f
                async for f in e.c.PullMessage(  # type: ignore[attr-defined]
                    spb.PullMessageRequest(
                        group=pb.Resource(name="G"),
                        message_queue=pb.MessageQueue(topic=pb.Resource(name="T1"), id=qid),
                        offset=0,
                        batch_size=10,
                    ),
                    Ctx(),
                )
            ]
            kinds = [f.WhichOneof("content") for f in frames]
            assert kinds[0] == "status"
            assert kinds[-1] == "next_offset"
            for f in frames:
                if f.WhichOneof("content") == "message":
                    seen[f.message.system_properties.message_id] = (qid, f.message.body)
            assert frames[-1].next_offset == kinds.count("message")
        assert {k: v[1] for k, v in seen.items()} == {f"ID{i}": b"body-%d" % i for i in range(3)}
        inbox.put_nowait(None)
        await task
        done = await e.p.NotifyClientTermination(spb.NotifyClientTerminationRequest(), Ctx())
        assert done.status.code == pb.OK
        assert e.b.c.clients.find_producer_channel("T1") is None
        again = await e.p.NotifyClientTermination(spb.NotifyClientTerminationRequest(), Ctx())
        assert again.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
        await e.b.stop()

    run(go())


def test_send_refusals(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path)
        none = await e.p.SendMessage(spb.SendMessageRequest(), Ctx())
        assert none.status.code == pb.MESSAGE_CORRUPTED
        mixed = await e.p.SendMessage(
            spb.SendMessageRequest(messages=[message("A", b"x", "1"), message("B", b"x", "2")]),
            Ctx(),
        )
        assert mixed.status.code == pb.MESSAGE_CORRUPTED
        fifo = await e.p.SendMessage(
            spb.SendMessageRequest(messages=[message("Plain", b"x", "1", message_group="g")]),
            Ctx(),
        )
        assert fifo.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        assert "message.type=FIFO" in fifo.status.message
        big = await e.p.SendMessage(
            spb.SendMessageRequest(messages=[message("Plain", b"x" * (4 * 1024 * 1024 + 1), "1")]),
            Ctx(),
        )
        assert big.status.code == pb.MESSAGE_BODY_TOO_LARGE
        await e.b.stop()

    run(go())


def test_fifo_group_goes_to_one_queue(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path)
        await e.p.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="F")), Ctx())
        e.b.c.topics.table["F"].attributes["message.type"] = "FIFO"
        queues: dict[str, set[int]] = {}
        for i in range(30):
            group = f"order-{i % 4}"
            r = await e.p.SendMessage(
                spb.SendMessageRequest(messages=[message("F", b"x", f"M{i}", message_group=group)]),
                Ctx(),
            )
            assert r.status.code == pb.OK, r.status
        e.b.c.store.wait_dispatched()
        for qid in range(8):
            pulled = await e.b.answer(
                RequestCode.PULL_MESSAGE, e.b.pull_header("F", queue_id=qid, sys_flag=0x4)
            )
            if pulled.code != ResponseCode.SUCCESS:
                continue
            for m in decode_records(pulled.body or b""):
                queues.setdefault(m.properties[p.SHARDING_KEY], set()).add(qid)
        assert sorted(queues) == [f"order-{i}" for i in range(4)]
        assert all(len(q) == 1 for q in queues.values())
        await e.b.stop()

    run(go())


def test_transaction_end_and_check_back_over_telemetry(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path)
        await e.p.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Tx")), Ctx())
        e.b.c.topics.table["Tx"].attributes["message.type"] = "TRANSACTION"
        inbox, task, replies = await settings(e, producer_settings("Tx"))
        ids = []
        for i in range(2):
            r = await e.p.SendMessage(
                spb.SendMessageRequest(
                    messages=[message("Tx", b"tx-%d" % i, f"T{i}", message_type=pb.TRANSACTION)]
                ),
                Ctx(),
            )
            assert r.status.code == pb.OK, r.status
            ids.append(r.entries[0].transaction_id)
        end = spb.EndTransactionRequest(
            topic=pb.Resource(name="Tx"), message_id="T0", transaction_id=ids[0],
            resolution=pb.COMMIT, source=pb.SOURCE_CLIENT,
        )  # fmt: skip
        assert (await e.p.EndTransaction(end, Ctx())).status.code == pb.OK
        bad = spb.EndTransactionRequest(topic=pb.Resource(name="Tx"), transaction_id="nope")
        assert (await e.p.EndTransaction(bad, Ctx())).status.code == pb.INVALID_TRANSACTION_ID
        # the second stays open: the broker's check reaches the client as a telemetry command
        e.b.clock.advance(60_000)
        e.b.c.store.wait_dispatched()
        assert e.b.c.tx_check.check_once().checked == 1
        for _ in range(200):
            if len(replies) > 1:
                break
            await asyncio.sleep(0.001)
        command = replies[1].recover_orphaned_transaction_command
        assert command.message.system_properties.message_id == "T1"
        assert command.message.body == b"tx-1"
        # the id names the copy of the half message the check put back (new offsets)
        assert command.transaction_id != ids[1]
        answer = spb.EndTransactionRequest(
            topic=pb.Resource(name="Tx"), message_id="T1", transaction_id=command.transaction_id,
            resolution=pb.ROLLBACK, source=pb.SOURCE_SERVER_CHECK,
        )  # fmt: skip
        assert (await e.p.EndTransaction(answer, Ctx())).status.code == pb.OK
        e.b.c.store.wait_dispatched()
        visible = []
        for qid in range(8):
            pulled = await e.b.answer(
                RequestCode.PULL_MESSAGE, e.b.pull_header("Tx", queue_id=qid, sys_flag=0x4)
            )
            if pulled.code == ResponseCode.SUCCESS:
                visible += [m.body for m in decode_records(pulled.body or b"")]
        assert visible == [b"tx-0"]
        inbox.put_nowait(None)
        await task
        await e.b.stop()

    run(go())


def test_telemetry_refuses_streams_without_good_settings(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path, settings_timeout_ms=50)

        async def silent() -> AsyncIterator[spb.TelemetryCommand]:
            await asyncio.sleep(5)
            yield spb.TelemetryCommand()

        with pytest.raises(Aborted) as info:
            async for _ in e.t.Telemetry(silent(), Ctx()):  # type: ignore[arg-type]
                pass
        assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "settings" in info.value.details

        async def empty_settings() -> AsyncIterator[spb.TelemetryCommand]:
            yield spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER))

        with pytest.raises(Aborted) as info:
            async for _ in e.t.Telemetry(empty_settings(), Ctx()):  # type: ignore[arg-type]
                pass
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "no publishing or subscription" in info.value.details

        async def bad_group() -> AsyncIterator[spb.TelemetryCommand]:
            sub = pb.Subscription(group=pb.Resource(name="bad group"))
            yield spb.TelemetryCommand(
                settings=pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=sub)
            )

        with pytest.raises(Aborted) as info:
            async for _ in e.t.Telemetry(bad_group(), Ctx()):  # type: ignore[arg-type]
                pass
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "ILLEGAL_CONSUMER_GROUP" in info.value.details

        async def unknown_type() -> AsyncIterator[spb.TelemetryCommand]:
            yield spb.TelemetryCommand(
                settings=pb.Settings(client_type=77, publishing=pb.Publishing())
            )  # type: ignore[arg-type]

        with pytest.raises(Aborted) as info:
            async for _ in e.t.Telemetry(unknown_type(), Ctx()):  # type: ignore[arg-type]
                pass
        assert "UNRECOGNIZED_CLIENT_TYPE" in info.value.details
        await e.b.stop()

    run(go())


def test_offset_rpcs(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path)
        for i in range(5):
            await e.b.send("Off", b"m%d" % i, queue_id=1)
        mq = pb.MessageQueue(topic=pb.Resource(name="Off"), id=1)
        group = pb.Resource(name="OG")
        got = await e.c.GetOffset(spb.GetOffsetRequest(group=group, message_queue=mq), Ctx())
        assert got.status.code in (pb.OK, pb.OFFSET_NOT_FOUND)
        up = await e.c.UpdateOffset(
            spb.UpdateOffsetRequest(group=group, message_queue=mq, offset=3), Ctx()
        )
        assert up.status.code == pb.OK
        got = await e.c.GetOffset(spb.GetOffsetRequest(group=group, message_queue=mq), Ctx())
        assert (got.status.code, got.offset) == (pb.OK, 3)
        bad = await e.c.UpdateOffset(
            spb.UpdateOffsetRequest(group=group, message_queue=mq, offset=-1), Ctx()
        )
        assert bad.status.code == pb.ILLEGAL_OFFSET
        q = spb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.BEGINNING)
        assert (await e.c.QueryOffset(q, Ctx())).offset == 0
        q.query_offset_policy = pb.END
        assert (await e.c.QueryOffset(q, Ctx())).offset == 5
        q.query_offset_policy = pb.TIMESTAMP
        q.timestamp.CopyFrom(to_timestamp(0))
        assert (await e.c.QueryOffset(q, Ctx())).offset == 0
        q.query_offset_policy = 9  # type: ignore[assignment]
        assert (await e.c.QueryOffset(q, Ctx())).status.code == pb.BAD_REQUEST
        frames = [
            f
            async for f in e.c.PullMessage(  # type: ignore[attr-defined]
                spb.PullMessageRequest(group=group, message_queue=mq, offset=3, batch_size=1), Ctx()
            )
        ]
        assert [f.WhichOneof("content") for f in frames] == ["status", "message", "next_offset"]
        assert frames[1].message.body == b"m3"
        assert frames[2].next_offset == 4
        moved = [
            f
            async for f in e.c.PullMessage(  # type: ignore[attr-defined]
                spb.PullMessageRequest(group=group, message_queue=mq, offset=99), Ctx()
            )
        ]
        assert moved[0].status.code == pb.ILLEGAL_OFFSET
        await e.b.stop()

    run(go())


def test_receive_without_settings_and_bad_handles(tmp_path: Path) -> None:
    async def go() -> None:
        e = await env(tmp_path, min_long_polling_ms=0)
        await e.b.send("T", b"early")
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name="G"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T"))
        )
        request.long_polling_timeout.seconds = 0
        frames = [f async for f in e.c.ReceiveMessage(request, Ctx())]  # type: ignore[attr-defined]
        # no settings yet (the Python SimpleConsumer does not wait for them): the group's
        # defaults apply and the receive works
        assert frames[0].status.code == pb.OK, frames[0]
        assert frames[1].message.body == b"early"
        assert frames[-1].WhichOneof("content") == "delivery_timestamp"
        ack = await e.c.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                entries=[spb.AckMessageEntry(message_id="x", receipt_handle="garbage")],
            ),
            Ctx(),
        )  # fmt: skip
        assert ack.status.code == pb.INVALID_RECEIPT_HANDLE
        assert ack.entries[0].receipt_handle == "garbage"
        old = ReceiptHandle(0, 1, 1, 0, "0", "broker-a", 0, 0, 0).encode()
        change = await e.c.ChangeInvisibleDuration(
            spb.ChangeInvisibleDurationRequest(
                group=pb.Resource(name="G"), topic=pb.Resource(name="T"), receipt_handle=old,
            ),
            Ctx(),
        )  # fmt: skip
        assert change.status.code == pb.INVALID_RECEIPT_HANDLE
        assert "expired" in change.status.message
        await e.b.stop()

    run(go())


def test_the_header_of_a_send_is_what_a_remoting_client_sends(tmp_path: Path) -> None:
    """Both protocols, one code path: the stored record of a gRPC send has the same shape as a
    remoting send's (producer group = topic, born host, UNIQ_KEY, no proxy-only property)."""

    async def go() -> None:
        e = await env(tmp_path)
        r = await e.p.SendMessage(
            spb.SendMessageRequest(messages=[message("Same", b"abc", "U1", tag="T", keys=["k"])]),
            Ctx(),
        )
        assert r.status.code == pb.OK
        e.b.c.store.wait_dispatched()
        msgs = []
        for qid in range(8):
            pulled = await e.b.answer(
                RequestCode.PULL_MESSAGE, e.b.pull_header("Same", queue_id=qid, sys_flag=0x4)
            )
            if pulled.code == ResponseCode.SUCCESS:
                msgs += decode_records(pulled.body or b"")
        (m,) = msgs
        assert m.body == b"abc"
        assert m.properties[p.UNIQ_KEY] == "U1"
        assert m.properties[p.PRODUCER_GROUP] == "Same"
        assert m.properties[p.BORN_HOST] == "127.0.0.1:50001"
        assert m.queue_offset == r.entries[0].offset
        await e.b.stop()

    run(go())
