"""One fixed-size, memory-mapped store file (RocketMQ ``MappedFile``).

How it works: the file is created whole through the store's :class:`~ariane.store.disk.Disk`
(sized, its blocks reserved, synced, renamed into place, directory synced: a crash never
leaves a short file, and a full disk refuses the file instead of a later page fault) and
mapped read-write once. Writers copy bytes into the map and only then advance
``wrote_position`` (so concurrent readers, which never look past it, never see a
half-written record). ``flush`` forces the file with ``fdatasync`` (releases the GIL; on Linux
it writes back pages dirtied through the shared mapping) and moves ``flushed_position``. Readers get ``bytes`` copies, never views, so a file can be
unmapped while other threads keep what they read; all map accesses are single C calls under
the GIL, and a reader that races with ``destroy`` sees ``None`` instead of a crash.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import AbstractContextManager

from ariane.errors import CorruptionError
from ariane.store.disk import OS_DISK, Disk, DiskFile, FileMap, create_file
from ariane.store.format import OS_PAGE_SIZE, parse_file_name

__all__ = ["MappedFile"]

logger = logging.getLogger(__name__)

#: Pages :meth:`MappedFile.initialize` dirties per hold of the writers' lock (~2-5 µs each).
INIT_PAGES_PER_LOCK = 16


class MappedFile:
    """A mapped file named by its start offset.

    Args:
        path: the file path; its base name is the 20-digit start offset (or, for index files,
            any name: then ``file_from_offset`` is 0).
        file_size: the exact size of the file in bytes.
        create: create the file (whole, see the module docs) if it does not exist.
        disk: the file system (tests pass a simulated one).

    Raises:
        CorruptionError: an existing file has another size.
        OSError: the file cannot be created (``ENOSPC``: no room for its blocks), opened or
            mapped.
    """

    __slots__ = (
        "_closed",
        "_file",
        "_flush_lock",
        "available",
        "disk",
        "file_from_offset",
        "file_size",
        "first_shutdown_ms",
        "flushed_position",
        "mm",
        "path",
        "store_timestamp",
        "wrote_position",
    )

    def __init__(
        self, path: str, file_size: int, *, create: bool = True, disk: Disk = OS_DISK
    ) -> None:
        self.path = path
        self.file_size = file_size
        self.disk = disk
        start = parse_file_name(os.path.basename(path))
        self.file_from_offset = start if start is not None else 0
        f: DiskFile
        if create and not disk.exists(path):
            f = create_file(disk, path, file_size)
        else:
            f = disk.open(path)
        try:
            size = f.size
            if size != file_size:
                raise CorruptionError(
                    f"file size {size} differs from the configured {file_size}", path=path
                )
            self.mm: FileMap = f.map(file_size)
        except BaseException:
            f.close()
            raise
        self._file = f
        self._closed = False
        self._flush_lock = threading.Lock()
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.available = True
        self.first_shutdown_ms = 0

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position})"

    @property
    def file_name(self) -> str:
        """Base name of the file."""
        return os.path.basename(self.path)

    @property
    def is_full(self) -> bool:
        """True when nothing more can be written."""
        return self.wrote_position >= self.file_size

    @property
    def closed(self) -> bool:
        """True after ``close``/``destroy``."""
        return self._closed

    def last_modified_ms(self) -> int:
        """The file's mtime in milliseconds (0 if it is gone)."""
        try:
            return self.disk.mtime_ms(self.path)
        except OSError:
            return 0

    def append(self, data: bytes) -> bool:
        """Append ``data`` at ``wrote_position``; False if it does not fit."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        self.mm[pos:end] = data
        self.wrote_position = end
        return True

    def read(self, pos: int, size: int) -> bytes | None:
        """Copy ``size`` bytes at ``pos`` (must lie below ``wrote_position``); None if not."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position:
            return None
        try:
            return bytes(self.mm[pos : pos + size])  # a copy; no-op for an mmap slice
        except ValueError:  # unmapped by a concurrent destroy
            return None

    def read_from(self, pos: int, limit: int | None = None) -> bytes | None:
        """Copy from ``pos`` up to ``limit`` (default: ``wrote_position``); None if empty."""
        end = self.wrote_position if limit is None else min(limit, self.wrote_position)
        if pos < 0 or pos >= end:
            return None
        try:
            return bytes(self.mm[pos:end])
        except ValueError:
            return None

    def nonzero_end(self, pos: int) -> int:
        """End of the run of non-zero data that follows ``pos`` (scanning 1 MiB chunks and
        stopping at the first chunk that ends in zeros); ``pos`` if there is none."""
        chunk = 1 << 20
        end = pos
        p = pos
        size = self.file_size
        while p < size:
            data = self.mm[p : min(size, p + chunk)]
            stripped = data.rstrip(b"\0")
            if stripped:
                end = p + len(stripped)
            if len(stripped) < len(data):
                break
            p += len(data)
        return end

    def warm(
        self,
        pos: int,
        buf: bytearray | memoryview,
        length: int | None = None,
        *,
        single_pages: bool = False,
    ) -> None:
        """Read ``length`` bytes (default ``len(buf)``) at ``pos`` through ``buf`` so those (zero) pages of a new file
        sit in the page cache before the writer gets there: a write then takes a minor fault
        instead of one that allocates and zeroes a page (several times the cost of the copy).
        The read releases the GIL; it goes through a duplicate descriptor, so a concurrent
        ``close`` neither waits for it nor leaves it reading a recycled descriptor.
        ``single_pages``: read without readahead (see ``DiskFile.read_into``)."""
        with self._flush_lock:
            if self._closed:
                return
            reader = self._file.duplicate()
        try:
            reader.read_into(buf, pos, length, single_pages=single_pages)
        finally:
            reader.close()

    def initialize(self, start: int, end: int, lock: AbstractContextManager[object]) -> bool:
        """Have the blocks of the pages of ``[start, end)`` written once, so a later write there
        and its ``fdatasync`` find them initialized (issue 18): a fallocated block is
        *unwritten* until its first write-back, which converts it (on this project's ext4
        without journal: a kernel worker, then the inode written by the ``fdatasync``, each a
        wait behind a busy CPU or the disk). Each page is made dirty by writing its first
        byte back unchanged (under ``lock``, the log's put lock, which every writer of the
        map holds, ``INIT_PAGES_PER_LOCK`` pages per hold), then all of them and the inode are
        written with one ``fdatasync`` through a duplicate descriptor (the GIL released; the
        file's own flush lock is not held meanwhile). Content never changes. False when the
        file was closed meanwhile."""
        with self._flush_lock:
            if self._closed:
                return False
            writer = self._file.duplicate()
        try:
            mm = self.mm
            page = start - start % OS_PAGE_SIZE
            while page < end:
                stop = min(end, page + INIT_PAGES_PER_LOCK * OS_PAGE_SIZE)
                with lock:
                    try:
                        while page < stop:
                            mm[page] = mm[page]
                            page += OS_PAGE_SIZE
                    except ValueError:  # unmapped by close(): nothing left to do
                        return False
            writer.sync()
            return True
        finally:
            writer.close()

    def is_able_to_flush(self, least_pages: int) -> bool:
        """``isAbleToFlush``: full-and-unflushed, enough dirty pages, or anything if 0."""
        flushed = self.flushed_position
        write = self.wrote_position
        if self.is_full and flushed < write:
            return True
        if least_pages > 0:
            return (write // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE) >= least_pages
        return write > flushed

    def flush(self, least_pages: int) -> int:
        """Force written data to disk when ``is_able_to_flush``; return ``flushed_position``."""
        if self.is_able_to_flush(least_pages):
            with self._flush_lock:
                if self._closed:
                    return self.flushed_position
                value = self.wrote_position
                self._file.sync()
                if value > self.flushed_position:
                    self.flushed_position = value
        return self.flushed_position

    def sync(self) -> None:
        """Force the whole file regardless of positions (used after in-place repairs)."""
        with self._flush_lock:
            if not self._closed:
                self._file.sync()

    def shutdown_mark(self, now_ms: int) -> None:
        """First step of destruction: make the file unavailable to new readers."""
        if self.available:
            self.available = False
            self.first_shutdown_ms = now_ms

    def close(self) -> None:
        """Unmap and close (idempotent). Data already written stays in the page cache."""
        with self._flush_lock:
            if self._closed:
                return
            self._closed = True
            self._file.close()

    def destroy(self, *, sync_dir: bool = True) -> bool:
        """Close and delete the file (the deletion synced into its directory unless the caller
        syncs once for several files). Returns True when the file is gone."""
        self.available = False
        self.close()
        try:
            self.disk.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            logger.exception("could not delete %s", self.path)
            return False
        if sync_dir:
            self.disk.sync_dir(os.path.dirname(self.path) or ".")
        logger.info("deleted %s", self.path)
        return True
