"""What a ``ClientInstance`` needs of the groups it serves (RocketMQ ``MQProducerInner`` and
``MQConsumerInner``).

A producer or consumer object registers with its process's ``ClientInstance``
(``register_producer`` / ``register_consumer``); the instance's background services and the
handlers of broker-to-client requests then call these hooks. They are structural protocols:
any object with these members qualifies.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

from ariane.client._route import TopicPublishInfo
from ariane.common.message import MessageExt
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import ConsumerData, MessageQueue

__all__ = ["ConsumerMember", "ProducerMember"]


class ProducerMember(Protocol):
    """What a ``ClientInstance`` needs from a producer group (``MQProducerInner``)."""

    @property
    def group(self) -> str:
        """The producer group."""
        ...

    def publish_topics(self) -> Collection[str]:
        """Topics this producer has sent to (their routes are refreshed)."""
        ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """A new route for ``topic``."""
        ...

    def is_publish_topic_need_update(self, topic: str) -> bool:
        """Whether ``topic``'s publish info is missing or empty."""
        ...

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: h.CheckTransactionStateRequestHeader
    ) -> None:
        """A broker asks for the state of a half message (must not block)."""
        ...


class ConsumerMember(Protocol):
    """What a ``ClientInstance`` needs from a consumer group (``MQConsumerInner``).

    ``consumer_data`` is the heartbeat provider; the other hooks are called by the services
    and request handlers of the instance. None of them may block the event loop.
    """

    @property
    def group(self) -> str:
        """The consumer group."""
        ...

    def consumer_data(self) -> ConsumerData:
        """This group's entry in heartbeats (type, model, consume-from, subscriptions)."""
        ...

    def subscribe_topics(self) -> Collection[str]:
        """Topics subscribed (retry topics included); their routes are refreshed."""
        ...

    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None:
        """The readable queues of ``topic`` changed."""
        ...

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """Whether ``topic``'s queue set is missing."""
        ...

    async def do_rebalance(self) -> None:
        """Reassign queues (every 20 s and on NOTIFY_CONSUMER_IDS_CHANGED)."""
        ...

    async def persist_consumer_offset(self) -> None:
        """Commit offsets (every 5 s)."""
        ...

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: move to these offsets."""
        ...

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO: a ``ConsumerRunningInfo`` JSON object."""
        ...

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: a ``ConsumeMessageDirectlyResult`` JSON object."""
        ...
