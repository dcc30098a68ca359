"""Committed consumer offsets (RocketMQ ``ConsumerOffsetManager``), persisted as
``consumerOffset.json``.

How it works: ``offset_table["<topic>@<group>"][queueId]`` is the next offset the group will
consume. Commits (UPDATE_CONSUMER_OFFSET and the offset piggy-backed on pulls) only touch the
in-memory table and mark it dirty; the owner persists it every ``flushConsumerOffsetInterval``
and at shutdown. Two memory-only tables sit next to it: the last pull position per queue (for
consume stats) and offsets reset by an administrator that the next pull must jump to
(server-side reset, ``useServerSideResetOffset``).
"""

from __future__ import annotations

import logging

from ariane.broker.metadata import MetadataFile
from ariane.common.clock import Clock
from ariane.remoting.protocol.admin_bodies import ConsumerOffsetSerializeWrapper
from ariane.remoting.protocol.bodies import DataVersion

__all__ = ["ConsumerOffsetManager", "offset_key"]

logger = logging.getLogger(__name__)


def offset_key(topic: str, group: str) -> str:
    """``"<topic>@<group>"``, RocketMQ's key."""
    return f"{topic}@{group}"


class ConsumerOffsetManager:
    """Committed offsets per (topic, group, queue).

    Args:
        path: ``consumerOffset.json``.
        clock: time for DataVersion stamps.
    """

    def __init__(self, path: str, clock: Clock) -> None:
        self.clock = clock
        self.offset_table: dict[str, dict[int, int]] = {}
        self.pull_offset_table: dict[str, dict[int, int]] = {}
        self.reset_offset_table: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion(0, clock.now_ms(), 0)
        self.dirty = False
        self.file = MetadataFile(path, self.encode)

    # -- persistence -----------------------------------------------------------------------

    def encode(self) -> bytes:
        """``consumerOffset.json`` content."""
        return ConsumerOffsetSerializeWrapper(self.offset_table, self.data_version).encode()

    def load(self) -> None:
        """Read the persisted offsets.

        Raises:
            ConfigError: the file exists but is unreadable (names the file).
        """
        wrapper = self.file.load(ConsumerOffsetSerializeWrapper.decode, "consumer offset")
        if wrapper is None:
            return
        self.offset_table = wrapper.offset_table
        self.data_version = wrapper.data_version

    def persist_if_dirty(self) -> None:
        """Schedule a write when something changed since the last one."""
        if self.dirty:
            self.dirty = False
            self.data_version = self.data_version.next_version(self.clock.now_ms())
            self.file.persist_soon()

    async def persist(self) -> None:
        """Write now and wait for it.

        Raises:
            OSError: the write failed.
        """
        self.dirty = False
        self.data_version = self.data_version.next_version(self.clock.now_ms())
        await self.file.persist()

    # -- offsets -----------------------------------------------------------------------------

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store ``offset`` as the group's position in the queue (overwrites, like RocketMQ)."""
        key = f"{topic}@{group}"
        queues = self.offset_table.get(key)
        if queues is None:
            queues = self.offset_table[key] = {}
        queues[queue_id] = offset
        self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1."""
        queues = self.offset_table.get(f"{topic}@{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        """Committed offsets of every queue of (group, topic)."""
        return dict(self.offset_table.get(f"{topic}@{group}", {}))

    def topics_of_group(self, group: str) -> set[str]:
        """Topics the group has offsets for."""
        suffix = "@" + group
        return {k[: -len(suffix)] for k in self.offset_table if k.endswith(suffix)}

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups with offsets for the topic."""
        prefix = topic + "@"
        return {k[len(prefix) :] for k in self.offset_table if k.startswith(prefix)}

    def remove_group(self, group: str) -> None:
        """Forget every offset of ``group``."""
        suffix = "@" + group
        for key in [k for k in self.offset_table if k.endswith(suffix)]:
            del self.offset_table[key]
            self.pull_offset_table.pop(key, None)
            self.dirty = True

    def remove_topic(self, topic: str) -> None:
        """Forget every offset of ``topic``."""
        prefix = topic + "@"
        for key in [k for k in self.offset_table if k.startswith(prefix)]:
            del self.offset_table[key]
            self.pull_offset_table.pop(key, None)
            self.dirty = True

    def clone(self, src_group: str, dest_group: str, topic: str) -> None:
        """Copy ``src_group``'s offsets of ``topic`` to ``dest_group``."""
        offsets = self.offset_table.get(offset_key(topic, src_group))
        if offsets is not None:
            self.offset_table[offset_key(topic, dest_group)] = dict(offsets)
            self.dirty = True

    # -- pull positions and resets (memory only) -----------------------------------------------

    def record_pull(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """Remember where the group's last pull of the queue ended (consume stats)."""
        key = f"{topic}@{group}"
        queues = self.pull_offset_table.get(key)
        if queues is None:
            queues = self.pull_offset_table[key] = {}
        queues[queue_id] = next_offset

    def consuming(self, group: str, topic: str, online: bool) -> bool:
        """Whether ``group`` consumes ``topic`` now: a consumer is ``online``, or something
        pulled for the group since its last consumer left (clients without heartbeats)."""
        return online or bool(self.pull_offset_table.get(f"{topic}@{group}"))

    def pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The last pull position, or -1."""
        return self.pull_offset_table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def forget_pull_positions(self, group: str) -> None:
        """The group's last consumer left: nothing it pulled is in flight any more."""
        suffix = "@" + group
        for key in [k for k in self.pull_offset_table if k.endswith(suffix)]:
            del self.pull_offset_table[key]

    def commit_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """An administrator moved the group's position: commit it; what was pulled beyond the
        old position is no longer in flight (the next pull records a new position)."""
        self.commit(group, topic, queue_id, offset)
        pulls = self.pull_offset_table.get(f"{topic}@{group}")
        if pulls is not None:
            pulls.pop(queue_id, None)

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Reset the group's position (``commit_reset``) and make the next pull jump there."""
        self.commit_reset(group, topic, queue_id, offset)
        self.reset_offset_table.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def has_reset(self, group: str, topic: str, queue_id: int) -> bool:
        """Whether a reset waits for the next pull (or pop) of the queue."""
        queues = self.reset_offset_table.get(f"{topic}@{group}")
        return queues is not None and queue_id in queues

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """A pending reset for the queue, removed as it is taken."""
        if not self.reset_offset_table:
            return None
        key = f"{topic}@{group}"
        queues = self.reset_offset_table.get(key)
        if queues is None:
            return None
        offset = queues.pop(queue_id, None)
        if not queues:
            del self.reset_offset_table[key]
        return offset
