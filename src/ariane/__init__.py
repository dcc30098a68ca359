"""Ariane: a message broker in Python implementing Apache RocketMQ's design and protocols.

The client SDK's public names (``ariane.Producer``, ``ariane.Message``...) are re-exported
from :mod:`ariane.client`, imported on first use so servers and the CLI do not load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "SyncAdmin",
    "SyncProducer",
    "SyncPullConsumer",
    "SyncPushConsumer",
    "SyncTransactionProducer",
    "TransactionProducer",
    "TransactionSendResult",
    "__version__",
]
_CLIENT_NAMES = frozenset(__all__) - {"__version__"}

if TYPE_CHECKING:
    from ariane.client import (
        Admin,
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        ConsumeOrderlyStatus,
        LocalTransactionState,
        Message,
        MessageExt,
        MessageModel,
        MessageQueue,
        MessageSelector,
        Producer,
        PullConsumer,
        PushConsumer,
        SendResult,
        SendStatus,
        SyncAdmin,
        SyncProducer,
        SyncPullConsumer,
        SyncPushConsumer,
        SyncTransactionProducer,
        TransactionProducer,
        TransactionSendResult,
    )


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        return getattr(importlib.import_module("ariane.client"), name)
    raise AttributeError(f"module 'ariane' has no attribute {name!r}")
