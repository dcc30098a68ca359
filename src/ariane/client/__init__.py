"""The Python SDK for RocketMQ-compatible clusters (RocketMQ's ``client`` module).

asyncio first; every class has a blocking twin in :mod:`ariane.client.sync`::

    from ariane.client import Message, Producer

    async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("MyTopic", b"hello", tags="TagA", keys="k1"))

The core the consumers build on (``ClientInstance``, ``ClientAPI``) lives in the private
modules ``_instance`` and ``_api``; see ``docs/client.md``.
"""

from __future__ import annotations

from ariane.client._instance import ClientInstance, ConsumerMember, ProducerMember
from ariane.client._producer import DEFAULT_PRODUCER_GROUP, Producer
from ariane.client._selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from ariane.client._transaction import LocalTransaction, TransactionChecker, TransactionProducer
from ariane.client.admin import Admin
from ariane.client.config import ClientConfig
from ariane.client.errors import (
    BrokerNotFoundError,
    BrokerResponseError,
    ClientStateError,
    NoRouteError,
    SendError,
    error_for,
)
from ariane.client.message import (
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from ariane.client.sync import SyncAdmin, SyncProducer, SyncTransactionProducer

__all__ = [
    "DEFAULT_PRODUCER_GROUP",
    "Admin",
    "BrokerNotFoundError",
    "BrokerResponseError",
    "ClientConfig",
    "ClientInstance",
    "ClientStateError",
    "ConsumerMember",
    "LocalTransaction",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageQueueSelector",
    "NoRouteError",
    "Producer",
    "ProducerMember",
    "PullResult",
    "PullStatus",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendError",
    "SendResult",
    "SendStatus",
    "SyncAdmin",
    "SyncProducer",
    "SyncTransactionProducer",
    "TransactionChecker",
    "TransactionProducer",
    "TransactionSendResult",
    "error_for",
]
