"""The push consumer (RocketMQ ``DefaultMQPushConsumer`` / ``DefaultMQPushConsumerImpl``,
``PullMessageService`` and ``PullAPIWrapper``).

How it works: "push" is a pull loop per owned queue. Rebalance (``_rebalance``) hands over new
queues with their start offsets; each gets one task that loops:

1. flow control: while the process queue holds more than ``pull_threshold_for_queue``
   messages or ``pull_threshold_size_for_queue_mib`` MiB, or (concurrent mode) spans more than
   ``consume_concurrently_max_span`` offsets, wait until consumption frees room (Java polls
   every 50 ms; here the consume side wakes the loop). Orderly mode pulls only while the
   broker lock is held, and re-reads the stored offset after each new lock.
2. PULL_MESSAGE with long polling (the broker holds it up to ``broker_suspend_max_time_ms``,
   15 s; the request times out after ``consumer_pull_timeout_ms``, 30 s), carrying the
   in-memory committed offset (clustering) so the broker learns progress on every pull.
3. the answer: found messages are re-filtered by tag (the broker compares tag hashes only),
   stamped with the queue's MIN/MAX_OFFSET, buffered in the process queue and handed to the
   consume service (``_consume``) in one call; "nothing new" moves the committed offset past
   filtered ranges when nothing is buffered; "offset illegal" drops the queue and, 10 s later,
   stores the broker's offset and lets the next rebalance re-create it; errors retry after 3 s.

Messages are decoded once (``ClientAPI.pull_message``), and no task is created per message.
Failed messages go back to the broker (``send_message_back``: CONSUMER_SEND_MSG_BACK, else a
copy sent to ``%RETRY%<group>`` through the instance's inner producer). ``close`` stops the
pull loops, waits for running listeners, commits offsets, releases orderly locks and
unregisters from the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ariane.acl.credentials import SessionCredentials
from ariane.client._allocate import AllocateStrategy
from ariane.client._consume import ConcurrentConsumeService, OrderlyConsumeService
from ariane.client._consumer_base import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    ConsumerBase,
)
from ariane.client._producer import new_producer
from ariane.client._rebalance import PullTarget, RebalanceImpl
from ariane.client._stats import ConsumeStats
from ariane.client.config import DEFAULT_INSTANCE_NAME, ClientConfig
from ariane.client.consumer_types import (
    ConcurrentListener,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
    MessageSelector,
    OrderlyListener,
)
from ariane.client.errors import ClientStateError
from ariane.client.message import Message, MessageExt, MessageQueue, PullResult, PullStatus
from ariane.common import properties as props
from ariane.common.clock import monotonic_ms
from ariane.errors import ArianeError, ConnectionError_, InvalidArgumentError
from ariane.remoting.protocol.client_bodies import SubscriptionData

__all__ = ["PushConsumer"]

logger = logging.getLogger(__name__)

#: Java ``pullTimeDelayMillsWhenException``.
PULL_DELAY_ON_ERROR_S = 3.0
PULL_DELAY_WHEN_SUSPENDED_S = 1.0
OFFSET_ILLEGAL_DELAY_S = 10.0
SEND_BACK_TIMEOUT_MS = 5000
_MIB = 1024 * 1024


class PushConsumer(ConsumerBase):
    """Receives messages through a listener (asyncio; RocketMQ ``DefaultMQPushConsumer``).

    ``subscribe`` topics, ``register_message_listener`` (concurrent or orderly), then
    ``await start()``; ``await close()`` (or ``async with``) shuts down gracefully.

    Args:
        group: the consumer group (``consumerGroup``).
        namesrv_addr: NameServer addresses, ``"host:port;host:port"``.
        instance_name: client instance name (``"DEFAULT"`` becomes the process id).
        client_ip: the address put in the client id.
        message_model: ``CLUSTERING`` (each message to one consumer of the group) or
            ``BROADCASTING`` (to every consumer).
        consume_from_where: where a queue without a stored offset starts.
        consume_timestamp: ``yyyyMMddHHmmss`` for ``CONSUME_FROM_TIMESTAMP`` (default: half
            an hour ago).
        allocate_strategy: clustering queue allocation (default averagely).
        consume_thread_nums: concurrent listener calls (``consumeThreadMin``, 20).
        consume_message_batch_max_size: messages per listener call (1).
        pull_batch_size: messages per pull (``pullBatchSize``, 32).
        pull_interval_ms: pause between pulls of one queue (0).
        pull_threshold_for_queue: buffered messages per queue before pulling pauses (1000).
        pull_threshold_size_for_queue_mib: buffered MiB per queue before pulling pauses (100).
        pull_threshold_for_topic: per-topic message limit spread over its queues (-1: off).
        pull_threshold_size_for_topic_mib: per-topic MiB limit (-1: off).
        consume_concurrently_max_span: concurrent mode: pause pulling a queue whose buffered
            offsets span more than this (2000).
        max_reconsume_times: retries before the dead-letter queue (-1: 16 concurrent,
            unlimited orderly).
        suspend_current_queue_time_ms: orderly pause after a suspend (1000).
        consume_timeout_min: a message in a listener longer than this is sent back (15).
        broker_suspend_max_time_ms: long-polling hold time (15000).
        consumer_pull_timeout_ms: pull request timeout (30000).
        post_subscription_when_pull: send the expression with every pull.
        lock_interval_ms: orderly lock renewal period (20000).
        offset_store_dir: broadcasting offsets root (default ``~/.rocketmq_offsets``).
        client_config: full client settings (overrides the NameServer/instance arguments).
        credentials: ACL account that signs every request (``SessionCredentials``).
        enable_trace: record SubBefore/SubAfter traces of every listener call
            (``enableMsgTrace``; see docs/trace.md).
        trace_topic: the trace topic (default ``RMQ_SYS_TRACE_TOPIC``).

    Raises:
        InvalidArgumentError: a bad group name or a setting out of RocketMQ's ranges.
    """

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
        consume_thread_nums: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval_ms: int = 0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic_mib: int = -1,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        suspend_current_queue_time_ms: int = 1000,
        consume_timeout_min: int = 15,
        broker_suspend_max_time_ms: int = 15_000,
        consumer_pull_timeout_ms: int = 30_000,
        post_subscription_when_pull: bool = False,
        lock_interval_ms: int = 20_000,
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
        for name, value, low, high in (
            ("consume_thread_nums", consume_thread_nums, 1, 1000),
            ("consume_message_batch_max_size", consume_message_batch_max_size, 1, 1024),
            ("pull_batch_size", pull_batch_size, 1, 1024),
            ("pull_interval_ms", pull_interval_ms, 0, 65535),
            ("pull_threshold_for_queue", pull_threshold_for_queue, 1, 65535),
            ("pull_threshold_size_for_queue_mib", pull_threshold_size_for_queue_mib, 1, 1024),
            ("consume_concurrently_max_span", consume_concurrently_max_span, 1, 65535),
            ("max_reconsume_times", max_reconsume_times, -1, 2**31 - 1),
            ("suspend_current_queue_time_ms", suspend_current_queue_time_ms, 10, 30_000),
            ("consume_timeout_min", consume_timeout_min, 1, 2**31 - 1),
            ("lock_interval_ms", lock_interval_ms, 1, 2**31 - 1),
        ):
            if not low <= value <= high:
                raise InvalidArgumentError(f"{name} must be in [{low}, {high}], got {value}")
        if pull_threshold_for_topic != -1 and not 1 <= pull_threshold_for_topic <= 6_553_500:
            raise InvalidArgumentError("pull_threshold_for_topic must be -1 or 1..6553500")
        if pull_threshold_size_for_topic_mib != -1 and pull_threshold_size_for_topic_mib < 1:
            raise InvalidArgumentError("pull_threshold_size_for_topic_mib must be -1 or >= 1")
        if consumer_pull_timeout_ms <= broker_suspend_max_time_ms:
            raise InvalidArgumentError(
                "consumer_pull_timeout_ms must exceed broker_suspend_max_time_ms"
            )
        self.consume_thread_nums = consume_thread_nums
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_interval_ms = pull_interval_ms
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue_mib = pull_threshold_size_for_queue_mib
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic_mib = pull_threshold_size_for_topic_mib
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time_ms = suspend_current_queue_time_ms
        self.consume_timeout_ms = consume_timeout_min * 60_000
        self.broker_suspend_max_time_ms = broker_suspend_max_time_ms
        self.consumer_pull_timeout_ms = consumer_pull_timeout_ms
        self.post_subscription_when_pull = post_subscription_when_pull
        self.lock_interval_ms = lock_interval_ms
        self.stats = ConsumeStats()
        self._listener: Callable[..., Any] | None = None
        self._service: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._services: list[asyncio.Task[None]] = []
        self._running = False
        self._paused = False
        self._start_ms = 0

    # -- configuration ---------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Subscribe ``topic`` with a tag expression (``"TagA || TagB"``, ``"*"``) or a
        ``MessageSelector`` (``MessageSelector.by_sql("a > 5")``); replaces an earlier one.

        Raises:
            InvalidArgumentError: a bad topic name or selector.
        """
        self._subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are dropped at the next rebalance)."""
        self._unsubscribe(topic)

    def register_message_listener(
        self, listener: ConcurrentListener | OrderlyListener, *, orderly: bool = False
    ) -> None:
        """Set the listener: ``listener(msgs, context)`` returns a
        ``ConsumeConcurrentlyStatus`` (or, with ``orderly=True``, a ``ConsumeOrderlyStatus``).
        A coroutine function is awaited on the consumer's loop; a plain function runs in a
        worker thread.

        Raises:
            ClientStateError: the consumer is already started.
        """
        if self._instance is not None:
            raise ClientStateError("register the listener before start()")
        self._listener = listener
        self.orderly = orderly

    def register_message_listener_orderly(self, listener: OrderlyListener) -> None:
        """``register_message_listener(listener, orderly=True)``."""
        self.register_message_listener(listener, orderly=True)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the client instance and start pulling (the first rebalance runs at once).

        Raises:
            ClientStateError: no listener, closed, or the group already exists in this
                process (use another instance name).
        """
        if self._instance is not None:
            return
        if self._listener is None:
            raise ClientStateError("register a message listener before start()")
        if not self._subscriptions:
            raise ClientStateError("subscribe to at least one topic before start()")
        service_cls = OrderlyConsumeService if self.orderly else ConcurrentConsumeService
        self._service = service_cls(self, self._listener, self.consume_thread_nums)
        self._service.start()
        self._running = True
        self._start_ms = self.clock.now_ms()
        try:
            instance = await self._join()
        except BaseException:
            self._running = False
            await self._service.stop()
            raise
        if self.rebalance.needs_lock:
            self._services.append(asyncio.create_task(self._lock_service()))
        if not self.orderly:
            self._services.append(asyncio.create_task(self._clean_expired_service()))
        logger.info("push consumer %s started in %s", self.group, instance.client_id)

    def _configure_rebalance(self, rebalance: RebalanceImpl) -> None:
        rebalance.dispatch = self._dispatch
        rebalance.on_queue_changed = self._on_queue_changed

    async def close(self) -> None:
        """Shut down gracefully: stop pulling, let running listeners finish, commit offsets,
        release orderly locks, unregister. Idempotent."""
        if self._closed:
            return
        self._running = False
        await self._stop_rebalancing()
        for task in [*self._pull_tasks.values(), *self._services]:
            task.cancel()
        for task in [*self._pull_tasks.values(), *self._services]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._pull_tasks.clear()
        if self._service is not None:
            await self._service.stop()
        if self._rebalance is not None and self._offset_store is not None:
            owned = list(self._rebalance.process_queue_table)
            await self._offset_store.flush(owned)
            if self._rebalance.needs_lock:
                await self._rebalance.unlock_all(oneway=False)
            for pq in self._rebalance.process_queue_table.values():
                pq.dropped = True
        await self._leave()
        logger.info("push consumer %s closed", self.group)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def suspend(self) -> None:
        """Pause pulling (buffered messages are still consumed)."""
        self._paused = True

    def resume(self) -> None:
        """Resume pulling after ``suspend``."""
        self._paused = False

    # -- services --------------------------------------------------------------------------------

    async def _lock_service(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.rebalance.lock_all()
            except Exception:
                logger.warning("lock renewal of %s failed", self.group, exc_info=True)
            await asyncio.sleep(self.lock_interval_ms / 1000)

    async def _clean_expired_service(self) -> None:
        period = self.consume_timeout_ms / 1000
        while True:
            await asyncio.sleep(period)
            service = self._service
            if isinstance(service, ConcurrentConsumeService):
                for mq, pq in list(self.rebalance.process_queue_table.items()):
                    service.clean_expired(pq, mq)

    def _dispatch(self, targets: list[PullTarget]) -> None:
        if not self._running:
            return
        for target in targets:
            old = self._pull_tasks.get(target.mq)
            if old is not None and not old.done():
                old.cancel()
            self._pull_tasks[target.mq] = asyncio.create_task(
                self._pull_loop(target), name=f"pull-{target.mq.topic}-{target.mq.queue_id}"
            )

    async def _on_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mine: set[MessageQueue]
    ) -> None:
        for mq, task in list(self._pull_tasks.items()):
            if mq not in self.rebalance.process_queue_table and task.done():
                del self._pull_tasks[mq]
        sd = self._subscriptions.get(topic)
        if sd is not None:
            sd.sub_version = self.clock.now_ms()
        owned = len(self.rebalance.process_queue_table) or 1
        if self.pull_threshold_for_topic != -1:
            self.pull_threshold_for_queue = max(1, self.pull_threshold_for_topic // owned)
        if self.pull_threshold_size_for_topic_mib != -1:
            self.pull_threshold_size_for_queue_mib = max(
                1, self.pull_threshold_size_for_topic_mib // owned
            )
        await self.instance.send_heartbeat_to_all_brokers()

    # -- pulling ---------------------------------------------------------------------------------

    async def _pull_loop(self, target: PullTarget) -> None:
        pq, mq = target.pq, target.mq
        try:
            while self._running and not pq.dropped:
                delay = await self._pull_once(target)
                if delay:
                    await asyncio.sleep(delay)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("pull loop of %s ended", mq)

    async def _flow_controlled(self, target: PullTarget) -> bool:
        pq = target.pq
        full = (
            pq.msg_count > self.pull_threshold_for_queue
            or pq.msg_size > self.pull_threshold_size_for_queue_mib * _MIB
            or (not self.orderly and pq.max_span > self.consume_concurrently_max_span)
        )
        if full:
            self.stats.flow_control_times += 1
            pq.mark_full()
            await pq.wait_for_room(0.05 if pq.max_span else 1.0)
        return full

    async def _pull_once(self, target: PullTarget) -> float:
        """One pull of ``target``; returns the delay before the next one (seconds)."""
        pq, mq = target.pq, target.mq
        pq.last_pull_ms = monotonic_ms(self.clock)
        if self._paused:
            return PULL_DELAY_WHEN_SUSPENDED_S
        if await self._flow_controlled(target):
            return 0.0
        if self.orderly:
            if not pq.locked:
                return PULL_DELAY_ON_ERROR_S
            if not target.locked_first:
                offset = await self.rebalance.compute_pull_from_where(mq)
                if offset < 0:
                    return PULL_DELAY_ON_ERROR_S
                target.next_offset, target.locked_first = offset, True
        sd = self._subscriptions.get(mq.topic)
        if sd is None:
            return PULL_DELAY_ON_ERROR_S
        try:
            result = await self._pull(mq, sd, target.next_offset)
        except asyncio.CancelledError:
            raise
        except (ArianeError, OSError) as exc:
            if not mq.topic.startswith("%RETRY%"):
                logger.warning("pull of %s failed: %s", mq, exc)
            if isinstance(exc, ConnectionError_ | OSError):  # the broker may have moved
                self.instance.spawn(self.instance.refresh_route_after_failure(mq.topic))
            return PULL_DELAY_ON_ERROR_S
        if pq.dropped:
            return 0.0
        status = result.status
        if status is PullStatus.FOUND:
            target.next_offset = result.next_begin_offset
            msgs = self.filter_and_stamp(result.messages, sd, result.min_offset, result.max_offset)
            if msgs:
                self.stats.pulled += len(msgs)
                dispatch = pq.put_messages(msgs)
                assert self._service is not None
                self._service.submit(msgs, pq, mq, dispatch)
            return self.pull_interval_ms / 1000
        if status is PullStatus.OFFSET_ILLEGAL:
            logger.warning(
                "offset %d of %s is illegal; moving to %d",
                target.next_offset,
                mq,
                result.next_begin_offset,
            )
            target.next_offset = result.next_begin_offset
            pq.dropped = True
            self.instance.spawn(self._fix_offset_later(mq, result.next_begin_offset))
            return 0.0
        target.next_offset = result.next_begin_offset
        if pq.msg_count == 0:
            self.offset_store.update_offset(mq, result.next_begin_offset, True)
        return 0.0

    async def _fix_offset_later(self, mq: MessageQueue, offset: int) -> None:
        await asyncio.sleep(OFFSET_ILLEGAL_DELAY_S)
        store = self.offset_store
        store.update_offset(mq, offset, False)
        await store.persist(mq)
        self.rebalance.remove_process_queue(mq)
        self.instance.rebalance_immediately()

    async def _pull(self, mq: MessageQueue, sd: SubscriptionData, offset: int) -> PullResult:
        sys_flag = FLAG_SUSPEND
        commit_offset = 0
        if self.message_model is MessageModel.CLUSTERING:
            commit_offset = self.offset_store.offset_table.get(mq, 0)
            if commit_offset > 0:
                sys_flag |= FLAG_COMMIT_OFFSET
        if self.post_subscription_when_pull and not sd.class_filter_mode:
            sys_flag |= FLAG_SUBSCRIPTION
        return await self.pull_kernel(
            mq,
            sd,
            offset,
            max_nums=self.pull_batch_size,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_ms=self.broker_suspend_max_time_ms,
            timeout_ms=self.consumer_pull_timeout_ms,
        )

    # -- retries ---------------------------------------------------------------------------------

    @property
    def max_reconsume_times_concurrently(self) -> int:
        """``getMaxReconsumeTimes``: 16 when unset."""
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times

    async def send_message_back(
        self, msg: MessageExt, delay_level: int = 0, broker_name: str | None = None
    ) -> bool:
        """Hand a failed message back for a later retry (CONSUMER_SEND_MSG_BACK; delay level
        0 lets the broker pick ``3 + reconsumeTimes``, -1 sends it to the DLQ). Falls back to
        sending a copy to ``%RETRY%<group>``. Returns whether either worked."""
        instance = self.instance
        addr = instance.find_broker_addr_in_publish(broker_name) if broker_name else None
        if addr is None:
            addr = str(msg.store_host)
        try:
            await instance.api.consumer_send_message_back(
                addr,
                msg,
                self.group,
                delay_level,
                max_reconsume_times=self.max_reconsume_times_concurrently,
                timeout_ms=SEND_BACK_TIMEOUT_MS,
            )
            return True
        except ArianeError as exc:
            logger.warning(
                "send back of %s failed (%s); re-sending to the retry topic", msg.msg_id, exc
            )
        return await self.send_to_retry_topic(
            msg, msg.reconsume_times + 1, self.max_reconsume_times_concurrently
        )

    async def send_to_retry_topic(
        self, msg: MessageExt, reconsume_times: int, max_times: int
    ) -> bool:
        """Send a copy of ``msg`` to ``%RETRY%<group>`` through the inner producer, with
        ``RECONSUME_TIME = reconsume_times`` (the broker sends it to the DLQ once it reaches
        ``max_times``). Returns whether it was stored."""
        retry = Message(self.retry_topic, msg.body, flag=msg.flag, properties=msg.properties)
        p = retry.properties
        p.pop(props.TRANSACTION_PREPARED, None)
        p.setdefault(props.ORIGIN_MESSAGE_ID, msg.msg_id)
        p[props.RETRY_TOPIC] = msg.topic
        p[props.RECONSUME_TIME] = str(reconsume_times)
        p[props.MAX_RECONSUME_TIMES] = str(max_times)
        p[props.DELAY] = str(3 + msg.reconsume_times)
        try:
            producer = await self.instance.inner_producer(new_producer)
            await producer.send(retry)
            return True
        except ArianeError as exc:
            logger.warning("re-sending %s to %s failed: %s", msg.msg_id, self.retry_topic, exc)
            return False

    # -- ConsumerMember --------------------------------------------------------------------------

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the queues, store the new offsets, rebalance."""
        if not self.started:
            return
        self.instance.spawn(self._reset_offset(topic, offsets))

    async def _reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        rebalance, store = self.rebalance, self.offset_store
        async with rebalance.lock_round():
            for mq, offset in offsets.items():
                if mq.topic != topic:
                    continue
                pq = rebalance.process_queue_table.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    pq.clear()
                task = self._pull_tasks.pop(mq, None)
                if task is not None:
                    task.cancel()
                store.update_offset(mq, offset, False)
                await store.persist(mq)
                store.remove_offset(mq)
        logger.info("offsets of %s/%s reset: %s", self.group, topic, offsets)
        self.instance.rebalance_immediately()

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO."""
        return self._running_info_base(
            {
                "consumeThreadMin": str(self.consume_thread_nums),
                "pullBatchSize": str(self.pull_batch_size),
                "consumeMessageBatchMaxSize": str(self.consume_message_batch_max_size),
                "maxReconsumeTimes": str(self.max_reconsume_times),
                "consumed": str(self.stats.consumed),
                "consumeFailed": str(self.stats.failed),
            }
        )

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: run the listener on one message."""
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        service = self._service
        begin = monotonic_ms(self.clock)
        ctx: ConsumeConcurrentlyContext | ConsumeOrderlyContext
        ctx = ConsumeOrderlyContext(mq) if self.orderly else ConsumeConcurrentlyContext(mq)
        try:
            if service is None:
                raise ClientStateError("not started")
            status = await service.call_listener([msg], ctx)
        except Exception as exc:
            spent = monotonic_ms(self.clock) - begin
            return _direct_result(self.orderly, "CR_THROW_EXCEPTION", str(exc), spent)
        ok = status in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)
        result = "CR_SUCCESS" if ok else "CR_LATER" if status is not None else "CR_RETURN_NULL"
        return _direct_result(self.orderly, result, "", monotonic_ms(self.clock) - begin)


def _direct_result(orderly: bool, result: str, remark: str, spent_ms: int) -> dict[str, Any]:
    return {
        "order": orderly,
        "autoCommit": True,
        "consumeResult": result,
        "remark": remark,
        "spentTimeMills": spent_ms,
    }
