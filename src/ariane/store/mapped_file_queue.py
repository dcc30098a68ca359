"""A directory of same-size mapped files forming one address space (``MappedFileQueue``).

How it works: files are named by the global offset of their first byte; the list is kept
sorted and replaced (copy-on-write) whenever it changes, so readers use a snapshot without a
lock. ``flushed_where`` is the global offset up to which data is durable. ``flush`` handles
one file per call (a flush point crossing a file boundary needs a second call).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from ariane.errors import CorruptionError
from ariane.store.disk import FILE_SUFFIX_NEW, OS_DISK, Disk
from ariane.store.format import OS_PAGE_SIZE, file_name, parse_file_name
from ariane.store.mapped_file import MappedFile

__all__ = ["LoadReport", "MappedFileQueue"]

logger = logging.getLogger(__name__)


class LoadReport:
    """What ``MappedFileQueue.load`` found besides the good files.

    ``bad_file`` is the first file of a wrong size, misplaced (its name is not a multiple of
    the file size: it overlaps its neighbours) or unreadable; ``gap_at`` the offset where a
    file is missing; ``set_aside`` lists the files after the damage that were not loaded;
    ``reason`` says what is wrong in one line. Loading changes nothing on disk: the caller
    decides (the store refuses to start; ``ariane store repair`` moves them aside).
    """

    __slots__ = ("bad_file", "gap_at", "reason", "set_aside")

    def __init__(self) -> None:
        self.bad_file: str | None = None
        self.set_aside: list[str] = []
        self.gap_at: int | None = None
        self.reason: str | None = None

    @property
    def damaged(self) -> bool:
        """True when not every file could be loaded."""
        return self.bad_file is not None or self.gap_at is not None


class MappedFileQueue:
    """The files of one directory (the CommitLog, or one ConsumeQueue).

    Args:
        store_path: the directory.
        mapped_file_size: the size of every file in bytes.
        populate: files are created and warmed ahead of the writer by :meth:`prepare_ahead`
            (the CommitLog's).
        warm_single_pages: the warm reads bring single 4 KiB pages in, without readahead,
            so a write dirties one page, not a large folio (a SYNC_FLUSH CommitLog: each
            group commit's ``fdatasync`` writes what its records dirtied).
        disk: the file system (tests pass a simulated one).
    """

    def __init__(
        self,
        store_path: str,
        mapped_file_size: int,
        *,
        populate: bool = False,
        warm_single_pages: bool = False,
        disk: Disk = OS_DISK,
    ) -> None:
        self.store_path = store_path
        self.disk = disk
        self.mapped_file_size = mapped_file_size
        self.populate = populate
        self.warm_single_pages = warm_single_pages
        self._next: MappedFile | None = None
        self._next_lock = threading.Lock()
        #: the directory was made for a file ``prepare_first`` prepared
        self._made_dir = False
        self._warmed_to = 0
        self._initialized_to = 0
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.store_timestamp = 0

    # -- loading -------------------------------------------------------------------------
    def list_file_names(self) -> list[str]:
        """Sorted 20-digit file names in the directory (other names are ignored)."""
        try:
            names = self.disk.listdir(self.store_path)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if parse_file_name(n) is not None)

    def leftovers(self) -> list[str]:
        """Files of interrupted creations (``<name>.new``): never holding data."""
        try:
            names = self.disk.listdir(self.store_path)
        except FileNotFoundError:
            return []
        return sorted(
            os.path.join(self.store_path, n) for n in names if n.endswith(FILE_SUFFIX_NEW)
        )

    def remove_leftovers(self) -> None:
        """Delete the files of interrupted creations (after a load that is going ahead)."""
        doomed = self.leftovers()
        for path in doomed:
            logger.info("deleting %s (an interrupted file creation)", path)
            self.disk.unlink(path)
        if doomed:
            self.disk.sync_dir(self.store_path)

    def load(self) -> LoadReport:
        """Map every file in order; stop at the first file of a wrong size or a gap.

        Loaded files start with every position at the file size; recovery corrects the tail.
        """
        report = LoadReport()
        files: list[MappedFile] = []
        names = self.list_file_names()
        size = self.mapped_file_size
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            start = parse_file_name(name)
            assert start is not None
            if start % size:
                report.bad_file = path
                report.reason = (
                    f"{path}: its name is not a multiple of the file size {size}, so it "
                    "overlaps its neighbours"
                )
                report.set_aside = [os.path.join(self.store_path, n) for n in names[i + 1 :]]
                break
            if files and start != files[-1].file_from_offset + size:
                report.gap_at = files[-1].file_from_offset + size
                report.reason = (
                    f"{self.store_path}: the file for offset {report.gap_at} "
                    f"({file_name(report.gap_at)}) is missing before {name}"
                )
                report.set_aside = [os.path.join(self.store_path, n) for n in names[i:]]
                break
            try:
                mf = MappedFile(path, size, create=False, disk=self.disk)
            except (CorruptionError, OSError) as exc:
                logger.warning("stopped loading %s at %s: %s", self.store_path, name, exc)
                report.bad_file = path
                report.reason = f"{path}: {exc.args[0] if exc.args else exc}"
                report.set_aside = [os.path.join(self.store_path, n) for n in names[i + 1 :]]
                break
            mf.wrote_position = mf.flushed_position = size
            files.append(mf)
        self.files = files
        return report

    # -- lookup --------------------------------------------------------------------------
    @property
    def first(self) -> MappedFile | None:
        """The oldest file."""
        files = self.files
        return files[0] if files else None

    @property
    def last(self) -> MappedFile | None:
        """The newest file."""
        files = self.files
        return files[-1] if files else None

    def get_last_mapped_file(self, start_offset: int = 0, create: bool = True) -> MappedFile | None:
        """The file to write to, creating the next one when the last is full (or none exist).

        Raises:
            OSError: the file could not be created.
        """
        files = self.files
        last = files[-1] if files else None
        if last is not None and not last.is_full:
            return last
        if not create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        with self._next_lock:  # waits for a pre-allocation in progress
            mf = self._next
            self._next = None
            if mf is not None and (mf.file_from_offset != create_offset or mf.closed):
                mf.destroy()
                mf = None
            if mf is None:
                self.disk.makedirs(self.store_path)
                mf = MappedFile(
                    os.path.join(self.store_path, file_name(create_offset)),
                    self.mapped_file_size,
                    disk=self.disk,
                )
            self.files = [*files, mf]
        return mf

    def prepare_ahead(
        self, write_offset: int, window: int, buf: bytearray, step_bytes: int | None = None
    ) -> bool:
        """One step of keeping the files ahead of a writer at ``write_offset`` ready
        (RocketMQ's ``AllocateMappedFileService``): create the first file, or the next one
        once the writer is past half of the last one (or within ``window`` of its end), and
        pull the next ``step_bytes`` (default ``len(buf)``) bytes below ``write_offset +
        window`` into the page cache, read through ``buf`` (never past the end of the next
        file; a new store's first file before it is used).

        Called from a background thread; returns True when it did something (call again).
        Files are warmed only a window ahead, never whole: on a VM a fresh page-cache page
        can cost far more than the copy into it, and a 1 GiB file may never fill.
        """
        if not self.populate:
            return False
        size = self.mapped_file_size
        last = self.last
        if last is None:  # a new store: the first file, warmed before the first message
            end = 0
            created = self._prepare_next(None, 0)
        else:
            end = last.file_from_offset + size
            created = False
            if write_offset >= end - max(size // 2, window):
                created = self._prepare_next(last, end)
        start = max(self._warmed_to, write_offset)
        stop = min(write_offset + window, end + size)
        if start >= stop:
            return created
        target = last if last is not None and start < end else self._next
        if target is None or target.file_from_offset > start:
            return created
        pos = start - target.file_from_offset
        n = min(len(buf) if step_bytes is None else step_bytes, stop - start, size - pos)
        target.warm(pos, buf, n, single_pages=self.warm_single_pages)
        self._warmed_to = start + n
        return True

    def initialize_ahead(
        self, write_offset: int, lead_bytes: int, lock: AbstractContextManager[object]
    ) -> bool:
        """Have the blocks of the current file's pages after the one holding ``write_offset``
        and below ``write_offset + lead_bytes`` written once (:meth:`MappedFile.initialize`,
        ``lock`` the writers' lock), from where the last call stopped. Returns True when it
        initialized something. Called from the allocation thread under SYNC_FLUSH."""
        last = self.last
        if last is None or lead_bytes <= 0:
            return False
        base = last.file_from_offset
        page_after = write_offset - write_offset % OS_PAGE_SIZE + OS_PAGE_SIZE
        start = max(self._initialized_to, page_after, base)
        stop = min(write_offset + lead_bytes, base + last.file_size)
        stop -= stop % OS_PAGE_SIZE
        if stop - start < OS_PAGE_SIZE:
            return False
        if not last.initialize(start - base, stop - base, lock):
            return False
        self._initialized_to = stop
        return True

    @property
    def warmed_to(self) -> int:
        """The global offset up to which :meth:`prepare_ahead` has warmed pages."""
        return self._warmed_to

    def prepare_first(self) -> bool:
        """Create the first file (offset 0) of a queue that has none yet, for the writer's
        first roll to take (``get_last_mapped_file``), from a background thread: a new
        ConsumeQueue's first write then finds its file made (issue 18: the creation's two
        syncs are not on the reput thread). True when it created the file."""
        return self.last is None and self._prepare_next(None, 0, first=True)

    def _prepare_next(self, last: MappedFile | None, offset: int, first: bool = False) -> bool:
        with self._next_lock:
            if self._next is not None or self.last is not last:
                return False
            path = os.path.join(self.store_path, file_name(offset))
            if self.disk.exists(path):
                return False
            if first and not self.disk.isdir(self.store_path):
                self._made_dir = True  # for the prepared file: removed with it if unused
            self.disk.makedirs(self.store_path)
            self._next = MappedFile(path, self.mapped_file_size, disk=self.disk)
            return True

    def warm_prepared(self, buf: bytearray) -> None:
        """Read the whole prepared file (:meth:`prepare_first`) into the page cache through
        ``buf`` (the read releases the GIL), from the thread that made it. Without this the
        writer's first write through the map of a new, fallocated file faulted in the
        file's readahead window on the writer's thread: 1.6-2.9 ms for a 6 MB ConsumeQueue
        file on the bench VM (``read_ahead_kb`` 8192), later pages ~60 µs each; with the
        pages cached, 60-70 µs (issue 18: a latency run's first message to each of a new
        topic's queues waited for it on the broker's loop or reput thread). The pages come
        in as single 4 KiB pages, as that fault brought them (``single_pages``: a 20-byte
        entry then dirties one page, not a large folio); the page cache this takes is what
        that first write's readahead took."""
        with self._next_lock:
            mf = self._next
        if mf is not None:
            mf.warm(0, buf, mf.file_size, single_pages=True)

    @property
    def next_ready(self) -> bool:
        """A file is prepared for the writer's next roll."""
        return self._next is not None

    def drop_preallocated(self) -> None:
        """Delete a pre-allocated file that was never used (at shutdown), and the directory
        when it was made for that file (a new topic's queue that never got a message leaves
        nothing behind)."""
        with self._next_lock:
            mf, self._next = self._next, None
        if mf is not None:
            mf.destroy()
            if self._made_dir and not self.files:
                try:
                    self.disk.rmdir(self.store_path)
                    self.disk.sync_dir(os.path.dirname(self.store_path) or ".")
                except OSError:
                    pass

    def find_mapped_file_by_offset(
        self, offset: int, return_first_on_not_found: bool = False
    ) -> MappedFile | None:
        """The file holding global ``offset``, or None (or the first file, if asked)."""
        files = self.files
        if not files:
            return None
        first = files[0]
        index = offset // self.mapped_file_size - first.file_from_offset // self.mapped_file_size
        if 0 <= index < len(files):
            mf = files[index]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
            for mf in files:  # pragma: no cover - only after an irregular list
                if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                    return mf
        return first if return_first_on_not_found else None

    @property
    def min_offset(self) -> int:
        """Start offset of the first file, -1 when there is none."""
        files = self.files
        return files[0].file_from_offset if files else -1

    @property
    def max_offset(self) -> int:
        """Global offset just past the last written byte (0 when empty)."""
        files = self.files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    # -- flushing ------------------------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``. True means nothing new was flushed."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        ts = mf.store_timestamp
        where = mf.file_from_offset + mf.flush(least_pages)
        result = where == self.flushed_where
        if where > self.flushed_where:
            self.flushed_where = where
        if least_pages == 0 and ts:
            self.store_timestamp = ts
        return result

    def flush_all(self) -> None:
        """Flush until everything written is durable."""
        for _ in range(len(self.files) + 2):
            if self.flush(0) and self.flushed_where >= self.max_offset:
                return
            if self.flushed_where >= self.max_offset:
                return

    # -- truncation and deletion ---------------------------------------------------------
    def set_positions(self, offset: int) -> None:
        """Set the flush point (and positions of the file holding ``offset``) after recovery."""
        self.flushed_where = offset

    def truncate_dirty_files(
        self, offset: int, set_aside: Callable[[MappedFile], None] | None = None
    ) -> None:
        """Cut everything at and after global ``offset`` (``truncateDirtyFiles``).

        The file holding ``offset`` keeps its bytes but its positions move to ``offset``;
        later files are removed (handed to ``set_aside`` first, when given, else deleted).
        """
        keep: list[MappedFile] = []
        for mf in self.files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail <= offset:
                keep.append(mf)
            elif offset >= mf.file_from_offset:
                pos = offset - mf.file_from_offset
                mf.wrote_position = pos
                mf.flushed_position = min(mf.flushed_position, pos)
                keep.append(mf)
            elif set_aside is not None:
                set_aside(mf)
            else:
                mf.destroy()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_last_mapped_file(self) -> None:
        """Destroy the newest file."""
        files = self.files
        if files:
            self.files = files[:-1]
            files[-1].destroy()

    def remove_files(self, doomed: list[MappedFile]) -> None:
        """Drop destroyed files from the list."""
        ids = {id(mf) for mf in doomed}
        self.files = [mf for mf in self.files if id(mf) not in ids]

    def shutdown(self) -> None:
        """Unmap every file (they stay on disk); delete an unused pre-allocated file."""
        self.drop_preallocated()
        for mf in self.files:
            mf.close()

    def destroy(self) -> None:
        """Delete every file (and an unused pre-allocated one) and the directory if it
        becomes empty."""
        self.drop_preallocated()
        files, self.files = self.files, []
        for mf in files:
            mf.destroy()
        self.flushed_where = 0
        try:
            self.disk.rmdir(self.store_path)
            self.disk.sync_dir(os.path.dirname(self.store_path) or ".")
        except OSError:
            pass
