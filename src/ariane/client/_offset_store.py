"""Consumer offset stores (RocketMQ ``OffsetStore``, ``RemoteBrokerOffsetStore``,
``LocalFileOffsetStore``).

How it works: both keep ``offset_table`` (queue -> next offset to consume) in memory; the
consume services update it after every batch (``update_offset``), and the client instance's
persist service commits it every ``persist_consumer_offset_interval_ms`` (5 s) and at
shutdown (``persist_all``).

* ``RemoteBrokerOffsetStore`` (clustering): the group's offsets live on the brokers.
  ``read_offset_from_store`` sends QUERY_CONSUMER_OFFSET (-1 when the broker has none, -2 on
  any other failure); ``persist_all`` sends one-way UPDATE_CONSUMER_OFFSET per owned queue and
  forgets queues no longer owned.
* ``LocalFileOffsetStore`` (broadcasting): every consumer has its own offsets, in
  ``<dir>/<clientId>/<group>/offsets.json`` (fastjson's ``{"offsetTable": {<queue>: n}}``
  form, as Java writes it). A write goes to ``offsets.json.tmp`` then replaces the file
  atomically after keeping the previous one as ``offsets.json.bak``; ``load`` falls back to
  the ``.bak`` copy if the file is missing or unreadable.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from collections.abc import Collection
from pathlib import Path
from typing import Protocol

from ariane.client._instance import ClientInstance
from ariane.errors import ArianeError
from ariane.remoting.protocol.admin_bodies import ResetOffsetBody
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = [
    "LocalFileOffsetStore",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "default_offset_store_dir",
]

logger = logging.getLogger(__name__)

#: "no stored offset" and "could not read the stored offset".
NOT_FOUND = -1
READ_FAILED = -2


def default_offset_store_dir() -> Path:
    """``rocketmq.client.localOffsetStoreDir``'s default: ``~/.rocketmq_offsets``."""
    return Path.home() / ".rocketmq_offsets"


class ReadOffsetType(enum.Enum):
    """``ReadOffsetType``."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(Protocol):
    """What consumers need from an offset store."""

    offset_table: dict[MessageQueue, int]

    def load(self) -> None:
        """Read persisted offsets into memory."""
        ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set the in-memory offset (with ``increase_only`` only if larger)."""
        ...

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        """The offset, -1 if none is stored, -2 if the store could not be read."""
        ...

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None:
        """Persist the offsets of ``mqs``."""
        ...

    async def persist(self, mq: MessageQueue) -> None:
        """Persist one queue's offset."""
        ...

    async def flush(self, mqs: Collection[MessageQueue]) -> None:
        """Persist the offsets of ``mqs`` now and wait until they are stored (shutdown and
        explicit commits); other offsets are kept."""
        ...

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq``'s in-memory offset."""
        ...


class _MemoryTable:
    """The in-memory part both stores share."""

    def __init__(self) -> None:
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """``updateOffset``: a missing queue takes the value whatever ``increase_only``."""
        current = self.offset_table.get(mq)
        if current is None or not increase_only or offset > current:
            self.offset_table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        """The in-memory offset, or -1."""
        return self.offset_table.get(mq, NOT_FOUND)

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq``."""
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the offsets of ``topic`` (all topics when empty)."""
        return {mq: o for mq, o in self.offset_table.items() if not topic or mq.topic == topic}


class RemoteBrokerOffsetStore(_MemoryTable):
    """Clustering offsets, kept by the brokers.

    Args:
        instance: the client instance (routes and requests).
        group: the consumer group.
        zero_if_not_found: ``setZeroIfNotFound`` of QUERY_CONSUMER_OFFSET. Unset, a broker
            answers 0 for a group it has no offset of when the queue still starts at offset 0
            in memory (RocketMQ's "new group reads a young queue from the start"); ``False``
            asks for "not found" instead.
    """

    def __init__(
        self, instance: ClientInstance, group: str, *, zero_if_not_found: bool | None = None
    ) -> None:
        super().__init__()
        self.instance = instance
        self.group = group
        self.zero_if_not_found = zero_if_not_found

    def load(self) -> None:
        """Nothing to load: the broker is asked per queue."""

    async def _broker_addr(self, mq: MessageQueue) -> str | None:
        found = self.instance.find_broker_addr_in_subscribe(mq.broker_name)
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            found = self.instance.find_broker_addr_in_subscribe(mq.broker_name)
        return found[0] if found is not None else None

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        """See ``OffsetStore.read_offset``; the store is the broker (QUERY_CONSUMER_OFFSET)."""
        if how is not ReadOffsetType.READ_FROM_STORE:
            value = self.read_memory(mq)
            if value != NOT_FOUND or how is ReadOffsetType.READ_FROM_MEMORY:
                return value
        try:
            addr = await self._broker_addr(mq)
            if addr is None:
                logger.warning("no broker for %s; cannot read its offset", mq)
                return READ_FAILED
            offset = await self.instance.api.query_consumer_offset(
                addr,
                self.group,
                mq.topic,
                mq.queue_id,
                set_zero_if_not_found=self.zero_if_not_found,
            )
        except ArianeError as exc:
            logger.warning("reading the offset of %s failed: %s", mq, exc)
            return READ_FAILED
        if offset is None:
            return NOT_FOUND
        self.update_offset(mq, offset, False)
        return offset

    async def _commit(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        """To the master when it is known, else to a slave (book §20: a slave keeps the
        progress made while the master is down and hands it back)."""
        addr = await self._broker_addr(mq)
        if addr is None:
            raise ArianeError(f"no broker for {mq}")
        try:
            await self.instance.api.update_consumer_offset(
                addr, self.group, mq.topic, mq.queue_id, offset, oneway=oneway
            )
        except ArianeError:
            self.instance.refresh_route_soon(mq.topic)
            raise

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None:
        """UPDATE_CONSUMER_OFFSET (one-way) for each of ``mqs``; other queues are forgotten."""
        wanted = set(mqs)
        pairs = []
        for mq, offset in list(self.offset_table.items()):
            if mq in wanted:
                pairs.append((mq, offset))
            else:
                del self.offset_table[mq]
        outcomes = await asyncio.gather(
            *(self._commit(mq, offset, True) for mq, offset in pairs), return_exceptions=True
        )
        for (mq, _), outcome in zip(pairs, outcomes, strict=True):
            if isinstance(outcome, Exception):
                logger.warning("offset commit of %s failed: %s", mq, outcome)

    async def persist(self, mq: MessageQueue) -> None:
        """Commit one queue's offset now (and wait for the broker)."""
        offset = self.offset_table.get(mq)
        if offset is None:
            return
        try:
            await self._commit(mq, offset, False)
        except ArianeError as exc:
            logger.warning("offset commit of %s failed: %s", mq, exc)

    async def flush(self, mqs: Collection[MessageQueue]) -> None:
        """Commit the offsets of ``mqs`` and wait for the brokers' answers."""
        await asyncio.gather(*(self.persist(mq) for mq in mqs if mq in self.offset_table))

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, oneway: bool = False
    ) -> None:
        """``updateConsumeOffsetToBroker``: commit ``offset`` for ``mq`` directly.

        Raises:
            ArianeError: no broker is known for the queue, or the request failed.
        """
        await self._commit(mq, offset, oneway)


class LocalFileOffsetStore(_MemoryTable):
    """Broadcasting offsets, in a file per consumer.

    Args:
        client_id: the client id (a path component).
        group: the consumer group (a path component).
        store_dir: the root directory (``~/.rocketmq_offsets`` by default).
    """

    def __init__(self, client_id: str, group: str, store_dir: Path | None = None) -> None:
        super().__init__()
        root = store_dir if store_dir is not None else default_offset_store_dir()
        self.path = root / client_id / group / "offsets.json"

    def _read(self, path: Path) -> dict[MessageQueue, int] | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read offsets from %s: %s", path, exc)
            return None
        if not data.strip():
            return None
        try:
            return ResetOffsetBody.decode(data).offset_table
        except ArianeError as exc:
            logger.warning("offsets file %s is unreadable: %s", path, exc)
            return None

    def load(self) -> None:
        """Read the file (or its ``.bak`` copy); a missing file means no offsets."""
        table = self._read(self.path)
        if table is None:
            table = self._read(self.path.with_name(self.path.name + ".bak"))
        if table:
            self.offset_table.update(table)
            logger.info("loaded %d offsets from %s", len(table), self.path)

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        """See ``OffsetStore.read_offset``; the store is the file."""
        if how is not ReadOffsetType.READ_FROM_STORE:
            value = self.read_memory(mq)
            if value != NOT_FOUND or how is ReadOffsetType.READ_FROM_MEMORY:
                return value
        table = self._read(self.path)
        if table is None or mq not in table:
            return NOT_FOUND
        self.update_offset(mq, table[mq], False)
        return table[mq]

    def write(self, mqs: Collection[MessageQueue] | None = None) -> None:
        """Write the offsets of ``mqs`` (all when ``None``) to the file, atomically.

        Raises:
            OSError: the directory cannot be created or written.
        """
        wanted = set(mqs) if mqs is not None else None
        table = {mq: o for mq, o in self.offset_table.items() if wanted is None or mq in wanted}
        data = ResetOffsetBody(table).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if self.path.exists():
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None:
        """Write the offsets of ``mqs`` to the file."""
        if not mqs:
            return
        try:
            self.write(mqs)
        except OSError as exc:
            logger.warning("writing offsets to %s failed: %s", self.path, exc)

    async def persist(self, mq: MessageQueue) -> None:
        """Write the whole table (the file holds every queue)."""
        if mq in self.offset_table:
            await self.flush([mq])

    async def flush(self, mqs: Collection[MessageQueue]) -> None:
        """Write the whole table now (one file holds every queue)."""
        try:
            self.write(None)
        except OSError as exc:
            logger.warning("writing offsets to %s failed: %s", self.path, exc)
