"""The lite pull consumer (RocketMQ ``DefaultLitePullConsumer`` /
``DefaultLitePullConsumerImpl``, ``AssignedMessageQueue``).

How it works: the queues come from ``subscribe`` (rebalanced across the group like a push
consumer) or from ``assign`` (fixed; no rebalance, no group coordination). Each queue gets a
background pull task that keeps a buffer filled: LITE_PULL_MESSAGE with long polling, results
re-filtered by tag and put in the queue's ``ProcessQueue`` and in one shared request buffer.
``poll`` takes the next pulled batch, removes it from its process queue and records the
queue's consume offset (the smallest offset still buffered, as for push consumers); with
``auto_commit`` those offsets reach the offset store every ``auto_commit_interval_ms`` (5 s),
and the client instance commits the store to the brokers every 5 s (clustering) or writes the
local file (broadcasting). ``commit`` does both at once.

``seek`` moves a queue: buffered and in-flight results of the old position are discarded (a
per-queue generation number), and the pull task continues at the new offset. Flow control:
pulling of a queue pauses above ``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue_mib`` MiB buffered, and every queue pauses while more than
``pull_threshold_for_all`` messages wait for ``poll``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ariane.acl.credentials import SessionCredentials
from ariane.client._allocate import AllocateStrategy
from ariane.client._consume import reset_retry_topic
from ariane.client._consumer_base import (
    FLAG_LITE_PULL,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    ConsumerBase,
)
from ariane.client._offset_store import ReadOffsetType
from ariane.client._process_queue import ProcessQueue
from ariane.client._rebalance import PullTarget, RebalanceImpl
from ariane.client.config import DEFAULT_INSTANCE_NAME, ClientConfig
from ariane.client.consumer_types import ConsumeFromWhere, MessageModel, MessageSelector
from ariane.client.errors import ClientStateError
from ariane.client.message import MessageExt, MessageQueue, PullStatus
from ariane.common.clock import monotonic_ms
from ariane.errors import ArianeError, InvalidArgumentError
from ariane.remoting.protocol.client_bodies import ConsumeType, SubscriptionData

__all__ = ["PullConsumer"]

logger = logging.getLogger(__name__)

PULL_DELAY_ON_ERROR_S = 1.0
PULL_DELAY_WHEN_PAUSED_S = 1.0
FLOW_CONTROL_DELAY_S = 0.05
_MIB = 1024 * 1024


@dataclass(slots=True)
class _Assigned:
    """One queue of the consumer (Java ``MessageQueueState``)."""

    mq: MessageQueue
    pq: ProcessQueue
    pull_offset: int = -1
    consume_offset: int = -1
    generation: int = 0
    paused: bool = False
    task: asyncio.Task[None] | None = None
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


class PullConsumer(ConsumerBase):
    """Pulls messages on demand (asyncio; RocketMQ ``DefaultLitePullConsumer``).

    Args:
        group: the consumer group.
        namesrv_addr: NameServer addresses.
        instance_name: client instance name.
        client_ip: the address put in the client id.
        message_model: clustering or broadcasting (subscribe mode).
        consume_from_where: where a queue without a stored offset starts.
        consume_timestamp: ``yyyyMMddHHmmss`` for ``CONSUME_FROM_TIMESTAMP``.
        allocate_strategy: clustering queue allocation (default averagely).
        auto_commit: commit polled offsets automatically (``autoCommit``).
        auto_commit_interval_ms: auto-commit period (5000).
        pull_batch_size: messages per pull (10, Java's lite default).
        pull_threshold_for_all: buffered messages across queues before pulling pauses.
        pull_threshold_for_queue: buffered messages per queue before pulling pauses.
        pull_threshold_size_for_queue_mib: buffered MiB per queue before pulling pauses.
        broker_suspend_max_time_ms: long-polling hold time (20000).
        consumer_pull_timeout_ms: pull request timeout (30000).
        offset_store_dir: broadcasting offsets root.
        client_config: full client settings.
        credentials: ACL account that signs every request (``SessionCredentials``).
        enable_trace: record SubBefore/SubAfter traces of every listener call
            (``enableMsgTrace``; see docs/trace.md).
        trace_topic: the trace topic (default ``RMQ_SYS_TRACE_TOPIC``).

    Raises:
        InvalidArgumentError: a bad group name or setting.
    """

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        client_ip: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        pull_batch_size: int = 10,
        pull_threshold_for_all: int = 10_000,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        broker_suspend_max_time_ms: int = 20_000,
        consumer_pull_timeout_ms: int = 30_000,
        offset_store_dir: str | Path | None = None,
        client_config: ClientConfig | None = None,
        credentials: SessionCredentials | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        super().__init__(
            group,
            namesrv_addr=namesrv_addr,
            instance_name=instance_name,
            client_ip=client_ip,
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp=consume_timestamp,
            allocate_strategy=allocate_strategy,
            offset_store_dir=offset_store_dir,
            client_config=client_config,
            credentials=credentials,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
        )
        self._check_positive(
            auto_commit_interval_ms=auto_commit_interval_ms,
            pull_batch_size=pull_batch_size,
            pull_threshold_for_all=pull_threshold_for_all,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue_mib,
        )
        if consumer_pull_timeout_ms <= broker_suspend_max_time_ms:
            raise InvalidArgumentError(
                "consumer_pull_timeout_ms must exceed broker_suspend_max_time_ms"
            )
        self.auto_commit = auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_all = pull_threshold_for_all
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue_mib = pull_threshold_size_for_queue_mib
        self.broker_suspend_max_time_ms = broker_suspend_max_time_ms
        self.consumer_pull_timeout_ms = consumer_pull_timeout_ms
        self._assigned: dict[MessageQueue, _Assigned] = {}
        self._assign_mode: bool | None = None
        self._buffer: deque[tuple[list[MessageExt], _Assigned, int]] = deque()
        self._buffered = 0
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._last_commit_ms = 0

    # -- choosing queues -------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Subscribe ``topic`` (queues are assigned by rebalancing across the group).

        Raises:
            ClientStateError: ``assign`` was used.
        """
        if self._assign_mode:
            raise ClientStateError("subscribe() and assign() cannot be mixed")
        self._assign_mode = False
        self._subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``."""
        self._unsubscribe(topic)
        for mq in [mq for mq in self._assigned if mq.topic == topic]:
            self._drop(mq)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance; replaces an earlier assignment).

        Raises:
            ClientStateError: ``subscribe`` was used.
        """
        if self._assign_mode is False:
            raise ClientStateError("subscribe() and assign() cannot be mixed")
        self._assign_mode = True
        wanted = set(queues)
        for mq in list(self._assigned):
            if mq not in wanted:
                self._drop(mq)
        for mq in wanted:
            if mq.topic not in self._subscriptions:
                self._subscriptions[mq.topic] = SubscriptionData.build(mq.topic, "*")
            if mq not in self._assigned:
                self._assigned[mq] = _Assigned(mq, ProcessQueue(self.clock))
                if self.started:
                    self._start_task(self._assigned[mq])

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer currently reads."""
        return set(self._assigned)

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """Every readable queue of ``topic`` (``fetchMessageQueues``).

        Raises:
            ClientStateError: not started.
        """
        return await self.fetch_subscribe_message_queues(topic)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the client instance and start pulling.

        Raises:
            ClientStateError: nothing subscribed or assigned, closed, or a duplicate group.
        """
        if self._instance is not None:
            return
        if self._assign_mode is None:
            raise ClientStateError("subscribe() or assign() before start()")
        await self._join()
        self._last_commit_ms = monotonic_ms(self.clock)
        if self._assign_mode:
            for state in self._assigned.values():
                self._start_task(state)
        logger.info("pull consumer %s started", self.group)

    def _configure_rebalance(self, rebalance: RebalanceImpl) -> None:
        rebalance.pull_expiry = False
        if not self._assign_mode:
            rebalance.dispatch = self._on_new_queues
            rebalance.on_queue_changed = self._on_queue_changed

    async def close(self) -> None:
        """Stop pulling, commit (when auto-committing), unregister. Idempotent."""
        if self._closed:
            return
        await self._stop_rebalancing()
        tasks = [s.task for s in self._assigned.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._instance is not None and self.auto_commit:
            with contextlib.suppress(ArianeError):
                await self.commit()
        await self._leave()

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- queue tasks -----------------------------------------------------------------------------

    async def _on_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mine: set[MessageQueue]
    ) -> None:
        table = self.rebalance.process_queue_table
        for mq in [mq for mq in self._assigned if mq not in table]:
            self._drop(mq)

    def _on_new_queues(self, targets: list[PullTarget]) -> None:
        for target in targets:
            state = _Assigned(target.mq, target.pq, pull_offset=target.next_offset)
            old = self._assigned.get(target.mq)
            if old is not None:
                self._drop(target.mq)
            self._assigned[target.mq] = state
            self._start_task(state)

    def _start_task(self, state: _Assigned) -> None:
        state.task = asyncio.create_task(self._pull_loop(state), name=f"lite-pull-{state.mq}")

    def _drop(self, mq: MessageQueue) -> None:
        state = self._assigned.pop(mq, None)
        if state is None:
            return
        state.pq.dropped = True
        if state.task is not None:
            state.task.cancel()

    async def _pull_loop(self, state: _Assigned) -> None:
        while not state.pq.dropped:
            try:
                delay = await self._pull_once(state)
            except asyncio.CancelledError:
                raise
            except ArianeError as exc:
                logger.warning("pull of %s failed: %s", state.mq, exc)
                delay = PULL_DELAY_ON_ERROR_S
            if delay:
                state.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.wakeup.wait(), delay)

    async def _pull_once(self, state: _Assigned) -> float:
        pq, mq = state.pq, state.mq
        pq.last_pull_ms = monotonic_ms(self.clock)
        if state.paused:
            return PULL_DELAY_WHEN_PAUSED_S
        if self._buffered > self.pull_threshold_for_all:
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), 1.0)
            return 0.0
        if (
            pq.msg_count > self.pull_threshold_for_queue
            or pq.msg_size > self.pull_threshold_size_for_queue_mib * _MIB
        ):
            return FLOW_CONTROL_DELAY_S
        generation = state.generation
        if state.pull_offset < 0:
            offset = await self.rebalance.compute_pull_from_where(mq)
            if offset < 0:
                return PULL_DELAY_ON_ERROR_S
            if generation != state.generation:
                return 0.0
            state.pull_offset = offset
        sd = self._subscriptions.get(mq.topic)
        if sd is None:
            return PULL_DELAY_ON_ERROR_S
        result = await self.pull_kernel(
            mq,
            sd,
            state.pull_offset,
            max_nums=self.pull_batch_size,
            sys_flag=FLAG_SUSPEND | FLAG_SUBSCRIPTION | FLAG_LITE_PULL,
            commit_offset=0,
            suspend_ms=self.broker_suspend_max_time_ms,
            timeout_ms=self.consumer_pull_timeout_ms,
        )
        if pq.dropped or generation != state.generation:
            return 0.0
        state.pull_offset = result.next_begin_offset
        if result.status is PullStatus.FOUND:
            msgs = self.filter_and_stamp(result.messages, sd, result.min_offset, result.max_offset)
            if msgs:
                pq.put_messages(msgs)
                self._buffer.append((msgs, state, generation))
                self._buffered += len(msgs)
                self._ready.set()
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            logger.warning("offset of %s illegal; moved to %d", mq, result.next_begin_offset)
        elif pq.msg_count == 0 and state.consume_offset < result.next_begin_offset:
            state.consume_offset = result.next_begin_offset
        return 0.0

    # -- polling ---------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 5000) -> list[MessageExt]:
        """The next pulled batch (at most ``pull_batch_size`` messages of one queue), or an
        empty list after ``timeout_ms``.

        Raises:
            ClientStateError: not started.
        """
        _ = self.instance  # raises when not started
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            while self._buffer:
                taken = self._take()
                if taken is None:
                    break
                msgs, state, generation = taken
                if state.pq.dropped or generation != state.generation:
                    continue
                offset = state.pq.remove_messages(msgs)
                if offset >= 0:
                    state.consume_offset = offset
                reset_retry_topic(msgs, self.retry_topic)
                tracer = self.tracer
                if tracer is not None:  # polled = consumed (Java's lite pull trace)
                    before = tracer.hook_before(msgs)  # the compiled hooks when built
                    if before is not None:
                        tracer.hook_after(before, len(msgs))
                await self._maybe_auto_commit()
                return msgs
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                await self._maybe_auto_commit()
                return []
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), remaining)

    def _take(self) -> tuple[list[MessageExt], _Assigned, int] | None:
        """The oldest buffered batch of a queue that is not paused."""
        buffer = self._buffer
        for i, item in enumerate(buffer):
            if item[1].paused and not item[1].pq.dropped:
                continue
            del buffer[i]
            self._buffered -= len(item[0])
            if self._buffered <= self.pull_threshold_for_all:
                self._room.set()
            return item
        return None

    async def _maybe_auto_commit(self) -> None:
        if (
            self.auto_commit
            and monotonic_ms(self.clock) - self._last_commit_ms >= self.auto_commit_interval_ms
        ):
            self._commit_to_store()
            self._last_commit_ms = monotonic_ms(self.clock)

    def _commit_to_store(self) -> dict[MessageQueue, int]:
        store = self.offset_store
        done = {}
        for mq, state in self._assigned.items():
            if state.consume_offset >= 0 and not state.pq.dropped:
                store.update_offset(mq, state.consume_offset, False)
                done[mq] = state.consume_offset
        return done

    async def commit(
        self, offsets: Mapping[MessageQueue, int] | None = None, *, persist: bool = True
    ) -> None:
        """Commit the offsets of everything polled so far (or the given ``offsets``: the next
        offset to consume per queue) and, with ``persist``, send them to the brokers (or the
        local file) now.

        Raises:
            ClientStateError: not started.
        """
        store = self.offset_store
        if offsets is None:
            done = self._commit_to_store()
            self._last_commit_ms = monotonic_ms(self.clock)
        else:
            done = dict(offsets)
            for mq, offset in done.items():
                store.update_offset(mq, offset, False)
        if persist and done:
            await store.flush(list(done))

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for ``mq`` (broker or file); -1 if none."""
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    # -- positions -------------------------------------------------------------------------------

    def _state(self, mq: MessageQueue) -> _Assigned:
        state = self._assigned.get(mq)
        if state is None:
            raise InvalidArgumentError(f"{mq} is not assigned to this consumer")
        return state

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` at ``offset`` (between its min and max offset); buffered messages
        of the old position are discarded.

        Raises:
            InvalidArgumentError: the queue is not assigned, or the offset is out of range.
        """
        state = self._state(mq)
        low, high = await self._min_max(mq)
        if not low <= offset <= high:
            raise InvalidArgumentError(f"offset {offset} of {mq} is not in [{low}, {high}]")
        self._reposition(state, offset)

    def _reposition(self, state: _Assigned, offset: int) -> None:
        """Continue ``state`` at ``offset``: older results are discarded and a pull in flight
        (maybe long-polling at the old position) is abandoned."""
        state.generation += 1
        state.pq.clear()
        state.pull_offset = state.consume_offset = offset
        if state.task is not None and self.started:
            state.task.cancel()
            self._start_task(state)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """``seek`` to the queue's smallest stored offset."""
        await self.seek(mq, (await self._min_max(mq))[0])

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """``seek`` to the queue's next offset (only new messages)."""
        await self.seek(mq, (await self._min_max(mq))[1])

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms``."""
        addr = await self.rebalance._broker_addr(mq)
        return await self.instance.api.search_offset(addr, mq.topic, mq.queue_id, timestamp_ms)

    async def _min_max(self, mq: MessageQueue) -> tuple[int, int]:
        addr = await self.rebalance._broker_addr(mq)
        api = self.instance.api
        low, high = await asyncio.gather(
            api.get_min_offset(addr, mq.topic, mq.queue_id),
            api.get_max_offset(addr, mq.topic, mq.queue_id),
        )
        return low, high

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues (already buffered messages are still polled)."""
        for mq in queues:
            self._state(mq).paused = True

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull these queues again."""
        for mq in queues:
            state = self._state(mq)
            state.paused = False
            state.wakeup.set()

    # -- ConsumerMember --------------------------------------------------------------------------

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: move the queues of ``topic`` to these offsets."""
        for mq, offset in offsets.items():
            state = self._assigned.get(mq)
            if state is None or mq.topic != topic:
                continue
            self._reposition(state, offset)
            if self._offset_store is not None:
                self._offset_store.update_offset(mq, offset, False)

    async def do_rebalance(self) -> None:
        """Rebalance subscribed topics; assigned queues are fixed."""
        if not self._assign_mode:
            await super().do_rebalance()

    async def persist_consumer_offset(self) -> None:
        """Commit the store's offsets of the assigned queues."""
        if self._offset_store is not None:
            await self._offset_store.persist_all(set(self._assigned))
