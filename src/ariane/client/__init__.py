"""The Python SDK for RocketMQ-compatible clusters (RocketMQ's ``client`` module).

asyncio first; every class has a blocking twin in :mod:`ariane.client.sync`::

    from ariane.client import Message, Producer

    async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("MyTopic", b"hello", tags="TagA", keys="k1"))

The core the consumers build on (``ClientInstance``, ``ClientAPI``) lives in the private
modules ``_instance`` and ``_api``; see ``docs/client.md``.
"""

from __future__ import annotations

from ariane.acl.credentials import SessionCredentials
from ariane.acl.plain import AclConfig, PlainAccessConfig
from ariane.client._acl_api import AclVersionInfo
from ariane.client._allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateStrategy,
)
from ariane.client._instance import ClientInstance, ConsumerMember, ProducerMember
from ariane.client._lite_pull import PullConsumer
from ariane.client._offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from ariane.client._producer import DEFAULT_PRODUCER_GROUP, Producer
from ariane.client._push import PushConsumer
from ariane.client._selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from ariane.client._simple import SimpleConsumer
from ariane.client._transaction import LocalTransaction, TransactionChecker, TransactionProducer
from ariane.client.admin import Admin
from ariane.client.config import ClientConfig
from ariane.client.consumer_types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
    MessageSelector,
)
from ariane.client.errors import (
    AccessDeniedError,
    BrokerNotFoundError,
    BrokerResponseError,
    ClientStateError,
    NoPermissionError,
    NoRouteError,
    SendError,
    TopicNotWritableError,
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
from ariane.client.sync_consumer import SyncPullConsumer, SyncPushConsumer, SyncSimpleConsumer

__all__ = [
    "DEFAULT_PRODUCER_GROUP",
    "AccessDeniedError",
    "AclConfig",
    "AclVersionInfo",
    "Admin",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateStrategy",
    "BrokerNotFoundError",
    "BrokerResponseError",
    "ClientConfig",
    "ClientInstance",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumerMember",
    "LocalFileOffsetStore",
    "LocalTransaction",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "NoPermissionError",
    "NoRouteError",
    "OffsetStore",
    "PlainAccessConfig",
    "Producer",
    "ProducerMember",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendError",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "SimpleConsumer",
    "SyncAdmin",
    "SyncProducer",
    "SyncPullConsumer",
    "SyncPushConsumer",
    "SyncSimpleConsumer",
    "SyncTransactionProducer",
    "TopicNotWritableError",
    "TransactionChecker",
    "TransactionProducer",
    "TransactionSendResult",
    "error_for",
]
