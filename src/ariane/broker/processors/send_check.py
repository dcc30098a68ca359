"""The checks of a send before anything is stored (RocketMQ
``AbstractSendMessageProcessor.msgCheck``): the broker may be written, the topic is not
closed to clients, it exists or is auto-created from the client's template (or, for a
``%RETRY%`` topic, as a retry topic), the queue id is legal (a negative one picks a random
writable queue), and the topic may be written.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from ariane.broker.processors import error
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import (
    AUTO_CREATE_TOPIC,
    OFFSET_MOVED_EVENT,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    validate_topic,
)
from ariane.errors import InvalidArgumentError
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from ariane.broker.transaction import TransactionBrokerContext

__all__ = ["NOT_ALLOWED_SEND_TOPICS", "check_send"]

_RW = PERM_READ | PERM_WRITE

#: Topics clients may never send to (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`` + TBW102).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)


def check_send(
    broker: TransactionBrokerContext, ctx: RequestContext, header: h.SendMessageRequestHeader
) -> tuple[TopicConfig, int] | RemotingCommand:
    """``msgCheck``: the topic config and the queue to use, or an error response."""
    if not broker.config.broker_permission & PERM_WRITE:
        return error(
            ResponseCode.NO_PERMISSION,
            f"the broker[{broker.broker_addr}] sending message is forbidden",
        )
    topic = header.topic
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return error(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    tc = broker.topics.table.get(topic)
    if tc is None:
        try:
            validate_topic(topic)
        except InvalidArgumentError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        tc = broker.topics.create_in_send(
            topic, header.default_topic, ctx.remote_addr, header.default_topic_queue_nums, 0
        )
        if tc is None and topic.startswith(RETRY_PREFIX):
            tc = broker.topics.create_in_send_back(topic, 1, _RW)
        if tc is None:
            return error(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{topic}] not exist, apply first please!",
            )
    queue_id = header.queue_id
    write_nums = tc.write_queue_nums
    read_nums = tc.read_queue_nums
    if queue_id >= (write_nums if write_nums > read_nums else read_nums):
        return error(
            ResponseCode.INVALID_PARAMETER,
            f"request queueId[{queue_id}] is illegal, topic:{topic} "
            f"writeQueueNums:{tc.write_queue_nums} readQueueNums:{tc.read_queue_nums}",
        )
    if queue_id < 0:
        if tc.write_queue_nums <= 0:
            return error(ResponseCode.NO_PERMISSION, f"the topic[{topic}] has no write queue")
        queue_id = random.randrange(tc.write_queue_nums)
    if not tc.perm & PERM_WRITE:
        return error(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
    return tc, queue_id
