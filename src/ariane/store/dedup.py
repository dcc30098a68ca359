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

Pure and single-threaded: the broker calls it from its event loop, the store's loader before
any send.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
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


class DedupWindow:
    """The ids stored lately (see the module docstring).

    Args:
        max_entries: ids kept at most (``dedupWindowSize``); 0 turns deduplication off.
        max_age_ms: how long an id is kept after its store time (``dedupWindowMs``).
    """

    __slots__ = ("_entries", "duplicates", "max_age_ms", "max_entries")

    def __init__(
        self,
        max_entries: int = DEFAULT_DEDUP_WINDOW_SIZE,
        max_age_ms: int = DEFAULT_DEDUP_WINDOW_MS,
    ) -> None:
        self.max_entries = max_entries
        self.max_age_ms = max_age_ms
        # plain tuples of ints, not DedupEntry objects: the garbage collector stops tracking
        # an exact tuple of ints after one pass, so a full window (200,000 ids) adds no work
        # to every later collection (a NamedTuple instance stays tracked)
        self._entries: OrderedDict[tuple[str, str], tuple[int, int, int, int, int]] = OrderedDict()
        #: messages found already stored (dropped by the broker) since start
        self.duplicates = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def enabled(self) -> bool:
        """False when ``max_entries`` is 0."""
        return self.max_entries > 0

    def seen(self, topic: str, dedup_id: str, now_ms: int) -> DedupEntry | None:
        """The first copy of (topic, id) if it is within the window, counting the hit."""
        self.expire(now_ms)
        entry = self._entries.get((topic, dedup_id))
        if entry is None:
            return None
        self.duplicates += 1
        return DedupEntry._make(entry)

    def remember(self, topic: str, dedup_id: str, entry: DedupEntry) -> None:
        """Record a stored message (a known id keeps its first copy)."""
        if self.max_entries <= 0:
            return
        entries = self._entries
        key = (topic, dedup_id)
        if key in entries:
            return
        entries[key] = tuple.__new__(tuple, entry)
        while len(entries) > self.max_entries:
            entries.popitem(last=False)

    def any_seen(self, topic: str, dedup_ids: Sequence[str], now_ms: int) -> bool:
        """Whether some id of ``dedup_ids`` (for ``topic``) is within the window, counting
        nothing (a batch's check in one C-level pass; the caller then asks :meth:`seen` per
        id when one is)."""
        self.expire(now_ms)
        entries = self._entries
        if not entries:
            return False
        return any(map(entries.__contains__, zip(repeat(topic), dedup_ids)))

    def remember_many(
        self,
        topic: str,
        dedup_ids: Sequence[str],
        stored: Iterable[tuple[int, int, int, int, int]],
        fresh: bool = False,
    ) -> None:
        """:meth:`remember` for each id of ``dedup_ids`` and the fields of its ``DedupEntry``
        in ``stored`` (plain tuples), in one C-level update when every id is new and
        distinct (``fresh``: the caller has just checked that they are)."""
        if self.max_entries <= 0:
            return
        entries = self._entries
        keys = list(zip(repeat(topic), dedup_ids))
        if not fresh and (len(set(keys)) != len(keys) or any(map(entries.__contains__, keys))):
            for (_, dedup_id), fields in zip(keys, stored, strict=True):
                self.remember(topic, dedup_id, DedupEntry._make(fields))
            return
        entries.update(zip(keys, stored, strict=True))
        popitem = entries.popitem
        for _ in range(len(entries) - self.max_entries):
            popitem(last=False)

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
        distinct (see :meth:`remember_many`)."""
        if self.max_entries <= 0 or result.msg_num != len(dedup_ids):
            return
        offsets = result.offsets or (result.wrote_offset,)
        end = result.wrote_offset + result.wrote_bytes
        n = len(dedup_ids)
        sizes = list(map(sub, (*offsets[1:n], end), offsets))
        first = result.logics_offset
        stamp = result.store_timestamp_ms
        if None not in dedup_ids:  # every message has an id: one update
            qoffs = range(first, first + n)
            fields = zip(repeat(queue_id), qoffs, offsets, sizes, repeat(stamp))
            self.remember_many(topic, dedup_ids, fields, fresh)  # type: ignore[arg-type]
            return
        for i, dedup_id in enumerate(dedup_ids):
            if dedup_id is not None:
                entry = DedupEntry(queue_id, first + i, offsets[i], sizes[i], stamp)
                self.remember(topic, dedup_id, entry)

    def expire(self, now_ms: int) -> None:
        """Forget ids stored more than ``max_age_ms`` before ``now_ms``."""
        entries = self._entries
        cutoff = now_ms - self.max_age_ms
        while entries:
            key = next(iter(entries))
            if entries[key][4] >= cutoff:  # DedupEntry.store_timestamp_ms
                return
            del entries[key]

    def clear(self) -> None:
        """Forget every id (before a rebuild)."""
        self._entries.clear()


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
