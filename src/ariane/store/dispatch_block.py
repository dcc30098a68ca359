"""The dispatch requests of a run of records written at once, as columns.

How it works. :meth:`CommitLog.put_block` (the timer wheel's burst writes, see
:mod:`ariane.store.record_block`) writes thousands of records per hold of the put lock. Instead
of one :class:`~ariane.store.format.DispatchRequest` per record it queues one
:class:`DispatchBlock` per run: the same fields as columns (one list per field, one store time
for the run, no properties), which is what the reput thread works on anyway
(``Dispatcher._dispatch_columns``, ``IndexService.build_index_columns``, the arriving listener's
grouping). A block holds a handful of objects instead of one tracked tuple per record, so a
burst of 100,000 copies leaves ~50 blocks, not 100,000 requests, for the writer to build and
the garbage collector to walk. :meth:`DispatchBlock.requests` gives the requests the block
stands for, exactly those ``write_one`` would have queued but for the properties (None).
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from itertools import accumulate, compress
from typing import Any, TypeAlias

from ariane.store.format import DispatchRequest

__all__ = ["DispatchBlock", "Pending", "drop_topics"]

_new_request = tuple.__new__


@dataclass(slots=True)
class DispatchBlock:
    """Dispatch requests of consecutive records (physical order) written with one store time,
    field by field; every list has one entry per record."""

    topics: list[str]
    queue_ids: list[int]
    phys: list[int]
    sizes: list[int]
    tags_codes: list[int]
    store_timestamp_ms: int
    queue_offsets: list[int]
    keys: list[str | None]
    uniq_keys: list[str | None]
    sys_flags: list[int]

    def __len__(self) -> int:
        return len(self.phys)

    @property
    def commit_log_offset(self) -> int:
        """Physical offset of the first record."""
        return self.phys[0]

    @property
    def end_offset(self) -> int:
        """Physical offset just past the last record."""
        return self.phys[-1] + self.sizes[-1]

    def columns(self) -> tuple[tuple[Any, ...], ...]:
        """The requests as ``tuple(zip(*requests))`` would give them."""
        n = len(self.phys)
        return (
            tuple(self.topics), tuple(self.queue_ids), tuple(self.phys), tuple(self.sizes),
            tuple(self.tags_codes), (self.store_timestamp_ms,) * n, tuple(self.queue_offsets),
            tuple(self.keys), tuple(self.uniq_keys), tuple(self.sys_flags), (None,) * n,
        )  # fmt: skip

    def requests(self) -> list[DispatchRequest]:
        """The one-per-record requests this block stands for (properties None)."""
        return [_new_request(DispatchRequest, row) for row in zip(*self.columns(), strict=True)]

    def visible(self, limit: int) -> int:
        """How many of the first records end at or below ``limit``."""
        if self.end_offset <= limit:
            return len(self.phys)
        ends = list(accumulate(self.sizes, initial=self.phys[0]))[1:]
        return bisect.bisect_right(ends, limit)

    def split(self, count: int) -> tuple[DispatchBlock, DispatchBlock]:
        """The first ``count`` records and the rest, as two blocks."""
        return self._rows(slice(0, count)), self._rows(slice(count, None))

    def without_topics(self, topics: set[str]) -> DispatchBlock | None:
        """This block without the records of ``topics`` (None when none is left)."""
        kept = [t not in topics for t in self.topics]
        if all(kept):
            return self
        if not any(kept):
            return None
        return self._with([list(compress(col, kept)) for col in self._lists()])

    def _lists(self) -> tuple[list[Any], ...]:
        return (
            self.topics, self.queue_ids, self.phys, self.sizes, self.tags_codes,
            self.queue_offsets, self.keys, self.uniq_keys, self.sys_flags,
        )  # fmt: skip

    def _rows(self, rows: slice) -> DispatchBlock:
        return self._with([col[rows] for col in self._lists()])

    def _with(self, cols: list[list[Any]]) -> DispatchBlock:
        """A block of the same store time with ``cols`` in the order of :meth:`_lists`."""
        topics, queue_ids, phys, sizes, tags, offsets, keys, uniq, flags = cols
        return DispatchBlock(
            topics, queue_ids, phys, sizes, tags, self.store_timestamp_ms, offsets, keys, uniq,
            flags,
        )  # fmt: skip


#: What the writer queues for the reput thread: one request, or a block of them.
Pending: TypeAlias = DispatchRequest | DispatchBlock


def drop_topics(pending: deque[Pending], topics: set[str]) -> None:
    """Remove the requests of ``topics`` from ``pending`` (blocks keep their other records)."""
    kept: list[Pending] = []
    changed = False
    for r in pending:
        rest: Pending | None = r.without_topics(topics) if type(r) is DispatchBlock else r
        if type(rest) is DispatchRequest and rest.topic in topics:
            rest = None
        changed |= rest is not r
        if rest is not None:
            kept.append(rest)
    if changed:
        pending.clear()
        pending.extend(kept)
