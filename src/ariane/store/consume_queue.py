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

import numpy as np

from ariane.store.format import CQ_BLANK_ENTRY, CQ_UNIT, CQ_UNIT_SIZE
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import LoadReport, MappedFileQueue
from ariane.store.vector import I64, consume_queue_units

__all__ = ["ConsumeQueue"]

logger = logging.getLogger(__name__)

_MAX_BLANK_FILL = 0x7FFFFFFF


class ConsumeQueue:
    """The ConsumeQueue of one (topic, queue id).

    Args:
        topic: the topic.
        queue_id: the queue id.
        root: the ``consumequeue`` directory.
        file_size: bytes per file (a multiple of 20).
    """

    def __init__(self, topic: str, queue_id: int, root: str, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.store_path = os.path.join(root, topic, str(queue_id))
        self.queue = MappedFileQueue(self.store_path, file_size)
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
        files = self.queue.files
        if not files:
            return
        index = max(0, len(files) - 3)
        process_offset = files[index].file_from_offset
        max_phys = -1
        while index < len(files):
            mf = files[index]
            valid_bytes, last = _valid_prefix(mf, self.file_size)
            if last >= 0:
                max_phys = last
            process_offset = mf.file_from_offset + valid_bytes
            if valid_bytes != self.file_size:
                if mf.nonzero_end(valid_bytes) > valid_bytes:
                    # Stale or torn bytes after the end: zero them so they are never read
                    # as entries once new entries are appended before them.
                    mf.mm[valid_bytes:] = bytes(self.file_size - valid_bytes)
                    self.dirty = True
                    mf.flushed_position = 0
                break
            index += 1
        self.max_physic_offset = max(max_phys, self.max_physic_offset)
        self.queue.truncate_dirty_files(process_offset)
        self.queue.flushed_where = process_offset
        if max_phys < 0:
            self.max_physic_offset = self._scan_last_phys()

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
            if first_bad:
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
        (binary search: entries are in physical order after any leading blank fillers)."""
        mf = self.queue.first
        if mf is None:
            return
        mm = mf.mm
        lo, hi = 0, mf.wrote_position // CQ_UNIT_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            off, size, _ = CQ_UNIT.unpack_from(mm, mid * CQ_UNIT_SIZE)
            if _is_blank(off, size) or off < min_phy_offset:
                lo = mid + 1
            else:
                hi = mid
        if lo < mf.wrote_position // CQ_UNIT_SIZE:
            self.min_logic_offset = mf.file_from_offset + lo * CQ_UNIT_SIZE
        else:  # nothing left in the first file: everything in it is gone
            self.min_logic_offset = max(
                self.min_logic_offset, mf.file_from_offset + mf.wrote_position
            )

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
            if (off < min_commit_log_offset or _is_blank(off, size)) and mf.destroy():
                doomed.append(mf)
                continue
            break
        if doomed:
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


def _is_blank(off: int, size: int) -> bool:
    return off == 0 and size == _MAX_BLANK_FILL
