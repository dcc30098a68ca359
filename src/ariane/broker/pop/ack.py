"""Acks and lease changes of popped messages (RocketMQ 5 ``AckMessageProcessor`` and
``ChangeInvisibleTimeProcessor``).

How it works. An ack names the topic the message was read from (its retry topic for a retried
message), the queue, the message's offset and its receipt handle. After checking the topic, the
queue id and that the offset is inside the queue, a non-FIFO ack appends an ``ack`` record
naming the handle's checkpoint to the handle's revive queue, so the revive service will not
bring the message back; it never moves the group's offset (that moved at pop time) and is
answered SUCCESS even when the lease already ended (the message is then delivered again), as
upstream does. A FIFO ack (revive queue 999) marks the offset in the queue's batch and commits
the first un-acked offset; an ack of an older batch is a silent no-op, an offset that is not in
the batch is MESSAGE_ILLEGAL. A batch ack does the same for many offsets of one checkpoint with
one ``bAck`` record.

Changing the invisible time of a non-FIFO message writes a new one-message checkpoint leased
from now, then acks the old checkpoint; the new handle's checkpoint offset is the message's own.
A FIFO change sets when that offset becomes visible again and keeps the pop time (the reply's
invisible time stretches from it).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ariane.broker.pop.buffer import CheckpointBuffer
from ariane.broker.pop.order import ILLEGAL, STALE, OrderInfoManager
from ariane.broker.pop.polling import PopLongPolling
from ariane.broker.pop.records import AckMsg, PopCheckPoint
from ariane.broker.pop.revive import ReviveLog
from ariane.broker.pop.types import AckResult, ChangeInvisibleResult
from ariane.common.pop import (
    POP_ORDER_REVIVE_QUEUE,
    ReceiptHandle,
    real_topic,
    retry_flag_of,
)
from ariane.errors import InvalidArgumentError, RemoteProtocolError
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.pop_bodies import BatchAckMessageRequestBody
from ariane.store import PutResult

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["AckService"]

logger = logging.getLogger(__name__)


class AckService:
    """ACK, BATCH_ACK and CHANGE_MESSAGE_INVISIBLETIME.

    Args:
        host: the broker.
        revive_log: where acks and new checkpoints go.
        orders: FIFO state.
        polling: parked POPs (a FIFO ack that unblocks a queue wakes one).
        buffer: held checkpoints (their acks stay in memory).
    """

    def __init__(
        self,
        host: BrokerContext,
        revive_log: ReviveLog,
        orders: OrderInfoManager,
        polling: PopLongPolling,
        buffer: CheckpointBuffer,
    ) -> None:
        self.host = host
        self.revive_log = revive_log
        self.buffer = buffer
        self.orders = orders
        self.polling = polling
        self.acked_messages = 0

    # -- checks --------------------------------------------------------------------------------

    def _check(self, topic: str, queue_id: int, offset: int, change: bool) -> AckResult | None:
        store = self.host.store
        tc = self.host.topics.get(topic)
        if tc is None:
            return AckResult(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not 0 <= queue_id < tc.read_queue_nums:
            return AckResult(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        lo = store.get_min_offset_in_queue(topic, queue_id)
        hi = store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset > hi or (change and offset == hi):
            return AckResult(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{lo},{hi}",
            )
        return None

    @staticmethod
    def _handle(extra_info: str) -> ReceiptHandle | AckResult:
        try:
            return ReceiptHandle.decode(extra_info)
        except InvalidArgumentError as exc:
            return AckResult(ResponseCode.MESSAGE_ILLEGAL, str(exc))

    # -- ack -----------------------------------------------------------------------------------

    def ack(self, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> AckResult:
        """ACK_MESSAGE: ``topic`` is the topic the message was read from (the retry topic for
        a retried message), ``extra_info`` its receipt handle."""
        refused = self._check(topic, queue_id, offset, False)
        if refused is not None:
            return refused
        handle = self._handle(extra_info)
        if isinstance(handle, AckResult):
            return handle
        if handle.is_order:
            return self._ack_order(group, topic, queue_id, offset, handle.pop_time)
        ack = AckMsg(
            (offset,), handle.ck_start_offset, group, topic, queue_id, handle.pop_time,
            handle.broker_name,
        )  # fmt: skip
        self._write_ack(ack, handle.revive_qid, handle.next_visible_time)
        self.acked_messages += 1
        return AckResult(ResponseCode.SUCCESS)

    def ack_by_handle(self, group: str, topic: str, handle: ReceiptHandle | str) -> AckResult:
        """Ack a message by its receipt handle and its original ``topic`` (what the gRPC
        AckMessage carries); the handle needs its queue offset (8 fields or more)."""
        if isinstance(handle, str):
            parsed = self._handle(handle)
            if isinstance(parsed, AckResult):
                return parsed
            handle = parsed
        if handle.queue_offset < 0:
            return AckResult(ResponseCode.MESSAGE_ILLEGAL, "receipt handle without a queue offset")
        return self.ack(
            group, handle.real_topic(topic, group), handle.queue_id, handle.queue_offset,
            handle.encode(),
        )  # fmt: skip

    def _write_ack(
        self, ack: AckMsg, revive_qid: int, revive_time: int
    ) -> Future[PutResult] | None:
        """Ack a held checkpoint in memory, else append an ack record."""
        if self.buffer.ack(ack.key, ack.offsets):
            return None
        future = self.revive_log.append_ack(ack, revive_qid, revive_time)
        if future.done() and not future.result().stored:
            logger.error(
                "cannot write the ack of %s:%d %s for %s (%s): the messages come back",
                ack.topic, ack.queue_id, list(ack.offsets), ack.group,
                future.result().status.value,
            )  # fmt: skip
        return future

    def _ack_order(
        self, group: str, topic: str, queue_id: int, offset: int, pop_time: int
    ) -> AckResult:
        offsets = self.host.offsets
        if offset < offsets.query(group, topic, queue_id):
            return AckResult(ResponseCode.SUCCESS)
        nxt = self.orders.commit_and_next(topic, group, queue_id, offset, pop_time)
        if nxt == ILLEGAL:
            return AckResult(ResponseCode.MESSAGE_ILLEGAL, f"ack offset {offset} illegal")
        if nxt == STALE:
            return AckResult(ResponseCode.SUCCESS)
        if not offsets.has_reset(group, topic, queue_id):
            offsets.commit(group, topic, queue_id, nxt)
        self.acked_messages += 1
        if not self.orders.is_blocked(topic, group, queue_id, None):
            self.polling.wake_one(topic, group, queue_id)
            self.polling.wake_one(topic, group, -1)
        return AckResult(ResponseCode.SUCCESS)

    def batch_ack(self, body: bytes) -> AckResult:
        """BATCH_ACK_MESSAGE: acks grouped by checkpoint (offsets outside the queue and
        unknown topics are skipped, as upstream does)."""
        try:
            request = BatchAckMessageRequestBody.decode(body)
        except RemoteProtocolError as exc:
            return AckResult(ResponseCode.MESSAGE_ILLEGAL, f"bad batch ack body: {exc}")
        if not request.acks:
            return AckResult(ResponseCode.NO_MESSAGE, "no ack in the batch")
        store = self.host.store
        for entry in request.acks:
            topic = real_topic(entry.topic, entry.consumer_group, entry.retry)
            tc = self.host.topics.get(topic)
            if tc is None or not 0 <= entry.queue_id < tc.read_queue_nums:
                continue
            lo = store.get_min_offset_in_queue(topic, entry.queue_id)
            hi = store.get_max_offset_in_queue(topic, entry.queue_id)
            offsets = [o for o in entry.offsets if lo <= o <= hi]
            if not offsets:
                continue
            if entry.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                for offset in offsets:
                    self._ack_order(
                        entry.consumer_group, topic, entry.queue_id, offset, entry.pop_time
                    )
                continue
            ack = AckMsg(
                tuple(offsets), entry.start_offset, entry.consumer_group, topic,
                entry.queue_id, entry.pop_time, request.broker_name or self.host.config.broker_name,
            )  # fmt: skip
            self._write_ack(ack, entry.revive_queue_id, entry.pop_time + entry.invisible_time)
            self.acked_messages += len(offsets)
        return AckResult(ResponseCode.SUCCESS)

    # -- change invisible time -------------------------------------------------------------------

    def change_invisible_time(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        extra_info: str,
        invisible_time_ms: int,
    ) -> tuple[ChangeInvisibleResult, list[Future[PutResult]]]:
        """CHANGE_MESSAGE_INVISIBLETIME without waiting for durability: the result and the
        writes to wait for (SYNC_FLUSH). ``topic`` is the topic the message was read from."""
        refused = self._check(topic, queue_id, offset, True)
        if refused is not None:
            return ChangeInvisibleResult(refused.code, refused.remark), []
        handle = self._handle(extra_info)
        if isinstance(handle, AckResult):
            return ChangeInvisibleResult(handle.code, handle.remark), []
        if invisible_time_ms < 0:
            return ChangeInvisibleResult(
                ResponseCode.INVALID_PARAMETER, "invisibleTime must not be negative"
            ), []
        if handle.is_order:
            return self._change_order(group, topic, queue_id, offset, handle, invisible_time_ms), []
        # never the old handle's pop time: the new checkpoint must not share the old one's
        # key (acks name a checkpoint by queue, start offset and pop time)
        now = max(self.host.clock.now_ms(), handle.pop_time + 1)
        ck = PopCheckPoint(
            offset, now, invisible_time_ms, queue_id, topic, group, handle.broker_name, (0,)
        )
        ck_future = self.revive_log.append_ck(ck, handle.revive_qid)
        if ck_future.done() and not ck_future.result().stored:
            return ChangeInvisibleResult(
                ResponseCode.SYSTEM_ERROR,
                f"change invisible time failed: {ck_future.result().status.value}",
            ), []
        old = AckMsg(
            (offset,), handle.ck_start_offset, group, topic, queue_id, handle.pop_time,
            handle.broker_name,
        )  # fmt: skip
        ack_future = self._write_ack(old, handle.revive_qid, handle.next_visible_time)
        new = ReceiptHandle(
            offset, now, invisible_time_ms, handle.revive_qid, retry_flag_of(topic),
            handle.broker_name, queue_id, offset, handle.commit_log_offset,
        )  # fmt: skip
        result = ChangeInvisibleResult(
            ResponseCode.SUCCESS, "", now, invisible_time_ms, handle.revive_qid, new
        )
        return result, [ck_future] if ack_future is None else [ck_future, ack_future]

    async def change_invisible(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        extra_info: str,
        invisible_time_ms: int,
    ) -> ChangeInvisibleResult:
        """CHANGE_MESSAGE_INVISIBLETIME, answered once its writes are durable."""
        result, pending = self.change_invisible_time(
            group, topic, queue_id, offset, extra_info, invisible_time_ms
        )
        for future in pending:
            if not future.done():
                await asyncio.wrap_future(future)
        if pending and not pending[0].result().stored:
            return ChangeInvisibleResult(ResponseCode.SYSTEM_ERROR, "change invisible time failed")
        return result

    async def change_by_handle(
        self, group: str, topic: str, handle: ReceiptHandle | str, invisible_time_ms: int
    ) -> ChangeInvisibleResult:
        """Change a message's lease by its receipt handle and original ``topic`` (what the
        gRPC ChangeInvisibleDuration carries); the result's ``handle`` is the new one."""
        if isinstance(handle, str):
            parsed = self._handle(handle)
            if isinstance(parsed, AckResult):
                return ChangeInvisibleResult(parsed.code, parsed.remark)
            handle = parsed
        if handle.queue_offset < 0:
            return ChangeInvisibleResult(
                ResponseCode.MESSAGE_ILLEGAL, "receipt handle without a queue offset"
            )
        return await self.change_invisible(
            group, handle.real_topic(topic, group), handle.queue_id, handle.queue_offset,
            handle.encode(), invisible_time_ms,
        )  # fmt: skip

    def _change_order(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        handle: ReceiptHandle,
        invisible_time_ms: int,
    ) -> ChangeInvisibleResult:
        now = self.host.clock.now_ms()
        if offset < self.host.offsets.query(group, topic, queue_id):
            return ChangeInvisibleResult(ResponseCode.SUCCESS, "", 0, 0, POP_ORDER_REVIVE_QUEUE)
        visible_at = now + invisible_time_ms
        self.orders.change_invisible(topic, group, queue_id, offset, handle.pop_time, visible_at)
        stretched = visible_at - handle.pop_time
        new = ReceiptHandle(
            handle.ck_start_offset, handle.pop_time, stretched, POP_ORDER_REVIVE_QUEUE,
            handle.retry_flag, handle.broker_name, queue_id, offset, handle.commit_log_offset,
        )  # fmt: skip
        info = self.orders.get(topic, group, queue_id)
        unblock = info.unblock_time() if info is not None else None
        if unblock is not None:
            self.polling.wake_later(topic, group, queue_id, unblock)
        return ChangeInvisibleResult(
            ResponseCode.SUCCESS, "", handle.pop_time, stretched, POP_ORDER_REVIVE_QUEUE, new
        )
