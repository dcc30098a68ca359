"""The three files of the timer (formats in :mod:`ariane.store.timer.format`): the wheel
(RocketMQ ``TimerWheel``), the timer log (``TimerLog``) and the checkpoint
(``TimerCheckpoint``).

How it works: the wheel and the checkpoint are memory-mapped whole and written in place (a
process crash keeps what was written, the flush makes it durable); the wheel file is created
sparse. The timer log is a queue of same-size mapped files (the store's
:class:`~ariane.store.mapped_file_queue.MappedFileQueue`) that only grows by appending units;
its files are created when the first unit needs them.
"""

from __future__ import annotations

import logging
import mmap
import os

from ariane.errors import CorruptionError
from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.timer.format import (
    CHECKPOINT_SIZE,
    FILLER_SIZE,
    SLOT_SIZE,
    SLOTS_TOTAL,
    UNIT_SIZE,
    WHEEL_FILE_SIZE,
    Checkpoint,
    Slot,
    Unit,
    is_filler,
    pack_filler,
)

__all__ = ["TimerCheckpointFile", "TimerLog", "TimerWheel"]

logger = logging.getLogger(__name__)

_SLOTS = SLOTS_TOTAL * 2


def _map(path: str, size: int, what: str) -> tuple[int, mmap.mmap]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        have = os.fstat(fd).st_size
        if have == 0:
            os.ftruncate(fd, size)
        elif have != size:
            raise CorruptionError(f"{what} is {have} bytes, expected {size}", path=path)
        return fd, mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    except BaseException:
        os.close(fd)
        raise


class _WholeMap:
    """A file mapped whole, written in place."""

    def __init__(self, path: str, size: int, what: str) -> None:
        self.path = path
        self._fd, self._mm = _map(path, size, what)

    def flush(self) -> None:
        """Make what was written durable."""
        self._mm.flush()

    def close(self) -> None:
        """Unmap (what was written stays in the page cache and the file)."""
        if not self._mm.closed:
            self._mm.close()
            os.close(self._fd)


class TimerWheel(_WholeMap):
    """The slots of the next 7 days (14 with the mirror half), in one mapped file.

    Args:
        path: ``timerwheel``.
        precision_ms: P.

    Raises:
        CorruptionError: an existing file has another size.
        OSError: the file cannot be created or mapped.
    """

    def __init__(self, path: str, precision_ms: int) -> None:
        super().__init__(path, WHEEL_FILE_SIZE, "timer wheel")
        self.precision_ms = precision_ms

    def _offset(self, time_ms: int) -> int:
        return (time_ms // self.precision_ms) % _SLOTS * SLOT_SIZE

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms`` (empty when the stored slot belongs to another time)."""
        p = self.precision_ms
        slot = Slot.unpack(self._mm, self._offset(time_ms), p)
        if slot.time_ms != time_ms // p * p:
            return Slot.empty()
        return slot

    def put_slot(self, time_ms: int, first: int, last: int, num: int, magic: int = 0) -> None:
        """Write the slot of ``time_ms``."""
        p = self.precision_ms
        off = self._offset(time_ms)
        self._mm[off : off + SLOT_SIZE] = Slot(time_ms // p * p, first, last, num, magic).pack(p)

    def revise(self, time_ms: int, pos: int) -> None:
        """Recovery: ``pos`` holds a unit of slot ``time_ms``: make it the slot's latest (or
        its first and latest when the slot is stale)."""
        slot = self.get_slot(time_ms)
        if slot.time_ms < 0:
            self.put_slot(time_ms, pos, pos, 0, 0)
        elif pos > slot.last_pos:
            self.put_slot(time_ms, slot.first_pos, pos, slot.num, slot.magic)

    def units_behind(self, from_ms: int, to_ms: int) -> int:
        """Sum of ``num`` of the valid slots in [from, to) (the dequeue backlog); bounded to
        one wheel turn."""
        p = self.precision_ms
        total = 0
        t = from_ms // p * p
        end = min(to_ms, t + SLOTS_TOTAL * p)
        while t < end:
            slot = self.get_slot(t)
            if slot.time_ms >= 0:
                total += slot.num
            t += p
        return total


class TimerLog:
    """Appended 52-byte units across same-size files.

    Args:
        directory: ``timerlog``.
        file_size: ``mappedFileSizeTimerLog``.
    """

    def __init__(self, directory: str, file_size: int) -> None:
        self.file_size = file_size
        self.queue = MappedFileQueue(directory, file_size)

    def load(self) -> None:
        """Map the existing files (positions are set by :meth:`recover`)."""
        report = self.queue.load()
        if report.damaged:
            logger.error(
                "timer log: stopped loading at %s (%s); later units are lost",
                report.bad_file or report.gap_at, report.set_aside,
            )  # fmt: skip

    @property
    def end(self) -> int:
        """Offset just past the last unit (or filler)."""
        return self.queue.max_offset

    def append(self, unit: Unit) -> int:
        """Append ``unit``; returns its offset.

        Raises:
            OSError: a new file cannot be created.
        """
        mf = self.queue.get_last_mapped_file()
        assert mf is not None
        room = self.file_size - mf.wrote_position
        if room < UNIT_SIZE + FILLER_SIZE:
            if room > 0:
                mf.append(pack_filler(room) + bytes(room - FILLER_SIZE))
            mf = self.queue.get_last_mapped_file()
            assert mf is not None
        pos = mf.file_from_offset + mf.wrote_position
        mf.append(unit.pack())
        return pos

    def read(self, pos: int) -> Unit | None:
        """The unit at ``pos``; None when there is none (or it is damaged)."""
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        data = mf.read(pos - mf.file_from_offset, UNIT_SIZE)
        if data is None:
            return None
        try:
            return Unit.unpack(data)
        except CorruptionError:
            return None

    def recover(self, start: int, on_unit: list[tuple[int, Unit]]) -> int:
        """Scan from ``start`` (a unit boundary) to the first invalid unit, collecting every
        valid one into ``on_unit``; set the write position there and return it."""
        queue = self.queue
        files = queue.files
        if not files:
            return 0
        start = max(start, files[0].file_from_offset)
        end = start
        for mf in files:
            base = mf.file_from_offset
            if base + self.file_size <= start:
                continue
            pos = max(0, start - base)
            mm = mf.mm
            while pos < self.file_size:
                if is_filler(mm, pos):
                    pos = self.file_size
                    break
                if pos + UNIT_SIZE > self.file_size:
                    break
                try:
                    unit = Unit.unpack(mm, pos)
                except CorruptionError:
                    break
                on_unit.append((base + pos, unit))
                pos += UNIT_SIZE
            end = base + pos
            if pos < self.file_size:
                break
        queue.truncate_dirty_files(end)
        return end

    def flush(self) -> int:
        """Flush what was written; the durable end."""
        self.queue.flush_all()
        return self.queue.flushed_where

    def shutdown(self) -> None:
        """Unmap the files."""
        self.queue.shutdown()


class TimerCheckpointFile(_WholeMap):
    """``config/timercheck``, mapped.

    Args:
        path: the file.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path, CHECKPOINT_SIZE, "timer checkpoint")

    def read(self) -> Checkpoint:
        """The stored progress (zeros for a new file)."""
        return Checkpoint.unpack(self._mm[:56])

    def write(self, cp: Checkpoint) -> None:
        """Store ``cp`` (durable after :meth:`flush`)."""
        self._mm[:56] = cp.pack()
