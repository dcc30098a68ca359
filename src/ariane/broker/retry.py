"""Retry topics and dead letters (RocketMQ ``AbstractSendMessageProcessor.handleRetryAndDLQ``
and the routing half of ``SendMessageProcessor.consumerSendMsgBack``).

How it works: a message a consumer failed to process comes back to the broker either as
CONSUMER_SEND_MSG_BACK (the broker re-reads it from the CommitLog) or, when that fails, as a
plain send to ``%RETRY%<group>`` (seen by :class:`RetryToDlqInterceptor`). Both use the same
limit, :func:`max_reconsume_times` (the client's ``maxReconsumeTimes`` from version V3_4_9
on, else the group's ``retryMaxTimes``), and the same destinations, :func:`route_retry`: a
message past the limit (a send-back also with a negative delay level; a plain retry send also
while the group holds queue locks: an orderly consumer sends a message back only once it gave
up on it) goes to the write-only ``%DLQ%<group>`` queue 0 without delay; otherwise to a random
queue of ``%RETRY%<group>`` with delay level ``delayLevel`` (0: 3 + its reconsume count), so
the schedule service redelivers it later. Both topics are created on first use.
"""

from __future__ import annotations

import logging
import random
from typing import NamedTuple, Protocol

from ariane.broker.processors import error
from ariane.broker.rebalance_lock import RebalanceLockManager
from ariane.broker.subscription_group import SubscriptionGroupManager
from ariane.broker.topic_config import TopicConfigManager
from ariane.common.properties import DELAY
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import RETRY_PREFIX, dlq_topic, retry_topic
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import MQVersion, RemotingCommand
from ariane.store import MessageInner

__all__ = [
    "DLQ_PERM",
    "RetryBrokerContext",
    "RetryRoute",
    "RetryToDlqInterceptor",
    "max_reconsume_times",
    "route_retry",
]

logger = logging.getLogger(__name__)

#: ``%DLQ%<group>`` is created write-only: dead letters are not consumed unless an
#: administrator grants read permission (RocketMQ 4.x; 5.x creates it readable).
DLQ_PERM = PERM_WRITE
_RW = PERM_READ | PERM_WRITE
#: Delay level of a retry whose send-back asked for level 0: 3 + the reconsume count.
_FIRST_RETRY_LEVEL = 3


class RetryBrokerContext(Protocol):
    """What retry routing needs of the broker."""

    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def locks(self) -> RebalanceLockManager: ...


class RetryRoute(NamedTuple):
    """Where a message that failed goes."""

    topic: str
    queue_id: int
    config: TopicConfig
    #: True for ``%DLQ%<group>`` (no delay, no further retries).
    dead: bool
    #: the delay level of a retry (None for a dead letter).
    delay_level: int | None


def max_reconsume_times(cfg: SubscriptionGroupConfig, version: int, requested: int | None) -> int:
    """The client's ``maxReconsumeTimes`` (clients of V3_4_9 and later send it), else the
    group's ``retryMaxTimes``."""
    if version >= MQVersion.V3_4_9 and requested is not None:
        return requested
    return cfg.retry_max_times


def route_retry(
    broker: RetryBrokerContext,
    cfg: SubscriptionGroupConfig,
    group: str,
    *,
    dead: bool,
    reconsume_times: int = 0,
    delay_level: int = 0,
) -> RetryRoute:
    """The destination of a failed message of ``group``: ``%DLQ%<group>`` queue 0 when
    ``dead``, else a random queue of ``%RETRY%<group>`` with the delay level of its next
    attempt. Creates the topic when needed."""
    if dead:
        topic = dlq_topic(group)
        return RetryRoute(
            topic, 0, broker.topics.create_in_send_back(topic, 1, DLQ_PERM), True, None
        )
    topic = retry_topic(group)
    nums = max(cfg.retry_queue_nums, 1)
    tc = broker.topics.create_in_send_back(topic, nums, _RW)
    level = delay_level if delay_level > 0 else _FIRST_RETRY_LEVEL + reconsume_times
    return RetryRoute(topic, random.randrange(nums), tc, False, level)


class RetryToDlqInterceptor:
    """A send interceptor: messages sent to ``%RETRY%<group>`` past the group's maximum
    reconsume count, or while the group holds queue locks, go to ``%DLQ%<group>`` queue 0
    (``handleRetryAndDLQ``)."""

    def __init__(self, broker: RetryBrokerContext) -> None:
        self.broker = broker

    def before_put(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: h.SendMessageRequestHeader,
        inner: MessageInner,
    ) -> RemotingCommand | None:
        topic = inner.topic
        if not topic.startswith(RETRY_PREFIX):
            return None
        group = topic[len(RETRY_PREFIX) :]
        cfg = self.broker.groups.find(group)
        if cfg is None:
            return error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = max_reconsume_times(cfg, request.version, header.max_reconsume_times)
        orderly = self.broker.locks.group_has_locks(group)
        # the client counted this attempt already: a retry at the limit is still a retry
        if inner.reconsume_times <= max_times and not orderly:
            return None
        route = route_retry(self.broker, cfg, group, dead=True)
        if not route.config.perm & PERM_WRITE:
            return error(
                ResponseCode.NO_PERMISSION,
                f"the topic[{route.topic}] sending message is forbidden",
            )
        inner.topic = route.topic
        inner.queue_id = route.queue_id
        if inner.properties.pop(DELAY, None) is not None:
            inner.properties_string = None
        if orderly:
            logger.info("retry message of orderly group %s goes to %s at once", group, route.topic)
        else:
            logger.info(
                "message of %s exceeded %d reconsumes, to %s", group, max_times, route.topic
            )
        return None
