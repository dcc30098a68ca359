"""Topic message types on remoting sends (RocketMQ 5's ``DefaultTopicMessageTypeValidator``,
which RocketMQ applies to gRPC sends only).

How it works: with ``enableRemotingMessageTypeCheck`` (Ariane's, off by default so that 4.x
clients sending delayed messages to untyped topics keep working) a send interceptor compares the
message's type (TRANSACTION, DELAY, FIFO or NORMAL, from its properties) with its topic's
``message.type`` attribute (NORMAL when absent; MIXED accepts all) and refuses a mismatch with
MESSAGE_ILLEGAL and upstream's remark. Retry and DLQ topics and forwarded messages
(``TRANSFER_FLAG``) are not checked, as upstream.
"""

from __future__ import annotations

from ariane.broker.context import BrokerContext
from ariane.broker.processors import error
from ariane.common.properties import TRANSFER_FLAG
from ariane.common.topic_attributes import check_message_type, message_type_of, topic_message_type
from ariane.common.topics import DLQ_PREFIX, RETRY_PREFIX
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import MessageInner

__all__ = ["MessageTypeInterceptor"]


class MessageTypeInterceptor:
    """A send interceptor refusing messages of another type than their topic's.

    Args:
        broker: the broker (its config and topic table).
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def before_put(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: h.SendMessageRequestHeader,
        inner: MessageInner,
    ) -> RemotingCommand | None:
        """Refuse a message whose type the topic does not accept."""
        if not self.broker.config.enable_remoting_message_type_check:
            return None
        topic = inner.topic
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or TRANSFER_FLAG in inner.properties:
            return None
        tc = self.broker.topics.get(topic)
        expected = topic_message_type(tc.attributes if tc is not None else None)
        refused = check_message_type(expected, message_type_of(inner.properties))
        return error(ResponseCode.MESSAGE_ILLEGAL, refused) if refused else None
