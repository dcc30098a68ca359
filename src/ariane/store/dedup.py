"""The idempotence window: which ``__ARIANE_DEDUP`` ids a broker stored lately, and where.

How it works (Ariane's own; RocketMQ has no broker-side dedup, its closest relative is
Kafka's idempotent producer): a producer that may send a message twice (a retried or
speculative Spark task, a micro-batch replayed after a driver crash) stamps it with a
deterministic id in the ``__ARIANE_DEDUP`` property. The broker asks :meth:`DedupWindow.seen`
before storing such a message; a hit means the message is already in the CommitLog, so it
is dropped and the sender is answered with the first copy's queue, queue offset and
physical offset. After a store the broker calls :meth:`DedupWindow.remember`. Messages
without the property never reach this module.

The window is bounded twice: at most ``max_entries`` ids (the oldest go first) and only ids
stored within ``max_age_ms`` of now (by store time). Ids are per topic: the same id sent to
two topics is two messages.

The window is a cache over the CommitLog, like the ConsumeQueues and the index: at start-up
:func:`rebuild` walks the CommitLog files that can hold records younger than ``max_age_ms``
and remembers every record carrying the property (a file without the property's bytes is
skipped by one ``mmap.find``, so stores that never see the property pay almost nothing). A
crash therefore loses no id whose message survived: the window holds exactly the ids of the
messages the recovered log holds. Retry and dead-letter topics are not deduplicated (a
message consumed and sent back twice keeps the property and must be stored twice), nor are
transactional messages (a rolled-back id may be sent again).

The ids are kept per put: one run (a plain tuple: the put's ids, queue, first queue offset,
record offsets, store time) per stored single or batch, oldest first, and per topic a dict
from id to its run, so a batch of 1,024 fresh ids is remembered with one ``dict.update`` and
no object per id; an entry is rebuilt from its run when ``seen`` finds it.

Pure and single-threaded: the broker calls it from its event loop, the store's loader before
any send.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import repeat
from operator import sub
from typing import TYPE_CHECKING, NamedTuple

from ariane.common.properties import DEDUP, REAL_TOPIC, TRANSACTION_PREPARED
from ariane.common.topics import DLQ_PREFIX, RETRY_PREFIX
from ariane.store.config import DEFAULT_DEDUP_WINDOW_MS, DEFAULT_DEDUP_WINDOW_SIZE
from ariane.store.disk import FileMap
from ariane.store.format import Decoded, DispatchRequest, EndOfSegment, check_record
from ariane.store.results import PutResult

if TYPE_CHECKING:
    from ariane.store.commit_log import CommitLog

__all__ = [
    "DEFAULT_DEDUP_WINDOW_MS",
    "DEFAULT_DEDUP_WINDOW_SIZE",
    "DedupEntry",
    "DedupWindow",
    "dedup_topic",
    "may_hold_ids",
    "rebuild",
    "remember_record",
]


_MARKER = (DEDUP + "\x01").encode()


class DedupEntry(NamedTuple):
    """Where the first copy of a message was stored."""

    queue_id: int
    queue_offset: int
    phys_offset: int
    size: int
    store_timestamp_ms: int


def dedup_topic(topic: str) -> bool:
    """Whether sends to ``topic`` are deduplicated (not retry and dead-letter topics)."""
    return not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


#: one put's ids in the window: (topic, ids, queue id, first queue offset, each message's
#: physical offset, the end of the last one, store time); message ``i`` of the run has queue
#: offset ``first + i`` and size ``offsets[i + 1] - offsets[i]`` (``end`` for the last). A
#: tuple of str, int and tuples of those: the garbage collector stops tracking it.
_Run = tuple[str, tuple[str, ...], int, int, tuple[int, ...], int, int]


class DedupWindow:
    """The ids stored lately (see the module docstring).

    Kept as runs, one per put (:data:`_Run`, oldest first), and per topic a dict from id to
    its run: remembering a batch of fresh ids is one ``dict.update`` whose values are the
    same run (no object per id), and the size bound drops ids from the oldest run in order.

    Args:
        max_entries: ids kept at most (``dedupWindowSize``); 0 turns deduplication off.
        max_age_ms: how long an id is kept after its store time (``dedupWindowMs``).
    """

    __slots__ = (
        "_count", "_head", "_ids", "_index", "_runs", "duplicates", "max_age_ms", "max_entries",
    )  # fmt: skip

    def __init__(
        self,
        max_entries: int = DEFAULT_DEDUP_WINDOW_SIZE,
        max_age_ms: int = DEFAULT_DEDUP_WINDOW_MS,
    ) -> None:
        self.max_entries = max_entries
        self.max_age_ms = max_age_ms
        self._runs: deque[_Run] = deque()
        self._ids: dict[str, dict[str, _Run]] = {}
        self._count = 0
        #: ids of the oldest run already dropped by the size bound
        self._head = 0
        #: the last run looked into by ``seen`` and its ids' positions
        self._index: tuple[_Run | None, dict[str, int]] = (None, {})
        #: messages found already stored (dropped by the broker) since start
        self.duplicates = 0

    def __len__(self) -> int:
        return self._count

    @property
    def enabled(self) -> bool:
        """False when ``max_entries`` is 0."""
        return self.max_entries > 0

    def seen(self, topic: str, dedup_id: str, now_ms: int) -> DedupEntry | None:
        """The first copy of (topic, id) if it is within the window, counting the hit."""
        self.expire(now_ms)
        ids = self._ids.get(topic)
        run = ids.get(dedup_id) if ids else None
        if run is None:
            return None
        self.duplicates += 1
        return _entry_of(run, self._position(run, dedup_id))

    def _position(self, run: _Run, dedup_id: str) -> int:
        cached, positions = self._index
        if cached is not run:
            positions = {ident: i for i, ident in enumerate(run[1])}
            self._index = (run, positions)
        return positions[dedup_id]

    def items(self) -> list[tuple[tuple[str, str], tuple[int, int, int, int, int]]]:
        """Every ((topic, id), (queue id, queue offset, physical offset, size, store time))
        in the window, oldest first (for tests and tools)."""
        out = []
        head = self._head
        for run in self._runs:
            out += [
                ((run[0], run[1][i]), tuple(_entry_of(run, i))) for i in range(head, len(run[1]))
            ]
            head = 0
        return out  # type: ignore[return-value]

    def remember(self, topic: str, dedup_id: str, entry: DedupEntry) -> None:
        """Record a stored message (a known id keeps its first copy)."""
        if self.max_entries <= 0:
            return
        ids = self._ids.get(topic)
        if ids is not None and dedup_id in ids:
            return
        q, qoff, phys, size, stamp = entry
        self._add((topic, (dedup_id,), q, qoff, (phys,), phys + size, stamp))

    def _add(self, run: _Run) -> None:
        """Append ``run`` (its ids new and distinct), then drop the oldest ids over the bound."""
        if not run[1]:  # every run in the window holds at least one id
            return
        ids = self._ids.get(run[0])
        if ids is None:
            ids = self._ids[run[0]] = {}
        ids.update(zip(run[1], repeat(run)))
        self._runs.append(run)
        self._count += len(run[1])
        excess = self._count - self.max_entries
        while excess > 0:
            excess -= self._drop_oldest(excess)

    def _drop_oldest(self, most: int) -> int:
        """Forget up to ``most`` of the oldest run's ids (all that are left when ``most`` is
        larger); returns how many."""
        run = self._runs[0]
        head = self._head
        stop = min(len(run[1]), head + most)
        # pop, not del: a caller that wrongly said "fresh" costs a stale id, never a KeyError
        ids = self._ids.get(run[0], {})
        deque(map(ids.pop, run[1][head:stop], repeat(None)), 0)
        if not ids:
            self._ids.pop(run[0], None)
        if stop == len(run[1]):
            self._runs.popleft()
            self._head = 0
        else:
            self._head = stop
        self._count -= stop - head
        return stop - head

    def any_seen(self, topic: str, dedup_ids: Sequence[str], now_ms: int) -> bool:
        """Whether some id of ``dedup_ids`` (for ``topic``) is within the window, counting
        nothing (a batch's check in one C-level pass; the caller then asks :meth:`seen` per
        id when one is)."""
        self.expire(now_ms)
        ids = self._ids.get(topic)
        if not ids:
            return False
        return any(map(ids.__contains__, dedup_ids))

    def remember_put(
        self,
        topic: str,
        dedup_ids: Sequence[str | None],
        queue_id: int,
        result: PutResult,
        fresh: bool = False,
    ) -> None:
        """Remember the messages of one put (a single or a batch stored in ``queue_id``), id
        ``i`` for the put's message ``i``; ``None``: that message has no id. Nothing when the
        put did not store exactly those messages. ``fresh``: every id is known new and
        distinct (the whole put is then one run, added without checking them again)."""
        if self.max_entries <= 0 or result.msg_num != len(dedup_ids):
            return
        offsets = result.offsets or (result.wrote_offset,)
        end = result.wrote_offset + result.wrote_bytes
        first = result.logics_offset
        stamp = result.store_timestamp_ms
        if not fresh and None not in dedup_ids:
            known = self._ids.get(topic, {})
            fresh = len(set(dedup_ids)) == len(dedup_ids) and not any(
                map(known.__contains__, dedup_ids)
            )
        if fresh:
            ids = tuple(dedup_ids)
            self._add((topic, ids, queue_id, first, tuple(offsets), end, stamp))  # type: ignore[arg-type]
            return
        sizes = list(map(sub, (*offsets[1 : len(dedup_ids)], end), offsets))
        for i, dedup_id in enumerate(dedup_ids):
            if dedup_id is not None:
                entry = DedupEntry(queue_id, first + i, offsets[i], sizes[i], stamp)
                self.remember(topic, dedup_id, entry)

    def expire(self, now_ms: int) -> None:
        """Forget ids stored more than ``max_age_ms`` before ``now_ms``."""
        runs = self._runs
        cutoff = now_ms - self.max_age_ms
        while runs and runs[0][6] < cutoff:
            self._drop_oldest(len(runs[0][1]))

    def clear(self) -> None:
        """Forget every id (before a rebuild)."""
        self._runs.clear()
        self._ids.clear()
        self._count = self._head = 0
        self._index = (None, {})


def _entry_of(run: _Run, i: int) -> DedupEntry:
    """The ``DedupEntry`` of message ``i`` of ``run``."""
    offsets = run[4]
    end = offsets[i + 1] if i + 1 < len(offsets) else run[5]
    return DedupEntry(run[2], run[3] + i, offsets[i], end - offsets[i], run[6])


def _first_file_to_scan(commit_log: CommitLog, cutoff_ms: int) -> int:
    """Index of the newest file whose first record was stored at or before ``cutoff_ms``
    (records after it are younger or in it); 0 when every file is younger."""
    files = commit_log.queue.files
    for index in range(len(files) - 1, -1, -1):
        res = check_record(
            files[index].mm, 0, commit_log.file_size, check_crc=False, want_dispatch=False,
            want_route=True,
        )  # fmt: skip
        if isinstance(res, Decoded) and res.route is not None and res.route[3] <= cutoff_ms:
            return index
    return 0


def rebuild(window: DedupWindow, commit_log: CommitLog, end_offset: int, now_ms: int) -> int:
    """Refill ``window`` from the CommitLog records below ``end_offset``; returns the ids
    remembered. Records that do not decode end the scan of their file."""
    window.clear()
    if not window.enabled:
        return 0
    files = commit_log.queue.files
    size = commit_log.file_size
    cutoff = now_ms - window.max_age_ms
    for mf in files[_first_file_to_scan(commit_log, cutoff) :]:
        limit = min(size, end_offset - mf.file_from_offset)
        if limit <= 0:
            break
        if not may_hold_ids(mf.mm, limit):
            continue
        _scan_file(window, mf.mm, mf.file_from_offset, limit, cutoff)
    window.expire(now_ms)
    return len(window)


def may_hold_ids(buf: FileMap, limit: int) -> bool:
    """Whether the first ``limit`` bytes of ``buf`` may hold a record with an id (one
    ``find``: a file without the property's bytes needs no decoding)."""
    return buf.find(_MARKER, 0, limit) >= 0


def remember_record(window: DedupWindow, req: DispatchRequest, cutoff_ms: int) -> None:
    """Put the id of the stored record ``req`` in ``window`` if it has one that counts
    (stored at or after ``cutoff_ms``, not a retry, dead-letter or prepared message)."""
    if req.properties is None or req.store_timestamp_ms < cutoff_ms:
        return
    dedup_id = req.properties.get(DEDUP)
    if dedup_id is None or req.properties.get(TRANSACTION_PREPARED) == "true":
        return
    topic = req.properties.get(REAL_TOPIC) or req.topic
    if not dedup_topic(topic) or not dedup_topic(req.topic):
        return
    window.remember(
        topic,
        dedup_id,
        DedupEntry(
            req.queue_id, req.consume_queue_offset, req.commit_log_offset, req.msg_size,
            req.store_timestamp_ms,
        ),
    )  # fmt: skip


def _scan_file(window: DedupWindow, buf: object, base: int, limit: int, cutoff: int) -> None:
    pos = 0
    while pos < limit:
        res = check_record(buf, pos, limit, check_crc=False, want_dispatch=True)  # type: ignore[arg-type]
        if isinstance(res, EndOfSegment) or not isinstance(res, Decoded):
            return
        req = res.dispatch
        pos += res.size
        if req is not None:
            remember_record(window, req._replace(commit_log_offset=base + pos - res.size), cutoff)
