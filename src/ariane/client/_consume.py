"""Consume services of the push consumer (RocketMQ ``ConsumeMessageConcurrentlyService`` and
``ConsumeMessageOrderlyService``).

How it works:

* Concurrent: pulled messages are cut into chunks of ``consume_message_batch_max_size`` and
  queued; ``consume_thread_nums`` workers take chunks and call the listener: for a coroutine
  function, worker coroutines fed from a deque; for a plain function, threads fed from a
  ``queue.SimpleQueue`` that hand results back to the loop with at most one pending
  ``call_soon_threadsafe`` (a thread never waits for the loop between two chunks). The result is applied on the loop: successes leave the process queue and the
  offset to commit becomes the smallest offset still buffered; failures are sent back for a
  later retry (CONSUMER_SEND_MSG_BACK, falling back to the retry topic), and a message that
  could not be sent back stays buffered and is consumed again locally after 5 s.
  Broadcasting failures are dropped (logged), as in RocketMQ. No task is created per message.
  When a coroutine worker is idle and nothing is queued, ``submit`` starts the chunk's
  listener at once as that worker (its task current, its context): a listener that does not
  suspend is done before ``submit`` returns, without waking the worker (one loop turn less
  per pull); one that suspends is handed to the worker, which drives it on. With a tracer,
  ``submit`` resets the retry topics of the pulled list, then has the tracer read the SubBefore
  values of all its chunks in one loop (``hook_capture``: the trace code stays in the
  instruction cache); a delivery stamps its start and ends its captured entry with it
  (``hook_end``), and a chunk never delivered (dropped queue, ``stop``) is cancelled. The
  thread service and the orderly service trace each delivery on its own (``hook_before``).
* Orderly: one drain per process queue at a time (a per-queue lock): it takes the lowest
  messages, calls the listener while holding the queue's consume lock, and commits
  ``last + 1`` on ``SUCCESS``; on ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` the messages go back and
  the queue pauses ``suspend_current_queue_time_ms``. In clustering mode a drain only runs
  while the broker lock is held and fresh; otherwise it re-locks and retries. Drains are
  bounded by ``consume_thread_nums`` and yield after 60 s so other queues get a turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
import queue
import threading
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from itertools import repeat
from typing import Any, Protocol, TypeAlias

from ariane.client._offset_store import OffsetStore
from ariane.client._process_queue import ProcessQueue
from ariane.client._rebalance import RebalanceImpl
from ariane.client._stats import ConsumeStats
from ariane.client._trace_hooks import ConsumeTracer, TraceBefore, consume_outcome
from ariane.client.consumer_types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from ariane.common import properties as props
from ariane.common.clock import Clock, monotonic_ms
from ariane.common.message import MessageExt
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = ["ConcurrentConsumeService", "OrderlyConsumeService", "is_coroutine_listener"]

# what a task's step does around its coroutine (private asyncio functions of CPython 3.11 to
# 3.14); where an interpreter lacks them, submit hands every chunk to a woken worker instead
_enter_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = getattr(
    asyncio.tasks, "_enter_task", None
)
_leave_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = getattr(
    asyncio.tasks, "_leave_task", None
)
_CAN_CONSUME_NOW = _enter_task is not None and _leave_task is not None

logger = logging.getLogger(__name__)


class ListenerCancelled(Exception):
    """A listener raised ``CancelledError`` without its task being cancelled: handled as
    any exception of a listener (the messages are consumed again later)."""


_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class ConsumeHost(Protocol):
    """What the consume services need of their push consumer (``PushConsumer``)."""

    @property
    def group(self) -> str: ...
    @property
    def offset_store(self) -> OffsetStore: ...
    @property
    def rebalance(self) -> RebalanceImpl: ...

    retry_topic: str
    message_model: MessageModel
    clock: Clock
    tracer: ConsumeTracer | None
    stats: ConsumeStats
    consume_message_batch_max_size: int
    consume_timeout_ms: int
    suspend_current_queue_time_ms: int
    max_reconsume_times: int

    async def send_message_back(
        self, msg: MessageExt, delay_level: int = 0, broker_name: str | None = None
    ) -> bool: ...

    async def send_to_retry_topic(
        self, msg: MessageExt, reconsume_times: int, max_times: int
    ) -> bool: ...


#: Resubmit delay of messages whose send-back failed (Java 5 s).
RESUBMIT_DELAY_S = 5.0
#: ``rocketmq.client.maxTimeConsumeContinuously``.
MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000


def is_coroutine_listener(listener: Callable[..., Any]) -> bool:
    """Whether ``listener`` is a coroutine function (or an object with an async ``__call__``)."""
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)  # noqa: B004 - instances with async __call__
    )


class _ServiceBase:
    """Listener invocation shared by both services."""

    def __init__(self, consumer: ConsumeHost, listener: Callable[..., Any], workers: int) -> None:
        self.consumer = consumer
        self.listener = listener
        self.workers = workers
        self.is_coro = is_coroutine_listener(listener)
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        if not self.is_coro:
            self.executor = concurrent.futures.ThreadPoolExecutor(
                workers, thread_name_prefix=f"ConsumeMessageThread_{consumer.group}"
            )
        self.stopped = False
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    async def call_listener(self, msgs: list[MessageExt], ctx: Any) -> Any:
        """Run the listener on ``msgs`` (exceptions propagate). A ``CancelledError`` the
        listener raises while its task is not being cancelled is its own failure, as any
        exception is (``ListenerCancelled``: consumed again later); before, it ended the
        worker that ran it, and with the last worker gone nothing was consumed any more."""
        try:
            if self.is_coro:
                return await self.listener(msgs, ctx)
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self.executor, self.listener, msgs, ctx)
            if inspect.isawaitable(result):
                result = await result
            return result
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the task itself is cancelled (stop, or the caller's timeout)
            raise ListenerCancelled("the listener raised CancelledError") from exc

    def trace_after(
        self,
        before: TraceBefore,
        count: int,
        status: Any,
        raised: bool,
        seconds: float,
        began_ns: int = -1,
    ) -> None:
        """The SubAfter record of a listener call whose SubBefore was ``before`` (a captured
        entry's handle when ``began_ns``, the call's start, is given)."""
        tracer = self.consumer.tracer
        if tracer is None:
            return
        if status is _SUCCESS and seconds * 1000 < self.consumer.consume_timeout_ms:
            if began_ns >= 0:
                hook_end = tracer.hook_end
                hook_end(before, count, began_ns)  # type: ignore[arg-type]
                return
            hook_after = tracer.hook_after  # the usual case (see ``_consume``)
            hook_after(before, count)
            return
        success, outcome = consume_outcome(
            status, raised, int(seconds * 1000), self.consumer.consume_timeout_ms
        )
        if began_ns >= 0:
            tracer.end_captured(before, began_ns, count, success, outcome)  # type: ignore[arg-type]
            return
        tracer.after(before, count, success, outcome)

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop after ``delay_s`` unless the service stops first."""
        if self.stopped:
            return

        def fire() -> None:
            self._timers.discard(handle)
            if not self.stopped:
                fn()

        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        self._timers.add(handle)

    def spawn(self, coro: Any) -> None:
        """Track a background task of the service."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Stop scheduling; wait for running work."""
        self.stopped = True
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self.executor is not None:
            self.executor.shutdown(wait=False)


_ThreadJob = tuple[list[MessageExt], ProcessQueue, MessageQueue, ConsumeConcurrentlyContext]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def reset_retry_topic(msgs: list[MessageExt], retry_topic: str) -> None:
    """``resetRetryTopic``: a message from ``%RETRY%<group>`` shows its original topic."""
    for msg in msgs:
        if msg.topic == retry_topic:
            origin = msg.properties.get(props.RETRY_TOPIC)
            if origin:
                msg.topic = origin


#: a parked coroutine worker: the future that wakes it (with nothing, or a started consume
#: to drive on), its task and its context
_Parked: TypeAlias = tuple[
    "asyncio.Future[_Started | None]", "asyncio.Task[None]", contextvars.Context
]
#: a consume started outside its worker: the coroutine and what it yielded when it suspended
_Started: TypeAlias = tuple[Coroutine[Any, Any, None], Any]


@types.coroutine
def _go_on(
    coro: Coroutine[Any, Any, None], yielded: Any, thrown: BaseException | None = None
) -> Generator[Any, Any, None]:
    """Drive ``coro``, which suspended on ``yielded`` in another task's step, to its end
    inside the awaiting task (``yield from`` of a started coroutine); ``thrown`` is first
    thrown into it (the task was cancelled before it took the coroutine over)."""
    if thrown is not None:
        try:
            yielded = coro.throw(thrown)
        except StopIteration:
            return
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # thrown in by the task: a cancellation
            try:
                yielded = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration:
                return


class ConcurrentConsumeService(_ServiceBase):
    """``ConsumeMessageConcurrentlyService``: see the module docstring."""

    def __init__(self, consumer: ConsumeHost, listener: Callable[..., Any], workers: int) -> None:
        super().__init__(consumer, listener, workers)
        self.batch_max = consumer.consume_message_batch_max_size
        #: (chunk, pq, mq, trace): trace is the chunk's captured entry handle (an int), None
        #: (not traced) or NotImplemented (``hook_before`` at the delivery)
        self._work: deque[tuple[list[MessageExt], ProcessQueue, MessageQueue, Any]] = deque()
        self._waiters: deque[_Parked] = deque()
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._workers: list[asyncio.Task[None]] = []
        # plain-function listeners: threads fed by a SimpleQueue, results coalesced back
        self._tq: queue.SimpleQueue[_ThreadJob | None] = queue.SimpleQueue()
        self._done: deque[tuple[_ThreadJob, Any, float]] = deque()
        self._wake_pending = False
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start the workers (on the running loop): coroutines for a coroutine listener,
        threads for a plain function."""
        self._loop = asyncio.get_running_loop()
        if not self.is_coro:
            group = self.consumer.group
            self._threads = [
                threading.Thread(
                    target=self._thread_main, name=f"ConsumeMessageThread_{group}_{i}", daemon=True
                )
                for i in range(self.workers)
            ]
            for thread in self._threads:
                thread.start()
            return
        self._workers = []
        for i in range(self.workers):
            context = contextvars.copy_context()
            self._workers.append(
                self._loop.create_task(
                    self._worker(context),
                    name=f"consume-{self.consumer.group}-{i}",
                    context=context,
                )
            )

    def submit(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool = True
    ) -> None:
        """Queue ``msgs`` for consumption in chunks of ``batch_max`` (no task, no future:
        a plain deque; only idle workers are woken)."""
        if self.stopped:
            return
        consumer = self.consumer
        reset_retry_topic(msgs, consumer.retry_topic)  # before the capture reads the topics
        size = self.batch_max
        if len(msgs) <= size:
            chunks = [msgs]
        else:
            chunks = [msgs[i : i + size] for i in range(0, len(msgs), size)]
        if not self.is_coro:
            for chunk in chunks:
                self._running += 1
                self._idle.clear()
                self._tq.put((chunk, pq, mq, self._prepare(chunk, mq)))
            return
        tracer = consumer.tracer
        traces: Any = None
        if tracer is not None:
            capture = tracer.hook_capture
            traces = capture(chunks) if capture is not None else None
        first = traces[0] if traces is not None else None if tracer is None else NotImplemented
        waiters = self._waiters
        if (
            waiters
            and not self._work
            and _CAN_CONSUME_NOW
            and self._consume_now(chunks[0], pq, mq, first)
        ):
            if len(chunks) == 1:
                return
            chunks = chunks[1:]
            if traces is not None:
                traces = traces[1:]
        if traces is None:
            traces = repeat(first)
        self._work.extend(zip(chunks, repeat(pq), repeat(mq), traces))
        count = len(chunks)
        while count and waiters:
            waiter = waiters.popleft()[0]
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def _consume_now(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, trace: Any
    ) -> bool:
        """Start the consume of ``msgs`` in the caller's step as an idle worker (its task
        current, its context): done here unless the listener suspends, then handed to it.
        False, doing nothing, when no parked worker is alive (their waiters are dropped, as
        the wake-up loop of ``submit`` skips them)."""
        waiters = self._waiters
        while waiters and waiters[-1][0].done():  # a worker cancelled while parked
            waiters.pop()
        if not waiters:
            return False
        parked = waiters.pop()
        waiter, worker, context = parked
        loop = self._loop
        assert loop is not None
        assert _enter_task is not None
        assert _leave_task is not None
        coro = self._consume_counted(msgs, pq, mq, trace)
        caller = asyncio.current_task(loop)
        if caller is not None:
            _leave_task(loop, caller)
        _enter_task(loop, worker)
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            self._waiters.append(parked)  # done: the worker stays parked, never woken
            return True
        except asyncio.CancelledError:  # raised by the listener itself
            logger.warning("listener of %s raised CancelledError", self.consumer.group)
            self._waiters.append(parked)
            return True
        finally:
            _leave_task(loop, worker)
            if caller is not None:
                _enter_task(loop, caller)
        waiter.set_result((coro, yielded))
        return True

    async def _worker(self, context: contextvars.Context) -> None:
        work = self._work
        loop = asyncio.get_running_loop()
        me = asyncio.current_task(loop)
        assert me is not None
        streak = 0
        while not self.stopped:
            if not work:
                waiter: asyncio.Future[_Started | None] = loop.create_future()
                self._waiters.append((waiter, me, context))
                try:
                    started = await waiter
                except asyncio.CancelledError as exc:
                    started = None if waiter.cancelled() else waiter.result()
                    if started is None:
                        raise
                    await _go_on(*started, exc)  # a timeout of the listener's, already due
                else:
                    if started is not None:  # a listener started by submit that suspended
                        await _go_on(*started)
                streak = 0
                continue
            msgs, pq, mq, trace = work.popleft()
            await self._consume_counted(msgs, pq, mq, trace)
            streak += 1
            if streak >= 64:  # listeners that never suspend must not starve the pulls
                streak = 0
                await asyncio.sleep(0)

    async def _consume_counted(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, trace: Any
    ) -> None:
        self._running += 1
        self._idle.clear()
        try:
            await self._consume(msgs, pq, mq, trace)
        except Exception:
            logger.exception("consume of %d messages from %s failed", len(msgs), mq)
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    def _prepare(self, msgs: list[MessageExt], mq: MessageQueue) -> ConsumeConcurrentlyContext:
        # (the retry topics were reset by ``submit``)
        start = str(self.consumer.clock.now_ms())
        for msg in msgs:
            msg.properties[props.CONSUME_START_TIMESTAMP] = start
        return ConsumeConcurrentlyContext(mq)

    async def _consume(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, trace: Any
    ) -> None:
        if pq.dropped:
            if trace.__class__ is int:  # captured at submit, never delivered
                self.consumer.tracer.cancel(trace)  # type: ignore[union-attr]
            return
        ctx = self._prepare(msgs, mq)
        clock = self.consumer.clock
        tracer = self.consumer.tracer
        before = None
        began = -1
        if tracer is not None:
            # the hooks are instance attributes: loaded, then called (``tracer.hook(...)``
            # would take the unspecialized method lookup on every delivery)
            if trace is NotImplemented:  # not captured at submit
                hook_before = tracer.hook_before
                before = hook_before(msgs)
            elif trace is not None:  # captured at submit: the start is stamped now
                now_ns = tracer.now_ns
                began = now_ns()
                before = trace
        begin = clock.monotonic()
        raised = False
        try:
            status = await self.call_listener(msgs, ctx)
        except Exception:
            logger.warning(
                "listener of %s raised; will reconsume", self.consumer.group, exc_info=True
            )
            status, raised = None, True
        except asyncio.CancelledError:  # this worker is cancelled: its trace entry is ended
            if before is not None:
                seconds = clock.monotonic() - begin
                self.trace_after(before, len(msgs), None, True, seconds, began)
            raise
        seconds = clock.monotonic() - begin
        if before is not None:
            timeout_ms = self.consumer.consume_timeout_ms
            # the usual end (``trace_after``'s first case) without its frame; ``seconds < 1.0``
            # first: a float comparison, where ``seconds * 1000 < timeout_ms`` multiplies and
            # compares a float with an int (exact either way: below 1.0, ``seconds * 1000``
            # rounds below 1000)
            if status is _SUCCESS and (
                (seconds < 1.0 and timeout_ms >= 1000) or seconds * 1000 < timeout_ms
            ):
                if began >= 0:
                    hook_end = tracer.hook_end  # type: ignore[union-attr]
                    hook_end(before, len(msgs), began)  # type: ignore[arg-type]
                else:
                    hook_after = tracer.hook_after  # type: ignore[union-attr]
                    hook_after(before, len(msgs))
            else:
                self.trace_after(before, len(msgs), status, raised, seconds, began)
        pending = self._apply(msgs, pq, mq, ctx, status, seconds)
        if pending is not None:
            await pending

    def _apply(
        self,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
        ctx: ConsumeConcurrentlyContext,
        status: Any,
        seconds: float,
    ) -> Coroutine[Any, Any, None] | None:
        """Apply a listener's result: inline when every message succeeded (the common case),
        else the coroutine that sends the failures back."""
        consumer = self.consumer
        stats = consumer.stats
        stats.consume_calls += 1
        stats.consume_rt_ms_total += int(seconds * 1000)
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS and ctx.ack_index >= len(msgs) - 1:
            stats.consumed += len(msgs)
            if not pq.dropped:
                offset = pq.remove_messages(msgs)
                if offset >= 0:
                    consumer.offset_store.update_offset(mq, offset, True)
            return None
        if status is not ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if pq.dropped:
            return None
        return self._process_result(status, ctx, msgs, pq, mq)

    # -- plain-function listeners ------------------------------------------------------------------

    def _thread_main(self) -> None:
        """A consume thread: run jobs until the ``None`` sentinel; hand results to the loop
        with at most one pending wake-up."""
        loop = self._loop
        assert loop is not None
        tq, done, listener = self._tq, self._done, self.listener
        clock = self.consumer.clock
        tracer = self.consumer.tracer
        while True:
            job = tq.get()
            if job is None:
                return
            msgs, pq, ctx = job[0], job[1], job[3]
            before = None
            if tracer is not None and not pq.dropped:
                before = tracer.hook_before(msgs)
            begin = clock.monotonic()
            status: Any = None
            raised = False
            try:
                if not pq.dropped:  # rebalanced away while queued: the new owner has it
                    status = listener(msgs, ctx)
                if inspect.isawaitable(status):
                    status = asyncio.run_coroutine_threadsafe(_awaited(status), loop).result()
            except (Exception, asyncio.CancelledError):  # nothing cancels this thread: the
                # listener's own CancelledError is a failure (before, it ended the thread)
                logger.warning(
                    "listener of %s raised; will reconsume", self.consumer.group, exc_info=True
                )
                status, raised = None, True
            seconds = clock.monotonic() - begin
            if before is not None:
                self.trace_after(before, len(msgs), status, raised, seconds)
            done.append((job, status, seconds))
            if not self._wake_pending:
                self._wake_pending = True
                try:
                    loop.call_soon_threadsafe(self._on_thread_results)
                except RuntimeError:  # the loop is closed: nobody is left to tell
                    return

    def _on_thread_results(self) -> None:
        self._wake_pending = False  # before draining: a later result schedules another call
        done = self._done
        while done:
            (msgs, pq, mq, ctx), status, seconds = done.popleft()
            self._running -= 1
            if pq.dropped:
                continue
            try:
                pending = self._apply(msgs, pq, mq, ctx, status, seconds)
            except Exception:
                logger.exception("applying a consume result of %s failed", mq)
                pending = None
            if pending is not None:
                self.spawn(pending)
        if not self._running:
            self._idle.set()

    async def _process_result(
        self,
        status: ConsumeConcurrentlyStatus,
        ctx: ConsumeConcurrentlyContext,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        consumer = self.consumer
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack = min(ctx.ack_index, len(msgs) - 1)
        else:
            ack = -1
        failed = msgs[ack + 1 :]
        consumer.stats.record_result(len(msgs) - len(failed), len(failed))
        done = msgs
        if failed and consumer.message_model is MessageModel.BROADCASTING:
            for msg in failed:
                logger.warning("BROADCASTING: consume of %s failed; dropped", msg.msg_id)
        elif failed:
            back_failed = []
            for msg in failed:
                if not await consumer.send_message_back(
                    msg, ctx.delay_level_when_next_consume, mq.broker_name
                ):
                    msg.reconsume_times += 1
                    back_failed.append(msg)
            if back_failed:
                ids = {id(m) for m in back_failed}
                done = [m for m in msgs if id(m) not in ids]
                self.later(RESUBMIT_DELAY_S, lambda: self.submit(back_failed, pq, mq))
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            consumer.offset_store.update_offset(mq, offset, True)

    async def stop(self) -> None:
        """Stop taking work; wait for running listeners; queued chunks are left (their
        offsets are not committed, so they are delivered again)."""
        self.stopped = True
        tracer = self.consumer.tracer
        if tracer is not None:
            for _, _, _, trace in self._work:  # never delivered: their captured entries go
                if trace.__class__ is int:
                    tracer.cancel(trace)
        self._work.clear()
        for waiter, _, _ in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        while True:  # jobs no thread has started are dropped (delivered again later)
            try:
                job = self._tq.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                self._running -= 1
        if not self._running:
            self._idle.set()
        for _ in self._threads:
            self._tq.put(None)
        await self._idle.wait()
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        await super().stop()

    def clean_expired(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """``cleanExpiredMsg``: send back messages stuck in a listener longer than
        ``consume_timeout_ms`` (delay level 3) and drop them from the queue."""
        consumer = self.consumer
        expired = pq.expired_messages(consumer.consume_timeout_ms, consumer.clock.now_ms())
        if not expired:
            return

        async def run() -> None:
            for msg in expired:
                if await consumer.send_message_back(msg, 3, mq.broker_name):
                    logger.warning("message %s consumed too long; sent back", msg.msg_id)
                    offset = pq.remove_messages([msg])
                    if offset >= 0 and not pq.dropped:
                        consumer.offset_store.update_offset(mq, offset, True)

        self.spawn(run())


class OrderlyConsumeService(_ServiceBase):
    """``ConsumeMessageOrderlyService``: see the module docstring."""

    def __init__(self, consumer: ConsumeHost, listener: Callable[..., Any], workers: int) -> None:
        super().__init__(consumer, listener, workers)
        self._slots = asyncio.Semaphore(workers)
        self._queue_locks: dict[MessageQueue, asyncio.Lock] = {}

    def start(self) -> None:
        """Nothing to start (drains are created on demand)."""

    def submit(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool = True
    ) -> None:
        """Start a drain of ``pq`` if ``put_messages`` asked for one."""
        if dispatch:
            self.spawn(self._drain(pq, mq))

    def submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        """``submitConsumeRequestLater``: a drain after ``delay_ms`` (-1: the consumer's
        suspend time), clamped to 10 ms .. 30 s."""
        if delay_ms == -1:
            delay_ms = self.consumer.suspend_current_queue_time_ms
        delay_ms = min(max(delay_ms, 10), 30_000)
        self.later(delay_ms / 1000, lambda: self.spawn(self._drain(pq, mq)))

    def try_lock_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        """``tryLockLaterAndReconsume``: re-lock ``mq`` after ``delay_ms``, then drain."""

        async def relock() -> None:
            ok = await self.consumer.rebalance.lock(mq)
            self.submit_later(pq, mq, 10 if ok else 3000)

        self.later(delay_ms / 1000, lambda: self.spawn(relock()))

    def _lock_ok(self, pq: ProcessQueue) -> bool:
        if self.consumer.message_model is MessageModel.BROADCASTING:
            return True
        return pq.locked and not pq.is_lock_expired()

    async def _drain(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if self.stopped:
            return
        lock = self._queue_locks.setdefault(mq, asyncio.Lock())
        async with self._slots, lock:
            if pq.dropped:
                return
            if not self._lock_ok(pq):
                self.try_lock_later(pq, mq, 100)
                return
            begin = monotonic_ms(self.consumer.clock)
            while not pq.dropped and not self.stopped:
                if not self._lock_ok(pq):
                    self.try_lock_later(pq, mq, 10)
                    return
                if monotonic_ms(self.consumer.clock) - begin > MAX_TIME_CONSUME_CONTINUOUSLY_MS:
                    self.submit_later(pq, mq, 10)
                    return
                msgs = pq.take_messages(self.consumer.consume_message_batch_max_size)
                if not msgs:
                    return
                if not await self._consume_once(msgs, pq, mq):
                    return

    async def _consume_once(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> bool:
        consumer = self.consumer
        reset_retry_topic(msgs, consumer.retry_topic)
        ctx = ConsumeOrderlyContext(mq)
        async with pq.consume_lock:
            if pq.dropped:
                return False
            tracer = consumer.tracer
            before = tracer.hook_before(msgs) if tracer is not None else None
            begin = monotonic_ms(consumer.clock)
            raised = False
            try:
                status = await self.call_listener(msgs, ctx)
            except Exception:
                logger.warning("orderly listener of %s raised", consumer.group, exc_info=True)
                status, raised = None, True
            elapsed = monotonic_ms(consumer.clock) - begin
            if before is not None:
                self.trace_after(before, len(msgs), status, raised, elapsed / 1000)
            consumer.stats.record_consume(len(msgs), elapsed)
        if not isinstance(status, ConsumeOrderlyStatus):
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return await self._process_result(msgs, status, ctx, pq, mq)

    async def _process_result(
        self,
        msgs: list[MessageExt],
        status: ConsumeOrderlyStatus,
        ctx: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        S = ConsumeOrderlyStatus
        commit_offset = -1
        keep_going = True
        if status is S.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            self.consumer.stats.record_result(0, len(msgs))
            if await self._check_reconsume_times(msgs):
                pq.make_message_to_consume_again(msgs)
                self.submit_later(pq, mq, ctx.suspend_current_queue_time_ms)
                keep_going = False
            elif ctx.auto_commit:
                commit_offset = pq.commit()
        else:
            self.consumer.stats.record_result(len(msgs), 0)
            if status is S.ROLLBACK and not ctx.auto_commit:
                pq.rollback()
                self.submit_later(pq, mq, ctx.suspend_current_queue_time_ms)
                keep_going = False
            elif ctx.auto_commit or status is S.COMMIT:
                commit_offset = pq.commit()
        if commit_offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return keep_going

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """Whether to suspend: any message below the reconsume limit; those at the limit go
        to the retry topic with their count, which the broker routes to the DLQ."""
        consumer = self.consumer
        limit = consumer.max_reconsume_times
        limit = 2**31 - 1 if limit == -1 else limit
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= limit:
                msg.properties[props.RECONSUME_TIME] = str(msg.reconsume_times)
                if not await consumer.send_to_retry_topic(msg, msg.reconsume_times, limit):
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend
