"""FIFO ("orderly") POP state (RocketMQ 5 ``ConsumerOrderInfoManager``), persisted as
``<storePathRootDir>/config/consumerOrderInfo.json``.

How it works: a FIFO pop of a queue hands out a batch and records it as the queue's
:class:`OrderInfo` (pop time, invisible time, the batch's offsets, an ack bit per offset, the
client's attempt id, and for each offset how many times it was handed out before). While some
un-acked offset of the batch is still invisible, the queue is *blocked*: other pops skip it,
except a retry with the same attempt id (a client re-sending a request whose answer it lost),
which gets the same batch again without counting a delivery. The group's committed offset is
the first un-acked offset of the batch: it moves on ACK (:meth:`OrderInfoManager.commit_and_next`)
and never at pop time, so when the lease of a batch runs out the next pop reads again from the
first un-acked message, and every message of the new batch that was in the old one counts one
more delivery. CHANGE_MESSAGE_INVISIBLETIME sets one offset's next visible time.

On disk: ``{"table": {"<topic>@<group>": {"<queueId>": {"popTime", "i", "o", "ot", "oc",
"l", "cm", "a"}}}}`` with RocketMQ's short keys (``o[0]`` absolute, later entries relative to
it; ``ot``/``oc`` keyed by absolute offset). Entries idle for a day, or whose topic or group is
gone, are dropped when the file is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ariane.broker.metadata import MetadataFile
from ariane.common.clock import Clock
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_int,
    get_list,
    get_object,
    get_opt_str,
    parse_object,
)

__all__ = ["ORDER_INFO_FILE", "OrderInfo", "OrderInfoManager"]

#: Under ``<storePathRootDir>/config``.
ORDER_INFO_FILE = "consumerOrderInfo.json"
_IDLE_MS = 24 * 3600 * 1000
#: ``commit_and_next`` outcomes besides an offset.
ILLEGAL = -1
STALE = -2


@dataclass(slots=True)
class OrderInfo:
    """The batch last handed out from one queue."""

    pop_time: int
    invisible_time: int
    offsets: list[int]
    attempt_id: str | None = None
    commit_bits: int = 0
    next_visible: dict[int, int] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    last_update: int = 0

    def is_acked(self, index: int) -> bool:
        """Whether the ``index``-th offset of the batch was acked."""
        return bool(self.commit_bits >> index & 1)

    def next_visible_of(self, offset: int) -> int:
        """When ``offset`` may be handed out again."""
        return self.next_visible.get(offset, self.pop_time + self.invisible_time)

    def blocks(self, attempt_id: str | None, now_ms: int) -> bool:
        """``needBlock``: some un-acked offset is still invisible (a same-attempt retry is
        never blocked)."""
        if not self.offsets:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        return any(
            now_ms < self.next_visible_of(off)
            for i, off in enumerate(self.offsets)
            if not self.is_acked(i)
        )

    def unblock_time(self) -> int | None:
        """The latest next-visible time of the un-acked offsets (None when all are acked)."""
        times = [
            self.next_visible_of(off) for i, off in enumerate(self.offsets) if not self.is_acked(i)
        ]
        return max(times) if times else None

    def next_offset(self) -> int:
        """``getNextOffset``: the first un-acked offset, or one past the batch when all are."""
        for i, off in enumerate(self.offsets):
            if not self.is_acked(i):
                return off
        return self.offsets[-1] + 1

    def to_json(self) -> dict[str, Any]:
        """The persisted form (RocketMQ's keys)."""
        first = self.offsets[0] if self.offsets else 0
        rel = [first] + [o - first for o in self.offsets[1:]] if self.offsets else []
        obj: dict[str, Any] = {
            "popTime": self.pop_time,
            "i": self.invisible_time,
            "o": rel,
            "l": self.last_update,
            "cm": self.commit_bits,
        }
        if self.next_visible:
            obj["ot"] = {str(k): v for k, v in self.next_visible.items()}
        if self.counts:
            obj["oc"] = {str(k): v for k, v in self.counts.items()}
        if self.attempt_id is not None:
            obj["a"] = self.attempt_id
        return obj

    @classmethod
    def from_json(cls, value: Any) -> OrderInfo:
        """Parse the persisted form.

        Raises:
            RemoteProtocolError: a field has the wrong type.
        """
        what = "OrderInfo"
        obj = as_object(value, what)
        raw = [get_int({"o": o}, "o", what) for o in get_list(obj, "o", what)]
        offsets = [raw[0]] + [raw[0] + r for r in raw[1:]] if raw else []

        def int_map(key: str) -> dict[int, int]:
            try:
                return {
                    int(k): get_int({"v": v}, "v", what)
                    for k, v in get_object(obj, key, what).items()
                }
            except ValueError:
                raise RemoteProtocolError(f"{what}.{key}: keys must be offsets") from None

        return cls(
            get_int(obj, "popTime", what),
            get_int(obj, "i", what),
            offsets,
            get_opt_str(obj, "a", what),
            get_int(obj, "cm", what),
            int_map("ot"),
            int_map("oc"),
            get_int(obj, "l", what),
        )


class OrderInfoManager:
    """FIFO POP state of every (topic, group, queue).

    Args:
        path: ``consumerOrderInfo.json``.
        clock: time source.
        alive: ``alive(topic, group)`` tells whether both still exist (for the cleanup).
    """

    def __init__(
        self, path: str, clock: Clock, alive: Callable[[str, str], bool] = lambda t, g: True
    ) -> None:
        self.clock = clock
        self.alive = alive
        self.table: dict[tuple[str, str], dict[int, OrderInfo]] = {}
        self.dirty = False
        self.file = MetadataFile(path, self.encode)

    # -- persistence ---------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The file's content (idle and orphaned entries are dropped first)."""
        now = self.clock.now_ms()
        out: dict[str, dict[str, Any]] = {}
        for (topic, group), queues in list(self.table.items()):
            if not self.alive(topic, group):
                del self.table[(topic, group)]
                continue
            for qid in [q for q, info in queues.items() if now - info.last_update > _IDLE_MS]:
                del queues[qid]
            if queues:
                out[f"{topic}@{group}"] = {str(q): i.to_json() for q, i in queues.items()}
        return fastjson.dumps({"table": out})

    def load(self) -> None:
        """Read the file.

        Raises:
            ConfigError: it exists but does not parse.
        """

        def decode(data: bytes) -> dict[tuple[str, str], dict[int, OrderInfo]]:
            what = "consumerOrderInfo"
            table: dict[tuple[str, str], dict[int, OrderInfo]] = {}
            for key, queues in get_object(parse_object(data, what), "table", what).items():
                topic, sep, group = str(key).rpartition("@")
                if not sep:
                    raise RemoteProtocolError(f"{what}: bad key {key!r}")
                try:
                    table[(topic, group)] = {
                        int(q): OrderInfo.from_json(v) for q, v in as_object(queues, what).items()
                    }
                except ValueError:
                    raise RemoteProtocolError(f"{what}: queue ids must be numbers") from None
            return table

        table = self.file.load(decode, "consumer order info")
        if table is not None:
            self.table = table

    def persist_if_dirty(self) -> None:
        """Schedule a write when something changed."""
        if self.dirty:
            self.dirty = False
            self.file.persist_soon()

    # -- state ---------------------------------------------------------------------------------

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        """The queue's current batch."""
        queues = self.table.get((topic, group))
        return queues.get(queue_id) if queues is not None else None

    def is_blocked(self, topic: str, group: str, queue_id: int, attempt_id: str | None) -> bool:
        """Whether a pop (with ``attempt_id``) must skip the queue."""
        info = self.get(topic, group, queue_id)
        return info is not None and info.blocks(attempt_id, self.clock.now_ms())

    def update(
        self,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
        attempt_id: str | None,
    ) -> OrderInfo:
        """Record a new batch; offsets also in the previous batch count one more delivery
        (none when the attempt id is the previous one's)."""
        queues = self.table.setdefault((topic, group), {})
        prev = queues.get(queue_id)
        counts: dict[int, int] = {}
        if prev is not None:
            if prev.attempt_id is not None and prev.attempt_id == attempt_id:
                counts = dict(prev.counts)
            else:
                before = set(prev.offsets)
                counts = {off: prev.counts.get(off, 0) + 1 for off in offsets if off in before}
        info = OrderInfo(
            pop_time, invisible_time, list(offsets), attempt_id, 0, {}, counts,
            self.clock.now_ms(),
        )  # fmt: skip
        queues[queue_id] = info
        self.dirty = True
        return info

    def commit_and_next(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int
    ) -> int:
        """Mark ``offset`` acked; the offset to commit, or ``ILLEGAL`` (not in the batch) or
        ``STALE`` (the handle is of an older batch)."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return offset + 1
        if not info.offsets:
            return ILLEGAL
        if pop_time != info.pop_time:
            return STALE
        try:
            index = info.offsets.index(offset)
        except ValueError:
            return ILLEGAL
        info.commit_bits |= 1 << index
        info.last_update = self.clock.now_ms()
        self.dirty = True
        return info.next_offset()

    def change_invisible(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, visible_at: int
    ) -> None:
        """Set when ``offset`` of the batch popped at ``pop_time`` may be handed out again."""
        info = self.get(topic, group, queue_id)
        if info is None or info.pop_time != pop_time:
            return
        info.next_visible[offset] = visible_at
        info.last_update = self.clock.now_ms()
        self.dirty = True

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        """Forget the queue's batch (server-side offset reset)."""
        queues = self.table.get((topic, group))
        if queues is not None and queues.pop(queue_id, None) is not None:
            self.dirty = True
