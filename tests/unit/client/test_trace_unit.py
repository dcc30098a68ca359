"""Trace capture and dispatch without a broker: the hooks' records, the dispatcher's batching,
bounds, drops and failure accounting, and the consume services' trace calls."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ariane.client import ClientConfig, ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from ariane.client._trace_dispatch import (
    AsyncTraceDispatcher,
    EncodedTrace,
    OpenTrace,
    TraceSettings,
    TraceStats,
    claim,
    encoded,
    pack,
    trace_topic_name,
)
from ariane.client._trace_hooks import ConsumeTracer, SendTracer, consume_outcome, request_id
from ariane.client.message import Message, MessageQueue, SendResult, SendStatus
from ariane.common.clock import ManualClock
from ariane.common.message import MessageExt
from ariane.common.trace import (
    MAX_TRACE_KEY_CHARS,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceMessageType,
    TraceType,
    decode_trace_data,
    message_type_of,
    pub_record,
    sub_after_record,
    sub_before_record,
)
from ariane.errors import ConnectError, InvalidArgumentError
from ariane.remoting.protocol import headers as h

CONFIG = ClientConfig(namesrv_addr="127.0.0.1:9876", instance_name="app")


@dataclass
class FakeSender:
    """A trace producer that records what it is asked to send."""

    config: ClientConfig
    group: str
    sent: list[Message] = field(default_factory=list)
    fail: BaseException | None = None
    gate: asyncio.Event | None = None
    started: int = 0
    closed: bool = False

    async def start(self) -> None:
        self.started += 1

    async def close(self) -> None:
        self.closed = True

    async def send(self, msg: Message, *, timeout_ms: int | None = None) -> SendResult:
        assert timeout_ms == 5000
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.sent.append(msg)
        mq = MessageQueue(msg.topic, "trace-broker", 0)
        return SendResult(SendStatus.SEND_OK, "id", "oid", mq, 0)


class Factory:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.senders: list[FakeSender] = []

    def __call__(self, config: ClientConfig, group: str) -> FakeSender:
        sender = FakeSender(config, group, **self.kwargs)
        self.senders.append(sender)
        return sender


def dispatcher(factory: Factory, **settings: Any) -> AsyncTraceDispatcher:
    return AsyncTraceDispatcher(
        trace_topic=None,
        host_config=CONFIG,
        host_group="pg",
        kind="PRODUCE",
        sender_factory=factory,
        settings=TraceSettings(linger_ms=0, **settings),
    )


def pub(msg_id: str, topic: str = "T", keys: str = "null") -> TraceContext:
    bean = TraceBean(topic=topic, msg_id=msg_id, tags="null", keys=keys, store_host="b:1")
    return TraceContext(TraceType.Pub, timestamp_ms=1, region_id="R", group="pg", beans=(bean,))


def test_records_are_batched_with_their_keys() -> None:
    async def go() -> None:
        factory = Factory()
        d = dispatcher(factory)
        contexts = [pub("m1", keys="k1 k2"), pub("m2", topic="U"), pub("m3")]
        for ctx in contexts:  # queued before start: sent once the worker runs
            assert d.append(ctx)
        await d.start()
        assert await d.flush(5000)
        (sender,) = factory.senders
        assert sender.started == 1
        assert sender.config.instance_name == "PID_CLIENT_INNER_TRACE_PRODUCER_127.0.0.1:9876"
        assert sender.config.namesrv_addr == CONFIG.namesrv_addr
        assert sender.group.startswith("_INNER_TRACE_PRODUCER-pg-PRODUCE-")
        (msg,) = sender.sent
        assert sorted(msg.keys) == ["k1", "k2", "m1", "m2", "m3"]
        assert decode_trace_data(msg.body.decode()) == contexts
        assert msg.topic == "RMQ_SYS_TRACE_TOPIC"
        assert (d.stats.appended, d.stats.sent_messages, d.stats.sent_records) == (3, 1, 3)
        await d.close()
        assert sender.closed
        assert not d.append(pub("late"))
        assert d.stats.discarded == 1

    asyncio.run(go())


def test_full_queue_drops_and_counts_without_blocking() -> None:
    async def go() -> None:
        factory = Factory(gate=asyncio.Event())
        d = dispatcher(factory, queue_size=3, max_in_flight=1)
        # nothing drains yet: three fit, the rest is dropped at once and counted
        accepted = [d.append(pub(f"m{i}")) for i in range(5)]
        assert accepted == [True, True, True, False, False]
        assert (d.stats.appended, d.stats.discarded, d.queued) == (3, 2, 3)
        await d.start()
        for _ in range(1000):  # the worker takes the three; their send hangs on the gate
            if not d.queued and factory.senders:
                break
            await asyncio.sleep(0)
        assert d.queued == 0
        assert factory.senders[0].sent == []
        # while the only send slot is taken, new records queue up to the bound again
        accepted = [d.append(pub(f"n{i}")) for i in range(5)]
        assert accepted.count(False) >= 2
        factory.kwargs["gate"].set()
        assert await d.flush(5000)
        assert d.stats.sent_records == d.stats.appended
        assert d.stats.discarded == 2 + accepted.count(False)
        await d.close()

    asyncio.run(go())


def test_failed_sends_are_counted_never_raised() -> None:
    async def go() -> None:
        factory = Factory(fail=ConnectError("connection refused"))
        d = dispatcher(factory)
        await d.start()
        for i in range(5):
            assert d.append(pub(f"m{i}"))
        assert await d.flush(5000)
        assert d.stats.failed_messages == 1
        assert d.stats.lost_records == 5
        assert d.stats.sent_records == 0
        await d.close()

    asyncio.run(go())


def test_close_gives_up_on_a_hung_trace_broker() -> None:
    async def go() -> None:
        factory = Factory(gate=asyncio.Event())  # never opened
        d = dispatcher(factory, flush_timeout_ms=20)
        await d.start()
        d.append(pub("m1"))
        await asyncio.sleep(0)
        await d.close()
        assert d.stats.failed_messages == 1
        assert d.stats.lost_records == 1

    asyncio.run(go())


def test_append_from_a_listener_thread_wakes_the_worker() -> None:
    async def go() -> None:
        factory = Factory()
        d = dispatcher(factory)
        await d.start()
        thread = threading.Thread(target=lambda: d.append(pub("from-thread")))
        thread.start()
        thread.join()
        assert await d.flush(5000)
        assert [m.keys for m in factory.senders[0].sent] == [["from-thread"]]
        await d.close()

    asyncio.run(go())


def test_bad_settings_and_topics_are_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        TraceSettings(queue_size=0)
    with pytest.raises(InvalidArgumentError):
        trace_topic_name("bad topic")
    assert trace_topic_name("  ") == "RMQ_SYS_TRACE_TOPIC"
    assert trace_topic_name("MyTrace") == "MyTrace"


# -- hooks ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _hooks_never_fail(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The hooks swallow their own errors (a trace must never fail a send or a consume), so
    a broken hook would pass silently: any warning they log fails the test."""
    yield
    records = caplog.get_records("setup") + caplog.get_records("call")
    failed = [r for r in records if r.name == "ariane.client._trace_hooks"]
    assert not failed, [r.getMessage() for r in failed]


@dataclass
class Sink:
    """A dispatcher stand-in: decodes what the hooks hand over."""

    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    got: list[TraceContext] = field(default_factory=list)
    items: list[EncodedTrace] = field(default_factory=list)
    stats: TraceStats = field(default_factory=TraceStats)

    def append(self, ctx: TraceContext) -> bool:
        self.got.append(ctx)
        return True

    def append_encoded(self, trace: EncodedTrace) -> bool:
        self.items.append(trace)
        decoded = decode_trace_data(trace[1])
        assert len(decoded) == trace[2]
        self.got.extend(decoded)
        return True

    open: list[OpenTrace] = field(default_factory=list)

    def append_open(self, pair: OpenTrace) -> bool:
        self.open.append(pair)
        return True

    def take(self) -> None:
        """What the worker does with a round: encode the open pairs."""
        pairs, self.open = self.open, []
        for item in encoded(pairs):  # type: ignore[arg-type]
            self.append_encoded(item)


def result(topic: str = "T", **kw: Any) -> SendResult:
    mq = MessageQueue(topic, "broker-a", 1)
    return SendResult(kw.pop("status", SendStatus.SEND_OK), "MID", "OFFID", mq, 5, **kw)


def test_pub_record_of_a_send() -> None:
    sink, clock = Sink(), ManualClock(1000)
    tracer = SendTracer(sink, "pg", clock)  # type: ignore[arg-type]
    msg = Message("T", b"hello", tags="TagA", keys=["k1", "k2"], delay_level=3)
    clock.advance(9)
    tracer.pub(msg, result(region_id="R1"), 1000, "10.0.0.1:10911", 5)
    assert sink.got == []  # encoded by the worker
    sink.take()
    (ctx,) = sink.got
    assert ctx == TraceContext(
        TraceType.Pub,
        timestamp_ms=1000,
        region_id="R1",
        group="pg",
        cost_ms=9,
        success=True,
        beans=(
            TraceBean(
                topic="T",
                msg_id="MID",
                offset_msg_id="OFFID",
                tags="TagA",
                keys="k1 k2",
                store_host="10.0.0.1:10911",
                body_length=5,
                msg_type=TraceMessageType.Delay_Msg,
            ),
        ),
    )
    assert sink.items[0][3] == ("MID", "k1 k2")
    assert sink.items[0][0] == "T"
    # stored-but-not-OK is a failed Pub; the broker's TRACE_ON=false and the trace topic
    # itself are not traced
    tracer.pub(msg, result(status=SendStatus.FLUSH_DISK_TIMEOUT), 1000, "h", 5)
    sink.take()
    assert sink.got[-1].success is False
    tracer.pub(msg, result(trace_on=False), 1000, "h", 5)
    tracer.pub(msg, result(topic="RMQ_SYS_TRACE_TOPIC"), 1000, "h", 5)
    assert sink.open == []
    assert len(sink.got) == 2


def test_pub_record_of_a_batch() -> None:
    sink = Sink()
    tracer = SendTracer(sink, "pg", ManualClock(50))  # type: ignore[arg-type]
    batch = [Message("T", b"a", keys="x"), Message("T", b"b", keys=["y", "x"]), Message("T", b"c")]
    tracer.pub(batch, result(), 50, "h:1", 99)
    sink.take()
    (ctx,) = sink.got
    assert ctx.bean.tags == "null"
    assert ctx.bean.keys == "x y"
    assert ctx.bean.body_length == 99
    assert ctx.bean.msg_type is TraceMessageType.Normal_Msg
    assert sink.items[0][3] == ("MID", "x", "y")


def test_worker_pub_encoding_is_pub_record_output() -> None:
    """The worker writes what ``pub_record`` writes, across shared and changing parts."""
    sink, clock = Sink(), ManualClock(2000)
    tracer = SendTracer(sink, "pg%x", clock)  # type: ignore[arg-type]
    sends = [  # (message, result, begin ms, store host, body length)
        (Message("T", b"a", keys="k"), result(), 1990, "h:1", 1),
        (Message("T", b"b"), result(), 1990, "h:1", 1),
        (
            Message("T", b"c", tags="x"),
            result(status=SendStatus.SLAVE_NOT_AVAILABLE),
            1995,
            "h:2",
            3,
        ),
        (Message("U", b"d", delay_level=2), result(topic="U", region_id="R"), 1995, "h:2", 3),
    ]
    expected = []
    for msg, res, begin, host, length in sends:
        tracer.pub(msg, res, begin, host, length)
        expected.append(
            pub_record(
                begin,
                res.region_id or "DefaultRegion",
                "pg%x",
                res.message_queue.topic,
                res.msg_id,
                msg.tags or "null",
                msg.properties.get("KEYS") or "null",
                host,
                length,
                2000 - begin,
                message_type_of(msg.properties),
                res.offset_msg_id,
                res.status is SendStatus.SEND_OK,
            )
        )
    sink.take()
    (item,) = sink.items
    assert item[1] == "".join(expected)
    assert (item[2], item[3]) == (4, ("MID", "k", "MID", "MID", "MID"))


def test_end_transaction_record() -> None:
    sink = Sink()
    tracer = SendTracer(sink, "txg", ManualClock(7))  # type: ignore[arg-type]
    end = h.EndTransactionRequestHeader(
        producer_group="txg",
        tran_state_table_offset=3,
        commit_log_offset=100,
        commit_or_rollback=8,
        msg_id="M",
        from_transaction_check=True,
    )
    tracer.end_transaction(Message("T", b"x"), end, "COMMIT_MESSAGE", "h:1", None)
    (ctx,) = sink.got
    assert (ctx.trace_type, ctx.timestamp_ms, ctx.region_id, ctx.group) == (
        TraceType.EndTransaction,
        7,
        "DefaultRegion",
        "txg",
    )
    b = ctx.bean
    assert (b.topic, b.msg_id, b.tags, b.keys, b.transaction_id) == (
        "T",
        "M",
        "null",
        "null",
        "null",
    )
    assert (b.transaction_state, b.from_transaction_check) == ("COMMIT_MESSAGE", True)
    assert b.msg_type is TraceMessageType.Trans_msg_Commit


def stored(msg_id: str, **props: str) -> MessageExt:
    return MessageExt(
        "T",
        b"body",
        properties={"UNIQ_KEY": msg_id, **props},
        store_size=120,
        reconsume_times=2,
        store_timestamp_ms=77,
    )


def test_sub_before_and_after_share_a_request_id() -> None:
    sink, clock = Sink(), ManualClock(1000)
    tracer = ConsumeTracer(sink, "cg", clock)  # type: ignore[arg-type]
    msgs = [
        stored("A", KEYS="k", MSG_REGION="R9", TAGS="t"),
        stored("B", TRACE_ON="false"),
        stored("C"),
    ]
    before = tracer.before(msgs)
    assert before is not None
    clock.advance(30)
    tracer.after(before, len(msgs), False, ConsumeReturnType.FAILED)
    assert sink.got == []  # encoded by the worker, when it takes the pair
    sink.take()
    b_a, a_a, b_c, a_c = sink.got
    assert [c.trace_type for c in sink.got] == [TraceType.SubBefore, TraceType.SubAfter] * 2
    # B: the storing broker said no trace
    assert [c.bean.msg_id for c in sink.got] == ["A", "A", "C", "C"]
    assert b_a.bean == TraceBean(msg_id="A", keys="k", retry_times=2)
    assert b_c.bean == TraceBean(msg_id="C", keys="null", retry_times=2)
    assert (b_a.region_id, b_a.group, b_a.timestamp_ms) == ("R9", "cg", 1000)
    assert len(b_a.request_id) == 32
    assert {c.request_id for c in sink.got} == {b_a.request_id}
    assert (a_a.cost_ms, a_a.success, a_a.context_code) == (10, False, 4)
    assert (a_c.timestamp_ms, a_c.group) == (1030, "cg")
    # one item for the listener call: both records, the index keys once
    (item,) = sink.items
    assert (item[0], item[2], item[3]) == ("T", 4, ("A", "k", "C"))
    # nothing traceable: no record, nothing to finish
    assert tracer.before([stored("B", TRACE_ON="false")]) is None
    assert sink.open == []
    # request ids differ per listener call
    again = tracer.before([stored("D")])
    assert again is not None
    sink.take()
    assert sink.got[-1].request_id != b_a.request_id


def test_a_pair_taken_before_the_listener_returned() -> None:
    """The worker shipped the SubBefore alone: ``after`` ships its SubAfter itself."""
    sink, clock = Sink(), ManualClock(500)
    tracer = ConsumeTracer(sink, "cg", clock)  # type: ignore[arg-type]
    before = tracer.before([stored("A", KEYS="k1 k2")])
    assert before is not None
    sink.take()
    assert [(c.trace_type, c.bean.msg_id) for c in sink.got] == [(TraceType.SubBefore, "A")]
    clock.advance(7)
    tracer.after(before, 1, True, ConsumeReturnType.SUCCESS)
    _, late = sink.got
    assert late.trace_type is TraceType.SubAfter
    assert (late.request_id, late.cost_ms, late.timestamp_ms) == (sink.got[0].request_id, 7, 507)
    assert [i[3] for i in sink.items] == [("A", "k1 k2"), ("A", "k1 k2")]


def test_claiming_a_pair_is_decided_by_the_first_append() -> None:
    late: OpenTrace = ["owner", "data"]
    assert claim(late) is None  # the worker first: no SubAfter data in this item
    late.append("after")
    assert claim(late) is None
    early: OpenTrace = ["owner", "data"]
    early.append("after")
    assert claim(early) == "after"


def test_worker_encoding_is_the_record_functions_output() -> None:
    """``encode_pairs`` writes byte for byte what ``sub_before_record`` and
    ``sub_after_record`` write, across shared and changing parts."""
    clock = ManualClock(1_700_000_000_000)
    sink = Sink()
    tracer = ConsumeTracer(sink, "cg%1", clock)  # type: ignore[arg-type]
    cases = [  # (messages, ms spent, success, outcome)
        ([stored("A", KEYS="k1 k2", MSG_REGION="R1")], 0, True, ConsumeReturnType.SUCCESS),
        ([stored("B", MSG_REGION="R1")], 0, True, ConsumeReturnType.SUCCESS),
        ([stored("C")], 3, False, ConsumeReturnType.FAILED),
        ([stored("D"), stored("E", KEYS="x")], 9, False, ConsumeReturnType.EXCEPTION),
    ]
    expected = []
    for msgs, spent, success, outcome in cases:
        before = tracer.before(msgs)
        assert before is not None
        began = clock.now_ms()
        clock.advance(spent)
        tracer.after(before, len(msgs), success, outcome)
        rid = request_id(before[1][2])
        for m in msgs:
            keys = m.properties.get("KEYS") or "null"
            region = msgs[-1].properties.get("MSG_REGION") or "DefaultRegion"
            uid = m.properties["UNIQ_KEY"]
            expected.append(sub_before_record(began, region, "cg%1", rid, uid, 2, keys))
            cost, now = spent // len(msgs), clock.now_ms()
            expected.append(sub_after_record(rid, uid, cost, success, keys, outcome, now, "cg%1"))
    sink.take()
    (item,) = sink.items
    assert item[1] == "".join(expected)
    assert item[3] == ("A", "k1 k2", "B", "C", "D", "E", "x")
    # request ids: 32 hex digits, the number in the last 16 (blocks of 256 share a prefix)
    assert request_id(0x1FF)[-16:] == "00000000000001FF"
    assert request_id(0x200)[:16] == request_id(0x1FF)[:16]


def test_worker_encoding_cuts_items_for_the_key_limit() -> None:
    sink = Sink()
    tracer = ConsumeTracer(sink, "cg", ManualClock(1))  # type: ignore[arg-type]
    count = 400  # 400 x 2 x 33 index characters: more than a quarter of the key limit
    for i in range(count):
        before = tracer.before([stored(f"{i:032X}", KEYS=f"key{i:029d}")])
        assert before is not None
        tracer.after(before, 1, True, ConsumeReturnType.SUCCESS)
    sink.take()
    assert len(sink.items) > 1
    assert sum(i[2] for i in sink.items) == 2 * count
    for item in sink.items:
        assert sum(len(k) + 1 for k in item[3]) < MAX_TRACE_KEY_CHARS // 4 + 70
    keys = [k for i in sink.items for k in i[3]]
    assert keys == [k for i in range(count) for k in (f"{i:032X}", f"key{i:029d}")]
    packed = pack(sink.items)
    assert sum(p.records for p in packed) == 2 * count
    assert all(len(p.keys) <= MAX_TRACE_KEY_CHARS for p in packed)


def test_open_pairs_through_the_dispatcher() -> None:
    """A pair is one queue entry counted as two contexts; a SubBefore dropped on a full queue
    still lets the SubAfter through once there is room."""

    async def go() -> None:
        factory = Factory()
        d = dispatcher(factory, queue_size=1)
        clock = ManualClock(100)
        tracer = ConsumeTracer(d, "cg", clock)
        assert d.append(pub("m0"))  # the queue is full
        dropped = tracer.before([stored("A")])
        assert dropped is not None
        assert (d.stats.appended, d.stats.discarded) == (1, 1)
        await d.start()
        assert await d.flush(5000)
        tracer.after(dropped, 1, True, ConsumeReturnType.SUCCESS)  # the SubAfter alone
        assert await d.flush(5000)
        pair = tracer.before([stored("B")])
        assert pair is not None
        tracer.after(pair, 1, True, ConsumeReturnType.SUCCESS)
        assert d.queued == 1
        assert await d.flush(5000)
        sent = [decode_trace_data(m.body.decode()) for m in factory.senders[0].sent]
        got = [(c.trace_type, c.bean.msg_id) for body in sent for c in body]
        assert got == [
            (TraceType.Pub, "m0"),
            (TraceType.SubAfter, "A"),
            (TraceType.SubBefore, "B"),
            (TraceType.SubAfter, "B"),
        ]
        assert (d.stats.appended, d.stats.discarded, d.stats.sent_records) == (4, 1, 4)
        await d.close()

    asyncio.run(go())


def test_pack_closes_a_body_at_the_limits() -> None:
    def item(data: str, *keys: str) -> EncodedTrace:
        return ("T", data, 1, keys)

    packed = pack([item("a" * 40, f"k{i}") for i in range(5)], max_chars=100)
    assert [(len(p.data), p.records, p.keys) for p in packed] == [
        (120, 3, "k0 k1 k2"),
        (80, 2, "k3 k4"),
    ]
    # keys are deduplicated; the KEYS text stays under its limit (counted before
    # deduplication: "k1 " + "k2 k1 " = 9)
    packed = pack([item("d", "k1"), item("d", "k2", "k1"), item("d", "k3", "k4")], max_key_chars=9)
    assert [(p.data, p.keys) for p in packed] == [("dd", "k1 k2"), ("d", "k3 k4")]
    # one item with too many keys keeps the first ones that fit
    (only,) = pack([item("d", "a bb", "c", "d")], max_key_chars=7)
    assert only.keys == "a bb c"
    assert pack([]) == []


@pytest.mark.parametrize(
    ("status", "raised", "elapsed", "expected"),
    [
        (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, False, 5, (True, ConsumeReturnType.SUCCESS)),
        (ConsumeConcurrentlyStatus.RECONSUME_LATER, False, 5, (False, ConsumeReturnType.FAILED)),
        (None, True, 5, (False, ConsumeReturnType.EXCEPTION)),
        (None, False, 5, (False, ConsumeReturnType.RETURNNULL)),
        (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, False, 100, (True, ConsumeReturnType.TIME_OUT)),
        (ConsumeOrderlyStatus.SUCCESS, False, 5, (True, ConsumeReturnType.SUCCESS)),
        (ConsumeOrderlyStatus.COMMIT, False, 5, (True, ConsumeReturnType.SUCCESS)),
        (ConsumeOrderlyStatus.ROLLBACK, False, 5, (False, ConsumeReturnType.SUCCESS)),
        (
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
            False,
            5,
            (False, ConsumeReturnType.FAILED),
        ),
        ("something else", False, 5, (False, ConsumeReturnType.FAILED)),
    ],
)
def test_consume_outcomes(
    status: Any, raised: bool, elapsed: int, expected: tuple[bool, ConsumeReturnType]
) -> None:
    assert consume_outcome(status, raised, elapsed, 100) == expected


def test_a_full_round_ends_the_lingering() -> None:
    """The worker lingers for more records, but not once a round's worth is queued."""

    async def go() -> None:
        factory = Factory()
        d = AsyncTraceDispatcher(
            trace_topic=None,
            host_config=CONFIG,
            host_group="pg",
            kind="PRODUCE",
            sender_factory=factory,
            settings=TraceSettings(linger_ms=600_000, batch_size=3, flush_timeout_ms=0),
        )
        await d.start()
        d.append(pub("m1"))
        d.append(pub("m2"))
        for _ in range(100):  # the worker woke and lingers (ten minutes)
            await asyncio.sleep(0)
        assert d.queued == 2
        d.append(pub("m3"))  # a round's worth: the worker goes at once
        for _ in range(1000):
            if d.stats.sent_records == 3:
                break
            await asyncio.sleep(0)
        assert d.stats.sent_records == 3
        assert [sorted(m.keys) for m in factory.senders[0].sent] == [["m1", "m2", "m3"]]
        await d.close()

    asyncio.run(go())
