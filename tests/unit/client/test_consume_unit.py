"""Consume services without sockets: statuses, ack index, send-back failures, orderly
suspend and the dead-letter path, listeners in threads."""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from ariane.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
    MessageQueue,
)
from ariane.client._consume import ConcurrentConsumeService, OrderlyConsumeService
from ariane.client._process_queue import ProcessQueue
from ariane.client._stats import ConsumeStats
from ariane.client._trace_dispatch import TraceStats
from ariane.common.clock import SystemClock
from ariane.common.message import MessageExt

MQ = MessageQueue("T", "b", 0)


@dataclass
class FakeStore:
    offsets: dict[MessageQueue, int] = field(default_factory=dict)

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        if not increase_only or offset > self.offsets.get(mq, -1):
            self.offsets[mq] = offset


@dataclass
class FakeConsumer:
    group: str = "g"
    retry_topic: str = "%RETRY%g"
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_message_batch_max_size: int = 2
    suspend_current_queue_time_ms: int = 10
    max_reconsume_times: int = -1
    consume_timeout_ms: int = 60_000
    clock: SystemClock = field(default_factory=SystemClock)
    tracer: Any = None
    stats: ConsumeStats = field(default_factory=ConsumeStats)
    offset_store: FakeStore = field(default_factory=FakeStore)
    sent_back: list[tuple[int, int]] = field(default_factory=list)
    to_retry: list[tuple[int, int, int]] = field(default_factory=list)
    back_ok: bool = True

    async def send_message_back(self, msg: MessageExt, delay: int, broker: str | None) -> bool:
        self.sent_back.append((msg.queue_offset, delay))
        return self.back_ok

    async def send_to_retry_topic(self, msg: MessageExt, times: int, limit: int) -> bool:
        self.to_retry.append((msg.queue_offset, times, limit))
        return True


def _msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt("T", b"x", queue_offset=o) for o in offsets]


async def _settle(cond: Any, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)


def test_concurrent_statuses_ack_index_and_commit_rule() -> None:
    async def go() -> None:
        consumer = FakeConsumer()

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            first = msgs[0].queue_offset
            if first == 2:
                ctx.ack_index = 0  # offset 3 failed
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            if first == 4:
                raise RuntimeError("boom")  # both fail
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        pq = ProcessQueue()
        msgs = _msgs(0, 1, 2, 3, 4, 5)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)
        await _settle(lambda: pq.msg_count == 0)
        await service.stop()
        assert sorted(consumer.sent_back) == [(3, 0), (4, 0), (5, 0)]
        assert consumer.offset_store.offsets[MQ] == 6
        assert consumer.stats.consumed == 3
        assert consumer.stats.failed == 3

    asyncio.run(go())


def test_failed_send_back_keeps_the_message_and_pins_the_offset() -> None:
    async def go() -> None:
        consumer = FakeConsumer(back_ok=False)
        calls: list[int] = []

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            calls.append(msgs[0].queue_offset)
            assert threading.current_thread().name.startswith("ConsumeMessageThread_g")
            return None if msgs[0].queue_offset == 0 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.consume_message_batch_max_size = 1
        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        pq = ProcessQueue()
        msgs = _msgs(0, 1, 2)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)
        await _settle(lambda: sorted(calls) == [0, 1, 2] and pq.msg_count == 1)
        assert consumer.offset_store.offsets[MQ] == 0  # offset 0 is still buffered
        assert msgs[0].reconsume_times == 1  # and comes back locally after 5 s
        await service.stop()

    asyncio.run(go())


def test_broadcasting_failures_are_dropped_not_sent_back() -> None:
    async def go() -> None:
        consumer = FakeConsumer(message_model=MessageModel.BROADCASTING)

        async def listener(msgs: list[MessageExt], ctx: Any) -> Any:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER

        service = ConcurrentConsumeService(consumer, listener, 1)  # type: ignore[arg-type]
        service.start()
        pq = ProcessQueue()
        msgs = _msgs(7, 8)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)
        await _settle(lambda: pq.msg_count == 0)
        await service.stop()
        assert consumer.sent_back == []
        assert consumer.offset_store.offsets[MQ] == 9

    asyncio.run(go())


def test_orderly_suspends_in_place_then_dead_letters_at_the_limit() -> None:
    async def go() -> None:
        consumer = FakeConsumer(message_model=MessageModel.BROADCASTING, max_reconsume_times=2)
        seen: list[tuple[int, int]] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
            seen.extend((m.queue_offset, m.reconsume_times) for m in msgs)
            if any(m.queue_offset == 1 for m in msgs):
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        consumer.consume_message_batch_max_size = 1
        service = OrderlyConsumeService(consumer, listener, 4)  # type: ignore[arg-type]
        pq = ProcessQueue()
        msgs = _msgs(0, 1, 2)
        service.submit(msgs, pq, MQ, pq.put_messages(msgs))
        await _settle(lambda: consumer.offset_store.offsets.get(MQ) == 3)
        await service.stop()
        # offset 1 was tried 3 times (0, 1, 2 reconsumes), then went to the retry topic
        # with its count (the broker dead-letters it) and the queue moved on, in order
        assert seen == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0)]
        assert consumer.to_retry == [(1, 2, 2)]

    asyncio.run(go())


@dataclass
class TraceSink:
    """Stands in for the ``AsyncTraceDispatcher`` (``append_open``, ``append_encoded``,
    ``stats``): open pairs queue as they do there, and ``got`` plays its worker, encoding each
    queued pair once its SubAfter is attached (what a worker round does with them)."""

    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    stats: TraceStats = field(default_factory=TraceStats)
    queued: list[Any] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)

    def append_encoded(self, trace: Any) -> bool:
        from ariane.common.trace import decode_trace_data

        self.stats.appended += 1
        self.records.extend(decode_trace_data(trace[1]))
        return True

    def append_open(self, pair: Any) -> bool:
        self.stats.appended += 1
        self.queued.append(pair)
        return True

    @property
    def got(self) -> list[Any]:
        from ariane.client._trace_dispatch import encoded

        done = [pair for pair in self.queued if len(pair) > 2]
        self.queued = [pair for pair in self.queued if len(pair) <= 2]
        from ariane.common.trace import decode_trace_data

        for item in encoded(done):
            self.records.extend(decode_trace_data(item[1]))
        return self.records


def _traced(service_cls: Any, listener: Any, msgs: list[MessageExt], **kw: Any) -> list[Any]:
    """Run ``listener`` over ``msgs`` (batches of 1) with tracing on; the trace records."""
    from ariane.client._trace_hooks import ConsumeTracer

    async def go() -> list[Any]:
        sink = TraceSink()
        consumer = FakeConsumer(consume_message_batch_max_size=1, **kw)
        consumer.tracer = ConsumeTracer(sink, "g")  # type: ignore[arg-type]
        service = service_cls(consumer, listener, 1)
        service.start()
        pq = ProcessQueue()
        pq.put_messages(msgs)
        if service_cls is OrderlyConsumeService:
            pq.locked = True
        service.submit(msgs, pq, MQ, True)
        await _settle(lambda: len(sink.got) >= 2 * len(msgs))
        await service.stop()
        # each delivery counted twice, as the dispatcher counts a completed pair
        assert sink.stats.appended == 2 * len(msgs)
        return sink.got

    return asyncio.run(go())


def _pairs(records: list[Any]) -> list[tuple[str, str, int, bool]]:
    """(type, msgId, contextCode, success) per record, SubAfter paired by request id."""
    befores = {r.request_id for r in records if r.trace_type.value == "SubBefore"}
    assert all(r.request_id in befores for r in records if r.trace_type.value == "SubAfter")
    return [(r.trace_type.value, r.bean.msg_id, r.context_code, r.success) for r in records]


def test_traced_coroutine_listener_records_each_outcome() -> None:
    async def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        offset = msgs[0].queue_offset
        if offset == 1:
            raise RuntimeError("boom")
        if offset == 2:
            return None
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    msgs = _msgs(0, 1, 2)
    for m in msgs:
        m.properties["UNIQ_KEY"] = f"id{m.queue_offset}"
    got = _pairs(_traced(ConcurrentConsumeService, listener, msgs))
    assert sorted(got) == sorted(
        [
            ("SubBefore", "id0", 0, True),
            ("SubAfter", "id0", 0, True),
            ("SubBefore", "id1", 0, True),
            ("SubAfter", "id1", 2, False),  # EXCEPTION
            ("SubBefore", "id2", 0, True),
            ("SubAfter", "id2", 3, False),  # RETURNNULL
        ]
    )


def test_traced_thread_and_orderly_listeners() -> None:
    def plain(msgs: list[MessageExt], ctx: Any) -> Any:
        assert threading.current_thread().name.startswith("ConsumeMessageThread_g")
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    msgs = _msgs(0)
    msgs[0].properties["UNIQ_KEY"] = "p0"
    got = _pairs(_traced(ConcurrentConsumeService, plain, msgs))
    assert got == [("SubBefore", "p0", 0, True), ("SubAfter", "p0", 4, False)]  # FAILED

    async def orderly(msgs: list[MessageExt], ctx: Any) -> Any:
        return ConsumeOrderlyStatus.SUCCESS

    msgs = _msgs(5)
    msgs[0].properties["UNIQ_KEY"] = "o5"
    got = _pairs(_traced(OrderlyConsumeService, orderly, msgs))
    assert got == [("SubBefore", "o5", 0, True), ("SubAfter", "o5", 0, True)]


class _StepClock(SystemClock):
    """``monotonic`` reads 0.0, then ``seconds``, then 0.0 again...: each listener call of the
    consume service (one reading before, one after) lasts exactly ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.readings = itertools.cycle((0.0, seconds))

    def monotonic(self) -> float:
        return next(self.readings)


@pytest.mark.parametrize(
    ("timeout_ms", "seconds", "code"),
    [
        (60_000, 0.25, 0),
        (60_000, 59.9999, 0),
        (60_000, 60.0, 1),
        (1000, 0.9999, 0),
        (1000, 1.0, 1),
        (999, 0.9985, 0),
        (999, 0.9995, 1),
        (500, 0.4999, 0),
        (500, 0.6, 1),
        (0, 0.0, 1),
    ],
)
def test_traced_success_within_or_past_the_consume_timeout(
    timeout_ms: int, seconds: float, code: int
) -> None:
    """A successful call is SUCCESS (0) while ``seconds * 1000 < consume_timeout_ms``, else
    TIME_OUT (1, still a success), whichever of the service's checks decides it."""

    async def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    msgs = _msgs(0)
    msgs[0].properties["UNIQ_KEY"] = "t0"
    got = _pairs(
        _traced(
            ConcurrentConsumeService,
            listener,
            msgs,
            consume_timeout_ms=timeout_ms,
            clock=_StepClock(seconds),
        )
    )
    assert got == [("SubBefore", "t0", 0, True), ("SubAfter", "t0", code, True)]
