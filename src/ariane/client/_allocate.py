"""Queue allocation strategies of clustering consumers (RocketMQ ``AllocateMessageQueueStrategy``
and its implementations in ``org.apache.rocketmq.client.consumer.rebalance``).

How it works: every consumer of a group runs the same pure function over the same inputs: all
queues of a topic sorted by (topic, broker name, queue id) and all client ids of the group
sorted as strings. Each consumer keeps only its own share, so without any coordination every
queue ends up with exactly one consumer (as long as all consumers see the same lists and use
the same strategy). The strategies:

* ``AllocateMessageQueueAveragely`` ("AVG"): contiguous blocks, the first ``n % c`` consumers
  take one queue more.
* ``AllocateMessageQueueAveragelyByCircle`` ("AVG_BY_CIRCLE"): round robin.
* ``AllocateMessageQueueConsistentHash`` ("CONSISTENT_HASH"): a ring of ``virtual_node_count``
  MD5-hashed virtual nodes per consumer; a queue belongs to the first node at or after its
  hash. Queues move little when consumers come and go.
* ``AllocateMessageQueueByConfig`` ("CONFIG"): a fixed list, whatever the inputs.
* ``AllocateMessageQueueByMachineRoom`` ("MACHINE_ROOM"): only queues of brokers named
  ``"<room>@<name>"`` whose room this consumer serves, shared averagely (the fixed 4.9+
  algorithm). Pure code.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateStrategy",
    "mq_sort_key",
    "mq_string",
]


def mq_sort_key(mq: MessageQueue) -> tuple[str, str, int]:
    """``MessageQueue.compareTo``: topic, then broker name, then queue id."""
    return (mq.topic, mq.broker_name, mq.queue_id)


def mq_string(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()`` (what the consistent hash hashes)."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class AllocateStrategy(Protocol):
    """``AllocateMessageQueueStrategy``: this consumer's share of a topic's queues."""

    @property
    def name(self) -> str:
        """The strategy name (``AVG``, ``AVG_BY_CIRCLE``...)."""
        ...

    def allocate(
        self,
        group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        """The queues ``current_cid`` owns, given every queue and every consumer (both sorted).

        Raises:
            InvalidArgumentError: an empty client id, queue list or consumer list.
        """
        ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> int:
    """The index of ``current_cid`` in ``cid_all``, or -1 if it is absent."""
    if not current_cid:
        raise InvalidArgumentError("current client id is empty")
    if not mq_all:
        raise InvalidArgumentError("the queue list is empty")
    if not cid_all:
        raise InvalidArgumentError("the consumer id list is empty")
    try:
        return cid_all.index(current_cid)
    except ValueError:
        return -1


class AllocateMessageQueueAveragely:
    """Contiguous blocks of equal size; the first ``len(mq_all) % len(cid_all)`` consumers
    get one queue more (RocketMQ's default strategy)."""

    name = "AVG"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See ``AllocateStrategy.allocate``."""
        index = _check(current_cid, mq_all, cid_all)
        if index < 0:
            return []
        n, c = len(mq_all), len(cid_all)
        mod = n % c
        if n <= c:
            size = 1
        elif mod > 0 and index < mod:
            size = n // c + 1
        else:
            size = n // c
        start = index * size if mod > 0 and index < mod else index * size + mod
        count = min(size, n - start)
        return [mq_all[(start + i) % n] for i in range(max(count, 0))]


class AllocateMessageQueueAveragelyByCircle:
    """Round robin: consumer ``i`` takes queues ``i``, ``i + c``, ``i + 2c``..."""

    name = "AVG_BY_CIRCLE"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See ``AllocateStrategy.allocate``."""
        index = _check(current_cid, mq_all, cid_all)
        if index < 0:
            return []
        return list(mq_all[index :: len(cid_all)])


def md5_hash(key: str) -> int:
    """RocketMQ's default ring hash: the first four MD5 bytes as an unsigned big-endian int."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4])


class AllocateMessageQueueConsistentHash:
    """A consistent-hash ring with ``virtual_node_count`` virtual nodes per consumer.

    Args:
        virtual_node_count: virtual nodes per consumer (RocketMQ's default 10).
        hash_fn: the ring hash of a string (default: ``md5_hash``, as Java).

    Raises:
        InvalidArgumentError: a negative node count.
    """

    name = "CONSISTENT_HASH"

    def __init__(
        self, virtual_node_count: int = 10, hash_fn: Callable[[str], int] = md5_hash
    ) -> None:
        if virtual_node_count < 0:
            raise InvalidArgumentError(f"virtual_node_count must be >= 0: {virtual_node_count}")
        self.virtual_node_count = virtual_node_count
        self.hash_fn = hash_fn

    def _ring(self, cid_all: Iterable[str]) -> tuple[list[int], list[str]]:
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(self.virtual_node_count):
                ring[self.hash_fn(f"{cid}-{i}")] = cid  # a later collision wins, as in Java
        keys = sorted(ring)
        return keys, [ring[k] for k in keys]

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See ``AllocateStrategy.allocate``."""
        if _check(current_cid, mq_all, cid_all) < 0:
            return []
        keys, owners = self._ring(cid_all)
        if not keys:
            return []
        result = []
        for mq in mq_all:
            at = bisect.bisect_left(keys, self.hash_fn(mq_string(mq)))
            if owners[at % len(keys)] == current_cid:
                result.append(mq)
        return result


class AllocateMessageQueueByConfig:
    """Always the configured queues (every consumer must be given a disjoint list).

    Args:
        message_queues: the queues this consumer takes.
    """

    name = "CONFIG"

    def __init__(self, message_queues: Iterable[MessageQueue]) -> None:
        self.message_queues = list(message_queues)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See ``AllocateStrategy.allocate``."""
        return list(self.message_queues)


class AllocateMessageQueueByMachineRoom:
    """Queues of brokers named ``"<room>@<broker>"`` in the rooms this consumer serves, shared
    in blocks; the remainder goes one each to the first consumers.

    Args:
        consumer_idcs: the machine rooms (IDCs) served.
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Collection[str]) -> None:
        self.consumer_idcs = frozenset(consumer_idcs)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See ``AllocateStrategy.allocate``."""
        index = _check(current_cid, mq_all, cid_all)
        if index < 0:
            return []
        pre = []
        for mq in mq_all:
            parts = mq.broker_name.split("@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                pre.append(mq)
        c = len(cid_all)
        mod, rem = divmod(len(pre), c)
        start = mod * index
        result = pre[start : start + mod]
        if rem > index:
            result.append(pre[index + mod * c])
        return result
