"""A coroutine listener started by ``submit`` as an idle worker (no wake-up of the worker):
it runs before ``submit`` returns, as that worker's task and in its context; one that suspends
is driven on by that worker (timeouts, context variables and ``stop`` behave as when the
worker took the chunk from the queue); the caller's task is never touched."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from ariane.client import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from ariane.client._consume import ConcurrentConsumeService
from ariane.client._process_queue import ProcessQueue
from ariane.common.message import MessageExt
from tests.unit.client.test_consume_unit import MQ, FakeConsumer, _msgs, _settle

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def _parked(service: ConcurrentConsumeService, workers: int) -> None:
    await _settle(lambda: len(service._waiters) == workers)


def test_a_listener_that_does_not_suspend_is_done_when_submit_returns() -> None:
    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=1)
        seen: list[tuple[int, str | None]] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            task = asyncio.current_task()
            seen.append((msgs[0].queue_offset, task.get_name() if task else None))
            return OK

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 2)
        waiters = [w for w, _, _ in service._waiters]
        pq = ProcessQueue()
        for offset in (0, 1, 2):
            msgs = _msgs(offset)
            pq.put_messages(msgs)
            service.submit(msgs, pq, MQ)
            # consumed and committed inside submit, by a worker's task (not the caller's)
            assert seen[-1][0] == offset
            assert seen[-1][1] is not None
            assert seen[-1][1].startswith("consume-g-")
            assert consumer.offset_store.offsets[MQ] == offset + 1
            assert pq.msg_count == 0
        assert asyncio.current_task().get_name() == "main"  # type: ignore[union-attr]
        # the workers were never woken: the same two futures still park them
        assert [w for w, _, _ in service._waiters] == waiters
        assert not any(w.done() for w in waiters)
        assert service._running == 0
        assert service._idle.is_set()
        await service.stop()

    async def main() -> None:
        asyncio.current_task().set_name("main")  # type: ignore[union-attr]
        await go()

    asyncio.run(main())


def test_a_listener_that_suspends_goes_on_in_its_worker_with_its_context() -> None:
    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=1)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        log: list[Any] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            before = asyncio.current_task()
            token = VAR.set(f"m{msgs[0].queue_offset}")
            log.append(("start", msgs[0].queue_offset, VAR.get()))
            try:
                async with asyncio.timeout(5):
                    await gate
            finally:
                VAR.reset(token)  # fails in another context than the set
            log.append(("end", msgs[0].queue_offset, asyncio.current_task() is before))
            return OK

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 2)
        pq = ProcessQueue()
        msgs = _msgs(0)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)
        assert log == [("start", 0, "m0")]  # started inside submit
        assert VAR.get() == "unset"  # the caller's context is untouched
        assert len(service._waiters) == 1
        assert service._running == 1
        stopping = asyncio.ensure_future(service.stop())  # waits for the running listener
        await asyncio.sleep(0.01)
        assert not stopping.done()
        gate.set_result(None)
        await stopping
        assert log == [("start", 0, "m0"), ("end", 0, True)]
        assert consumer.offset_store.offsets[MQ] == 1
        assert pq.msg_count == 0

    asyncio.run(go())


def test_a_timeout_inside_a_listener_started_by_submit_cancels_only_the_listener() -> None:
    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=1)
        log: list[str] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            try:
                async with asyncio.timeout(0.01 if msgs[0].queue_offset == 0 else 0):
                    await asyncio.sleep(10)
            except TimeoutError:
                log.append(f"timeout {msgs[0].queue_offset}")
            return OK

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 2)
        pq = ProcessQueue()
        for offset in (0, 1):  # 1: due before its worker takes it over
            msgs = _msgs(offset)
            pq.put_messages(msgs)
            service.submit(msgs, pq, MQ)
        await _settle(lambda: pq.msg_count == 0)
        assert sorted(log) == ["timeout 0", "timeout 1"]
        assert consumer.offset_store.offsets[MQ] == 2
        await asyncio.sleep(0.02)  # the caller (this task) was not cancelled
        await _parked(service, 2)  # both workers parked again
        await service.stop()

    asyncio.run(go())


def test_a_pull_of_several_chunks_starts_the_first_and_queues_the_rest() -> None:
    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=2)
        calls: list[list[int]] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            calls.append([m.queue_offset for m in msgs])
            await asyncio.sleep(0)
            return OK

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 2)
        pq = ProcessQueue()
        msgs = _msgs(0, 1, 2, 3, 4)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)
        assert calls == [[0, 1]]  # the first chunk started in submit
        assert len(service._work) == 2  # the others queued, the other worker woken
        await _settle(lambda: pq.msg_count == 0)
        assert sorted(calls) == [[0, 1], [2, 3], [4]]
        assert consumer.offset_store.offsets[MQ] == 5
        await service.stop()

    asyncio.run(go())


def test_a_listener_raising_cancelled_error_in_submit_leaves_the_caller_running() -> None:
    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=1)

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            if msgs[0].queue_offset == 0:
                raise asyncio.CancelledError
            return OK

        service = ConcurrentConsumeService(consumer, listener, 1)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 1)
        pq = ProcessQueue()
        for offset in (0, 1):
            msgs = _msgs(offset)
            pq.put_messages(msgs)
            service.submit(msgs, pq, MQ)
        await asyncio.sleep(0)  # this task goes on
        for _ in range(1000):  # the listener's own CancelledError is a failed consume
            if consumer.sent_back and consumer.offset_store.offsets.get(MQ) == 2:
                break
            await asyncio.sleep(0.001)
        assert consumer.sent_back == [(0, 0)]  # offset 0 goes back for a later consume
        assert pq.msg_count == 0  # (before: it stayed buffered, the offset stuck at 0)
        assert consumer.offset_store.offsets[MQ] == 2
        assert service._running == 0
        assert len(service._waiters) == 1
        await service.stop()

    asyncio.run(go())


def test_without_asyncio_task_switching_submit_wakes_a_worker_as_before(
    monkeypatch: Any,
) -> None:
    """An interpreter without ``asyncio.tasks._enter_task`` / ``_leave_task``: nothing is
    consumed inside ``submit``; a parked worker is woken and consumes the chunk."""
    from ariane.client import _consume

    monkeypatch.setattr(_consume, "_CAN_CONSUME_NOW", False)

    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=1)
        seen: list[int] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            seen.append(msgs[0].queue_offset)
            return OK

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 2)
        pq = ProcessQueue()
        msgs = _msgs(7)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)
        assert seen == []  # not inside submit
        await _settle(lambda: seen == [7])
        assert consumer.offset_store.offsets[MQ] == 8
        await service.stop()

    asyncio.run(go())


def test_a_worker_cancelled_while_parked_is_skipped_and_a_live_one_takes_the_chunk() -> None:
    """The parked worker ``submit`` would start the chunk as was cancelled (its waiter done):
    it is dropped, as the wake-up loop skips done waiters, and the chunk starts as the live
    one, which drives a suspending listener to its end."""

    async def go() -> None:
        consumer = FakeConsumer(consume_message_batch_max_size=1)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        seen: list[tuple[int, str | None]] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            task = asyncio.current_task()
            seen.append((msgs[0].queue_offset, task.get_name() if task else None))
            await gate
            return OK

        service = ConcurrentConsumeService(consumer, listener, 2)  # type: ignore[arg-type]
        service.start()
        await _parked(service, 2)
        dead, live = service._waiters[-1][1], service._waiters[0][1]
        dead.cancel()
        await asyncio.sleep(0)
        assert dead.cancelled()
        pq = ProcessQueue()
        msgs = _msgs(3)
        pq.put_messages(msgs)
        service.submit(msgs, pq, MQ)  # raised InvalidStateError on the dead worker's waiter
        assert seen == [(3, live.get_name())]
        assert len(service._waiters) == 0  # the dead one dropped, the live one handed the chunk
        gate.set_result(None)
        await _settle(lambda: consumer.offset_store.offsets.get(MQ) == 4)
        assert pq.msg_count == 0
        await service.stop()

    asyncio.run(go())
