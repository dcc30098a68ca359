"""RocketMQ's ``store``: CommitLog, ConsumeQueue, IndexFile, flush, recovery and cleanup.

The broker uses :class:`MessageStore` (see its module for the threading model) with
:class:`StoreConfig`, appends :class:`MessageInner`/:class:`MessageBatchInner` and reads
:class:`GetResult`/:class:`QueryResult`. Synchronous code only: no asyncio here.
"""

from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.filter import MessageFilter, TagFilter
from ariane.store.inner import BatchItem, MessageBatchInner, MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.reads import ReadLimits
from ariane.store.results import GetResult, GetStatus, PutResult, PutStatus, QueryResult

__all__ = [
    "BatchItem",
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "MessageBatchInner",
    "MessageFilter",
    "MessageInner",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "QueryResult",
    "ReadLimits",
    "StoreConfig",
    "TagFilter",
]
