"""One logical queue's index into the CommitLog (RocketMQ ``ConsumeQueue``).

How it works: entry n (20 bytes: physical offset, size, tagsCode) lives at byte n*20 of the
queue's files in ``consumequeue/{topic}/{queueId}/``. Entries are appended by the dispatch
thread only, in order; writes are idempotent (an entry whose physical offset is not beyond
``max_physic_offset`` is skipped) so recovery can re-dispatch freely. A queue whose first file
starts mid-way (older files deleted) is padded with blank entries ``(0, 0x7FFFFFFF, 0)``.
Readers take one copy of the entries they need (``get_entries``) and never see entries past
the write position.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ariane.store.disk import OS_DISK, Disk
from ariane.store.format import CQ_BLANK_ENTRY, CQ_UNIT, CQ_UNIT_SIZE, DispatchRequest
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import LoadReport, MappedFileQueue
from ariane.store.vector import I64, consume_queue_units

__all__ = ["ConsumeQueue"]

logger = logging.getLogger(__name__)

_MAX_BLANK_FILL = 0x7FFFFFFF
_CQ_DTYPE = np.dtype([("off", ">i8"), ("size", ">i4"), ("tags", ">i8")])
#: Entries compared with their records at each end of a queue when loading.
_CHECK_EACH_END = 8


class ConsumeQueue:
    """The ConsumeQueue of one (topic, queue id).

    Args:
        topic: the topic.
        queue_id: the queue id.
        root: the ``consumequeue`` directory.
        file_size: bytes per file (a multiple of 20).
        disk: the file system.
    """

    def __init__(
        self, topic: str, queue_id: int, root: str, file_size: int, disk: Disk = OS_DISK
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.store_path = os.path.join(root, topic, str(queue_id))
        self.queue = MappedFileQueue(self.store_path, file_size, disk=disk)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.dirty = False

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id})"

    # -- loading and recovery ------------------------------------------------------------
    def load(self) -> LoadReport:
        """Map the files (positions are fixed by ``recover``)."""
        return self.queue.load()

    def recover(self) -> None:
        """Find the last valid entry (scanning from the third-last file) and cut after it."""
        self.apply_recovery(self.scan_recovery())

    def scan_recovery(self) -> _RecoveryPlan | None:
        """Where the valid entries end (read-only; ``apply_recovery`` acts on it)."""
        files = self.queue.files
        if not files:
            return None
        index = max(0, len(files) - 3)
        process_offset = files[index].file_from_offset
        max_phys = -1
        zero: tuple[MappedFile, int] | None = None
        while index < len(files):
            mf = files[index]
            valid_bytes, last = _valid_prefix(mf, self.file_size)
            if last >= 0:
                max_phys = last
            process_offset = mf.file_from_offset + valid_bytes
            if valid_bytes != self.file_size:
                if mf.nonzero_end(valid_bytes) > valid_bytes:
                    zero = (mf, valid_bytes)
                break
            index += 1
        return _RecoveryPlan(process_offset, max_phys, zero)

    def apply_recovery(self, plan: _RecoveryPlan | None) -> None:
        """Cut the queue where ``plan`` says its valid entries end."""
        if plan is None:
            return
        if plan.zero is not None:
            # Stale or torn bytes after the end: zero them so they are never read as
            # entries once new entries are appended before them.
            mf, valid_bytes = plan.zero
            mf.mm[valid_bytes:] = bytes(self.file_size - valid_bytes)
            self.dirty = True
            mf.flushed_position = 0
        self.max_physic_offset = max(plan.max_phys, self.max_physic_offset)
        self.queue.truncate_dirty_files(plan.process_offset)
        self.queue.flushed_where = plan.process_offset
        if plan.max_phys < 0:
            self.max_physic_offset = self._scan_last_phys()

    def entries_problem(
        self,
        plan: _RecoveryPlan | None,
        record_at: Callable[[int], DispatchRequest | None],
        start: int,
        end: int,
    ) -> str | None:
        """Why the valid entries are not this queue's (None when they are): physical offsets
        that do not grow, or, for the newest and the oldest entries below the CommitLog's
        valid ``end`` and not below its ``start`` (deleted files), a record at the offset that
        is not the entry's (size, queue, queue offset, topic). ``record_at(offset)`` decodes
        the record there (None if there is none).

        Entries at or past ``end`` are not checked: a crash leaves them legitimately (the
        queue was flushed before the log) and recovery cuts them.
        """
        if plan is None:
            return None
        units: list[tuple[int, int, int]] = []  # (queue offset, phys, size), valid only
        prev = -1
        for mf in self.queue.files:
            if mf.file_from_offset >= plan.process_offset:
                break
            stop = min(self.file_size, plan.process_offset - mf.file_from_offset)
            table = np.frombuffer(mf.mm[: stop - stop % CQ_UNIT_SIZE], dtype=_CQ_DTYPE)
            real = (table["size"] > 0) & ~((table["off"] == 0) & (table["size"] == _MAX_BLANK_FILL))
            offs = table["off"][real]
            if len(offs):
                if offs[0] <= prev or (len(offs) > 1 and not bool((np.diff(offs) > 0).all())):
                    return f"{mf.path}: physical offsets of its entries do not grow"
                prev = int(offs[-1])
                first_unit = mf.file_from_offset // CQ_UNIT_SIZE
                rows = np.flatnonzero(real)
                for i in (*rows[:_CHECK_EACH_END].tolist(), *rows[-_CHECK_EACH_END:].tolist()):
                    units.append((first_unit + i, int(table["off"][i]), int(table["size"][i])))
        checked = units[:_CHECK_EACH_END] + units[-_CHECK_EACH_END:]
        for qoff, phys, size in checked:
            if phys + size > end or phys < start:
                continue
            problem = self._record_problem(record_at(phys), qoff, phys, size)
            if problem is not None:
                return f"{self.store_path}: entry {qoff} {problem}"
        return None

    def _record_problem(
        self, d: DispatchRequest | None, qoff: int, phys: int, size: int
    ) -> str | None:
        if d is None:
            return f"points at {phys}, where no record starts"
        if (d.msg_size, d.topic, d.queue_id, d.consume_queue_offset) != (
            size, self.topic, self.queue_id, qoff,
        ):  # fmt: skip
            return (
                f"(offset {phys}, size {size}) points at a record of {d.topic!r} queue "
                f"{d.queue_id} offset {d.consume_queue_offset} size {d.msg_size}"
            )
        return None

    def _scan_last_phys(self) -> int:
        """Largest real physical offset in the queue (-1 if none), scanning back from the end."""
        for mf in reversed(self.queue.files):
            data = mf.mm[: mf.wrote_position]
            for i in range(len(data) - CQ_UNIT_SIZE, -1, -CQ_UNIT_SIZE):
                off, size, _ = CQ_UNIT.unpack_from(data, i)
                if size > 0 and not (off == 0 and size == _MAX_BLANK_FILL):
                    return int(off)
        return -1

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop every entry pointing at or beyond ``phy_offset`` (``truncateDirtyLogicFiles``)."""
        while True:
            mf = self.queue.last
            if mf is None:
                break
            data = mf.mm[: mf.wrote_position]
            keep = 0
            first_bad = False
            for i, (off, size, _tags) in enumerate(CQ_UNIT.iter_unpack(data)):
                if i == 0 and off >= phy_offset and size > 0 and not _is_blank(off, size):
                    first_bad = True
                    break
                if off >= 0 and size > 0 and (_is_blank(off, size) or off < phy_offset):
                    keep = (i + 1) * CQ_UNIT_SIZE
                else:
                    break
            if first_bad or (not data and len(self.queue.files) > 1):
                # the last file starts past the cut, or holds nothing (created just before
                # a crash): the entries to check are in the file before it
                self.queue.delete_last_mapped_file()
                continue
            mf.wrote_position = keep
            mf.flushed_position = min(mf.flushed_position, keep)
            if keep < len(data):
                mf.mm[keep : len(data)] = bytes(len(data) - keep)
                self.dirty = True
            self.queue.flushed_where = min(self.queue.flushed_where, mf.file_from_offset + keep)
            break
        self.max_physic_offset = self._scan_last_phys()

    def correct_min_offset(self, min_phy_offset: int) -> None:
        """Set ``min_logic_offset`` to the first entry pointing at or beyond ``min_phy_offset``
        (binary search: entries are in physical order after any leading blank fillers). Files
        wholly below it (their CommitLog files are gone, the queue's cleanup has not run yet:
        a crash between the two) are skipped."""
        for mf in self.queue.files:
            units = mf.wrote_position // CQ_UNIT_SIZE
            mm = mf.mm
            lo, hi = 0, units
            while lo < hi:
                mid = (lo + hi) // 2
                off, size, _ = CQ_UNIT.unpack_from(mm, mid * CQ_UNIT_SIZE)
                if _is_blank(off, size) or off < min_phy_offset:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < units:
                self.min_logic_offset = max(
                    self.min_logic_offset, mf.file_from_offset + lo * CQ_UNIT_SIZE
                )
                return
            # nothing left in this file: everything in it is gone
            self.min_logic_offset = max(
                self.min_logic_offset, mf.file_from_offset + mf.wrote_position
            )
            if units * CQ_UNIT_SIZE < self.file_size:
                return  # the last, partly written file

    # -- writing -------------------------------------------------------------------------
    def put(self, phys: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append one entry for queue offset ``cq_offset`` (idempotent). True if written."""
        if phys <= self.max_physic_offset:
            return False
        mf = self.queue.last
        if mf is not None:
            pos = mf.wrote_position
            if pos < self.file_size and mf.file_from_offset + pos == cq_offset * CQ_UNIT_SIZE:
                CQ_UNIT.pack_into(mf.mm, pos, phys, size, tags_code)
                mf.wrote_position = pos + CQ_UNIT_SIZE
                self.max_physic_offset = phys
                self.dirty = True
                return True
        return self._put_slow(phys, size, tags_code, cq_offset)

    def put_units(self, phys: I64, sizes: I64, tags: I64, cq_offsets: I64) -> None:
        """``put`` for many entries of this queue in order, written as one block when they
        are consecutive and land in the current file (else entry by entry)."""
        count = len(phys)
        if count == 0:
            return
        if count > 1 and not bool((np.diff(phys) > 0).all()):
            self._put_each(phys, sizes, tags, cq_offsets, 0)
            return
        start = int(np.searchsorted(phys, self.max_physic_offset, side="right"))
        mf = self.queue.last
        if start >= count or mf is None:
            self._put_each(phys, sizes, tags, cq_offsets, start)
            return
        pos = mf.wrote_position
        first = int(cq_offsets[start])
        fit = min(count - start, (self.file_size - pos) // CQ_UNIT_SIZE)
        end = start + fit
        if (
            fit <= 0
            or mf.file_from_offset + pos != first * CQ_UNIT_SIZE
            or int(cq_offsets[end - 1]) - first != fit - 1
            or (fit > 1 and not bool((np.diff(cq_offsets[start:end]) == 1).all()))
        ):
            self._put_each(phys, sizes, tags, cq_offsets, start)
            return
        data = consume_queue_units(phys[start:end], sizes[start:end], tags[start:end])
        mf.mm[pos : pos + len(data)] = data
        mf.wrote_position = pos + len(data)
        self.max_physic_offset = int(phys[end - 1])
        self.dirty = True
        self._put_each(phys, sizes, tags, cq_offsets, end)

    def put_run(self, units: bytes, first_phys: int, last_phys: int, first_offset: int) -> bool:
        """Write ``units`` (the entries of a run: consecutive queue offsets from
        ``first_offset``, increasing physical offsets ``first_phys``..``last_phys``) at once
        when none of them is written yet and they land at the end of the current file; False
        (nothing written) otherwise: the caller then puts them one by one (``put``)."""
        if first_phys <= self.max_physic_offset:
            return False
        mf = self.queue.last
        if mf is None:
            return False
        pos = mf.wrote_position
        end = pos + len(units)
        if end > self.file_size or mf.file_from_offset + pos != first_offset * CQ_UNIT_SIZE:
            return False
        mf.mm[pos:end] = units
        mf.wrote_position = end
        self.max_physic_offset = last_phys
        self.dirty = True
        return True

    def _put_each(self, phys: I64, sizes: I64, tags: I64, cq_offsets: I64, start: int) -> None:
        for args in zip(
            phys[start:].tolist(), sizes[start:].tolist(), tags[start:].tolist(),
            cq_offsets[start:].tolist(), strict=True,
        ):  # fmt: skip
            self.put(*args)

    def _put_slow(self, phys: int, size: int, tags_code: int, cq_offset: int) -> bool:
        expect = cq_offset * CQ_UNIT_SIZE
        mf = self.queue.last
        if mf is None or mf.is_full:
            mf = self.queue.get_last_mapped_file(expect)
            assert mf is not None
            if len(self.queue.files) == 1 and cq_offset != 0 and mf.wrote_position == 0:
                self.min_logic_offset = expect
                self.queue.flushed_where = expect
                self._fill_blank(mf, expect % self.file_size)
        current = mf.file_from_offset + mf.wrote_position
        if expect < current:
            return False
        if expect != current:
            logger.warning(
                "[BUG] %s: logic queue order maybe wrong, expect %d current %d",
                self,
                expect,
                current,
            )
            if expect > current and expect - current < self.file_size:
                self._fill_blank(mf, min(self.file_size, expect - mf.file_from_offset))
                if mf.is_full:
                    return self.put(phys, size, tags_code, cq_offset)
        pos = mf.wrote_position
        CQ_UNIT.pack_into(mf.mm, pos, phys, size, tags_code)
        mf.wrote_position = pos + CQ_UNIT_SIZE
        self.max_physic_offset = phys
        self.dirty = True
        return True

    def _fill_blank(self, mf: MappedFile, until: int) -> None:
        pos = mf.wrote_position
        if until > pos:
            count = (until - pos) // CQ_UNIT_SIZE
            mf.mm[pos : pos + count * CQ_UNIT_SIZE] = CQ_BLANK_ENTRY * count
            mf.wrote_position = pos + count * CQ_UNIT_SIZE

    # -- reading -------------------------------------------------------------------------
    @property
    def max_offset_in_queue(self) -> int:
        """The next queue offset to be written (number of entries including deleted ones)."""
        return self.queue.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset_in_queue(self) -> int:
        """The smallest queue offset still readable."""
        return self.min_logic_offset // CQ_UNIT_SIZE

    def get_entries(self, start_index: int, max_entries: int) -> bytes | None:
        """Raw entries from ``start_index`` to the end of that file (at most ``max_entries``).

        Returns None when ``start_index`` is below the minimum or its file is gone.
        """
        offset = start_index * CQ_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        return mf.read_from(pos, pos + max_entries * CQ_UNIT_SIZE)

    def get_entry(self, index: int) -> tuple[int, int, int] | None:
        """(physical offset, size, tagsCode) of entry ``index``, or None."""
        data = self.get_entries(index, 1)
        if data is None or len(data) < CQ_UNIT_SIZE:
            return None
        off, size, tags = CQ_UNIT.unpack_from(data)
        return int(off), int(size), int(tags)

    def roll_next_file(self, index: int) -> int:
        """First queue offset of the file after the one holding ``index``."""
        units = self.file_size // CQ_UNIT_SIZE
        return index + units - index % units

    # -- flushing and deletion -----------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        """Flush one file's worth; True when nothing new was flushed."""
        result = self.queue.flush(least_pages)
        if self.queue.flushed_where >= self.queue.max_offset:
            self.dirty = False
        return result

    def delete_expired_files(self, min_commit_log_offset: int) -> int:
        """Delete files whose last entry points below ``min_commit_log_offset`` (never the last)."""
        files = self.queue.files
        doomed = []
        for mf in files[:-1]:
            last = mf.read(self.file_size - CQ_UNIT_SIZE, CQ_UNIT_SIZE)
            if last is None:
                break
            off, size, _ = CQ_UNIT.unpack(last)
            if (off < min_commit_log_offset or _is_blank(off, size)) and mf.destroy(sync_dir=False):
                doomed.append(mf)
                continue
            break
        if doomed:
            self.queue.disk.sync_dir(self.store_path)
            self.queue.remove_files(doomed)
        self.correct_min_offset(min_commit_log_offset)
        return len(doomed)

    def destroy(self) -> None:
        """Delete every file of the queue."""
        self.queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    def shutdown(self) -> None:
        """Unmap the files."""
        self.queue.shutdown()


def _valid_prefix(mf: MappedFile, file_size: int) -> tuple[int, int]:
    """(bytes of valid entries from the start of ``mf``, last real physical offset or -1),
    reading 64 KiB at a time and stopping at the first invalid entry."""
    chunk = 3276 * CQ_UNIT_SIZE
    valid = 0
    last = -1
    while valid < file_size:
        data = mf.mm[valid : min(file_size, valid + chunk)]
        for off, size, _tags in CQ_UNIT.iter_unpack(data):
            if off < 0 or size <= 0:
                return valid, last
            valid += CQ_UNIT_SIZE
            if not _is_blank(off, size):
                last = off
    return valid, last


class _RecoveryPlan(NamedTuple):
    """Where a queue's valid entries end (``scan_recovery``)."""

    process_offset: int
    max_phys: int
    #: a file and the position from which it holds stale bytes to zero
    zero: tuple[MappedFile, int] | None


def _is_blank(off: int, size: int) -> bool:
    return off == 0 and size == _MAX_BLANK_FILL
