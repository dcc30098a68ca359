"""Repairs of the index after a power cut (no RocketMQ counterpart: its recovery rebuilds).

How it works: the index checkpoint's time T promises every key of records stored before T
(``IndexService.flush``, see :mod:`ariane.store.index_file`). Entries put at or after T, the
slots pointing at them and a file's header are separate pages that a power cut may keep or
lose one by one, so after an abnormal exit a kept file can hold a slot or a prevIndex pointing
at a lost (all-zero) entry, cutting older, intact keys off their chain, or a slot missing a
kept entry. ``relink_torn`` checks the files that may hold such entries (``relink_if_torn``:
the entries from T's second on, found by bisection, and the slot table) and relinks a torn
file from all its entries; a lost entry becomes a dead one (in no chain). The recovery then
re-checks the records stored at or after T below the index's end offset and puts back the
keys no file holds (``IndexService.recheck_keys``), starting from ``newest_before``: the
newest indexed record stored before T.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ariane.store.format import INDEX_HEADER_SIZE
from ariane.store.index_file import IndexFile, IndexService
from ariane.store.vector import INDEX_ENTRY_DTYPE, chain_links

__all__ = ["DEAD_PREV", "newest_before", "relink_if_torn", "relink_torn", "written_mask"]

logger = logging.getLogger(__name__)

#: prevIndex of a dead entry (one lost to a power cut, left out of every chain)
DEAD_PREV = -1


def newest_before(index: IndexService, stored_before: Callable[[int], bool]) -> int | None:
    """CommitLog offset of the newest indexed record for which ``stored_before(phys)``
    holds (None when there is none); ``stored_before`` must hold for a prefix of the
    entries in put order (store time below a mark; a lost entry never holds), so each
    file is bisected."""

    def holds(f: IndexFile, number: int) -> bool:
        phys = f.entry_phy(number)
        return phys is not None and stored_before(phys)

    for f in reversed(index.files):
        if f.index_count <= 1 or not holds(f, 1):
            continue
        lo, hi = 1, f.index_count  # holds at lo, not at hi (or hi is the end)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if holds(f, mid):
                lo = mid
            else:
                hi = mid
        return f.entry_phy(lo)
    return None


def relink_torn(index: IndexService, mark_ms: int) -> int:
    """``relink_if_torn`` for every file that may hold entries put at or after
    ``mark_ms`` (not those followed by a file begun before it); returns how many were."""
    files = index.files
    torn = 0
    for i, f in enumerate(files):
        if i + 1 < len(files) and files[i + 1].begin_timestamp < mark_ms:
            continue
        torn += relink_if_torn(f, mark_ms)
    return torn


def relink_if_torn(f: IndexFile, mark_ms: int) -> bool:
    """After a power cut, relink the slot chains if the entries put at or after
    ``mark_ms`` (the index checkpoint) reached the disk only in part; True if it did.

    Entries put before the mark were forced (``IndexService.flush``), but later ones,
    the slots pointing at them and the header are separate pages that the power may have
    kept or lost one by one: a slot or a prevIndex can point at a lost entry (cutting
    the chain of older, intact ones off), or a slot can miss a kept entry. The check
    looks at the suspect entries only (those from the mark's second on, found by
    bisection: before them every entry is intact) and the slot table; only a torn file
    is relinked, from all its entries. A lost entry (all zeros) becomes a dead one: in
    no chain, prevIndex -1, its predecessor's offset and time (so that the entries
    stay ordered for the bisections); its key is put back by
    ``IndexService.recheck_keys``.
    """
    count = f.index_count
    if count <= 1:
        return False
    mm = f.mf.mm
    entries = np.frombuffer(mm, dtype=INDEX_ENTRY_DTYPE, count=count, offset=f.entries_at)
    table = np.frombuffer(mm, dtype=">i4", count=f.slot_num, offset=INDEX_HEADER_SIZE)
    try:
        if not _is_torn(f, entries, table, _first_suspect(f, entries, mark_ms)):
            return False
        body = entries[1:]
        written = written_mask(body)
        lost = np.flatnonzero(~written) + 1
        if len(lost):  # dead entries: in no chain, their neighbour's phys and time
            ahead = np.maximum.accumulate(np.where(written, np.arange(1, count), 0))
            near = ahead[lost - 1]
            entries["phys"][lost] = np.where(near > 0, entries["phys"][near], f.begin_phy_offset)
            entries["diff"][lost] = np.where(near > 0, entries["diff"][near], 0)
            entries["hash"][lost] = 0
            entries["prev"][lost] = DEAD_PREV
        live = np.flatnonzero(written & (body["prev"] != DEAD_PREV)) + 1
        slots = entries["hash"][live].astype(np.int64) % f.slot_num
        prev, heads, head_entries = chain_links(
            slots, live.astype(np.int64), np.zeros(len(live), dtype=np.int64)
        )
        entries["prev"][live] = prev
        table[:] = 0
        table[heads] = head_entries
        f.hash_slot_count = len(heads)
    finally:
        del entries, table  # release the exports so the map can be closed
    f.dirty = True
    f.write_header()
    logger.warning("%s: relinked its slot chains (pages torn by a power cut)", f.path)
    return True


def _first_suspect(f: IndexFile, entries: npt.NDArray[np.void], mark_ms: int) -> int:
    """The first entry that may have been put at or after ``mark_ms``: the entries
    before it are written and from seconds before the mark's (a prefix, in put order)."""
    begin = f.begin_timestamp
    second = (mark_ms - begin) // 1000 if begin > 0 else 0  # no begin: no diff either

    def before(number: int) -> bool:
        one = entries[number : number + 1]
        return bool(written_mask(one)[0]) and int(one["diff"][0]) < second

    lo, hi = 0, len(entries)  # before() holds up to lo (0: none), not at hi (or the end)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if before(mid):
            lo = mid
        else:
            hi = mid
    return hi


def _is_torn(
    f: IndexFile, entries: npt.NDArray[np.void], table: npt.NDArray[np.int32], first: int
) -> bool:
    """True when the suspect entries (from ``first``) or the slots are inconsistent."""
    count = len(entries)
    tail = entries[first:]
    if not written_mask(tail).all():
        return True  # a lost entry under the header's count
    live = tail["prev"] != DEAD_PREV
    numbers = np.arange(first, count, dtype=np.int64)[live]
    tail = tail[live]
    slot_num = f.slot_num
    slots = tail["hash"].astype(np.int64) % slot_num
    heads = table.astype(np.int64)
    in_tail = np.zeros(slot_num, dtype=bool)
    in_tail[slots] = True
    if np.any((heads >= first) & ~in_tail):
        return True  # a slot pointing past the intact entries with none of its own there
    if not len(tail):
        return False
    order = np.argsort(slots, kind="stable")
    s_sorted, e_sorted = slots[order], numbers[order]
    prev = tail["prev"].astype(np.int64)[order]
    first_of = np.ones(len(order), dtype=bool)
    first_of[1:] = s_sorted[1:] != s_sorted[:-1]
    last_of = np.ones(len(order), dtype=bool)
    last_of[:-1] = first_of[1:]
    if np.any(prev[1:][~first_of[1:]] != e_sorted[:-1][~first_of[1:]]):
        return True  # a chain inside the suspect entries skips or invents an entry
    if np.any(heads[s_sorted[last_of]] != e_sorted[last_of]):
        return True  # a slot missing its newest entry
    older = prev[first_of]
    if np.any((older < 0) | (older >= first)):
        return True
    linked = older[older > 0]
    older_slots = entries["hash"][linked].astype(np.int64) % slot_num
    return bool(
        np.any(older_slots != s_sorted[first_of][older > 0])
        or np.any(entries["prev"][linked] == DEAD_PREV)
    )


def written_mask(entries: npt.NDArray[np.void]) -> npt.NDArray[np.bool_]:
    """Which entries were written (a lost or never written entry is all zeros)."""
    written: npt.NDArray[np.bool_] = (
        (entries["hash"] != 0) | (entries["phys"] != 0) | (entries["diff"] != 0)
        | (entries["prev"] != 0)
    )  # fmt: skip
    return written
