"""The idempotence window of a DLedger node (``ariane.store.dedup`` on a Raft log).

How it works: only the writable master consults its window (:class:`MasterWindow` finds
nothing on a follower, a candidate or a leader not promoted yet), and a node refills it each
time it becomes the master (:meth:`DLedgerMessageStore.promote`), from its own log: a leader
takes writes only once everything in its log is committed, so at that moment the log holds
exactly the committed entries, and among them every message the group ever acknowledged (a
Raft leader holds every committed entry). A send retried after a failover therefore finds
the id of its first copy if that copy is in the new leader's log: every committed copy is,
and an uncommitted copy the new leader holds is committed before it takes writes. A copy
the new leader does not hold can never be committed (it is cut from the old leader's log
when that node follows again), so the retry is stored once. Between two promotions the window adds what this
leader appends (remembered at once, answered once committed: ``wait_committed``). Entries of
an old master/slave CommitLog (a store upgraded to DLedger) are not scanned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ariane.dledger.format import ENTRY_HEADER_SIZE
from ariane.store.dedup import DedupEntry, DedupWindow, may_hold_ids, remember_record

if TYPE_CHECKING:
    from ariane.dledger.commitlog import DLedgerCommitLog

__all__ = ["MasterWindow", "rebuild_from_log"]


class MasterWindow(DedupWindow):
    """A window that finds ids only while ``is_master()`` says so.

    Args:
        is_master: True while this node is the group's writable master.
        max_entries: as :class:`DedupWindow`.
        max_age_ms: as :class:`DedupWindow`.
    """

    __slots__ = ("is_master",)

    def __init__(self, is_master: Callable[[], bool], max_entries: int, max_age_ms: int) -> None:
        super().__init__(max_entries, max_age_ms)
        self.is_master = is_master

    def seen(self, topic: str, dedup_id: str, now_ms: int) -> DedupEntry | None:
        """The first copy of (topic, id), on the master only (a follower's window may name
        entries a new leader cut since)."""
        if not self.is_master():
            return None
        return super().seen(topic, dedup_id, now_ms)

    def any_seen(self, topic: str, dedup_ids: Sequence[str], now_ms: int) -> bool:
        """As :meth:`seen`: nothing is found off the master."""
        if not self.is_master():
            return False
        return super().any_seen(topic, dedup_ids, now_ms)


#: entries decoded per hold of the log's lock while refilling (about 50 ms of work)
CHUNK_ENTRIES = 4096


def rebuild_from_log(
    window: DedupWindow,
    log: DLedgerCommitLog,
    now_ms: int,
    still_leading: Callable[[], bool] = lambda: True,
) -> bool:
    """Refill ``window`` from the committed entries of ``log`` stored within its age. The
    log's lock is taken per data file (to skip, by one search, a file without the property's
    bytes) and per :data:`CHUNK_ENTRIES` entries, so Raft keeps running meanwhile; the refill
    stops and returns False as soon as ``still_leading()`` (asked under the lock) is False
    (the log may be cut after that)."""
    window.clear()
    if not window.enabled:
        return True
    cutoff = now_ms - window.max_age_ms
    with log.put_lock:
        if not still_leading():
            return False
        starts = [mf.file_from_offset for mf in log.files.data.files]
        end_pos = log.committed_pos
    for k in range(_first_young_file(log, starts, cutoff), len(starts)):
        with log.put_lock:
            if not still_leading():
                return False
            mf = log.files.data.find_mapped_file_by_offset(starts[k])
            if mf is None:  # deleted meanwhile
                continue
            limit = min(mf.file_size, end_pos - mf.file_from_offset)
            if limit <= 0 or not may_hold_ids(mf.mm, limit):
                continue
            first = log.index_at(starts[k] + ENTRY_HEADER_SIZE)
            last = log.index_at(starts[k] + limit + ENTRY_HEADER_SIZE) - 1
        for lo in range(first, last + 1, CHUNK_ENTRIES):
            with log.put_lock:
                if not still_leading():
                    return False
                for req in log.records(lo, min(last, lo + CHUNK_ENTRIES - 1)):
                    remember_record(window, req, cutoff)
    window.expire(now_ms)
    return True


def _first_young_file(log: DLedgerCommitLog, starts: list[int], cutoff: int) -> int:
    """Index in ``starts`` of the newest data file whose first record was stored at or
    before ``cutoff`` (younger records are in it or after it); 0 when all are younger."""
    for k in range(len(starts) - 1, -1, -1):
        with log.put_lock:
            first = log.index_at(starts[k] + ENTRY_HEADER_SIZE)
            head = next(log.records(first, min(log.files.end, first + 16)), None)
        if head is not None and head.store_timestamp_ms <= cutoff:
            return k
    return 0
