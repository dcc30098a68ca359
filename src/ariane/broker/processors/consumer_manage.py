"""Consumer coordination: GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET,
UPDATE_CONSUMER_OFFSET (RocketMQ ``ConsumerManageProcessor``) and LOCK_BATCH_MQ /
UNLOCK_BATCH_MQ (the lock part of ``AdminBrokerProcessor``).

QUERY_CONSUMER_OFFSET for a group without a stored offset answers 0 when the queue still
starts at offset 0 and its first message is in memory, so a new group consumes from the
beginning (RocketMQ 4.x behaviour that clients rely on); otherwise QUERY_NOT_FOUND, and the
client applies its consumeFromWhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ariane.broker.processors import error, ok
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import (
    ConsumerListBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer
from ariane.store.reads import total_physical_memory

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["ConsumerManageProcessor"]


class ConsumerManageProcessor:
    """Handles consumer lists, offsets and queue locks.

    Args:
        broker: the broker whose client registry, offsets and locks are used.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self._memory = total_physical_memory()

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list)
        server.register_processor(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        server.register_processor(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        server.register_processor(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)

    def consumer_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_LIST_BY_GROUP (38)."""
        header = h.GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        ids = self.broker.clients.consumer_ids(header.consumer_group)
        if not ids:
            return error(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        return ok(body=ConsumerListBody(ids).encode())

    def _in_disk(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        store = self.broker.store
        cq = store.get_consume_queue(topic, queue_id)
        entry = cq.get_entry(queue_offset) if cq is not None else None
        if entry is None:
            return False
        ratio = store.config.access_message_in_memory_max_ratio
        return store.max_phy_offset - entry[0] > self._memory * ratio // 100

    def query_consumer_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_CONSUMER_OFFSET (14)."""
        header = h.QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        offset = broker.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return ok(h.QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields())
        if header.set_zero_if_not_found is False:
            return error(
                ResponseCode.QUERY_NOT_FOUND,
                "Not found, do not set to zero, maybe this group boot first",
            )
        min_offset = broker.store.get_min_offset_in_queue(topic, queue_id)
        if min_offset <= 0 and not self._in_disk(topic, queue_id, 0):
            return ok(h.QueryConsumerOffsetResponseHeader(offset=0).to_ext_fields())
        return error(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_consumer_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_CONSUMER_OFFSET (15); clients usually send it one-way."""
        header = h.UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        group, topic = header.consumer_group, header.topic
        if broker.groups.find(group) is None:
            return error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        if topic not in broker.topics.table:
            return error(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if header.queue_id < 0 or header.commit_offset < 0:
            return error(ResponseCode.INVALID_PARAMETER, "queueId and commitOffset must be >= 0")
        broker.offsets.commit(group, topic, header.queue_id, header.commit_offset)
        return ok()

    def lock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """LOCK_BATCH_MQ (41): the queues the caller now holds."""
        body = LockBatchRequestBody.decode(request.body or b"")
        granted = self.broker.locks.try_lock_batch(
            body.consumer_group, body.mq_set, body.client_id, ctx.channel.id
        )
        return ok(body=LockBatchResponseBody(granted).encode())

    def unlock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UNLOCK_BATCH_MQ (42)."""
        body = LockBatchRequestBody.decode(request.body or b"")
        self.broker.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return ok()
