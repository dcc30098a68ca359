"""The store's file system seam: every file operation the store makes goes through a ``Disk``.

How it works: the store never calls ``os``/``mmap`` for its files itself; it asks a
:class:`Disk` (``OS_DISK`` in production) to open, size, map, sync, rename and delete them.
Tests hand the store a simulated disk (:mod:`ariane.store.simdisk`) that records every write,
``fdatasync`` and directory sync and builds the images a power cut could leave behind.

The durability rules the store follows, and that the simulated disk enforces:

* file data (written or through the map) is on disk after :meth:`DiskFile.sync` (``fdatasync``;
  on Linux it writes back the pages dirtied through a shared mapping too, like ``msync``);
* a name (create, rename, delete) is on disk after :meth:`Disk.sync_dir` of its directory;
* a file is created whole: :func:`create_file` sizes and reserves it under a temporary
  name, syncs it, renames it into place and syncs the directory, so a crash leaves either no
  file or a file of the full size, never a short one.

The protocol steps (:func:`create_file`, :func:`write_atomically`) are written once, over the
primitives, so the simulated disk checks the production sequence of writes and syncs.

Files larger than memory are mapped, never read whole; small files (checkpoint, saved bytes)
are read and written whole with :meth:`Disk.read_file`/:meth:`Disk.write_file`.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import mmap
import os
from typing import Protocol

from ariane.common import faults

__all__ = [
    "FILE_SUFFIX_NEW",
    "OS_DISK",
    "Disk",
    "DiskFile",
    "FileMap",
    "OsDisk",
    "create_file",
    "write_atomically",
]

logger = logging.getLogger(__name__)

#: What a file is mapped as: the real shared mapping, or a simulated disk's page cache.
FileMap = mmap.mmap | bytearray

#: Suffix of a file being created (renamed into place once whole; deleted at load).
FILE_SUFFIX_NEW = ".new"
#: Buffers one ``preadv`` takes at most (Linux's ``IOV_MAX``).
_IOV_MAX = 1024


class DiskFile(Protocol):
    """An open file."""

    @property
    def size(self) -> int:
        """The file's current size in bytes."""
        ...

    def truncate(self, size: int) -> None:
        """Set the size (``ftruncate``)."""
        ...

    def reserve(self, size: int) -> None:
        """Allocate the blocks of ``[0, size)`` now (``posix_fallocate``).

        Raises:
            OSError: ``ENOSPC`` when the file system cannot hold them.
        """
        ...

    def map(self, size: int) -> FileMap:
        """A shared, writable map of ``[0, size)``."""
        ...

    def sync(self) -> None:
        """Force the file's data, its mapped pages and its size to disk (``fdatasync``)."""
        ...

    def read_into(
        self,
        buf: bytearray | memoryview,
        pos: int,
        length: int | None = None,
        *,
        single_pages: bool = False,
    ) -> None:
        """Read ``length`` bytes (default ``len(buf)``) at ``pos`` (pulls pages into the page
        cache), ``buf`` filled again from its start for each ``len(buf)`` bytes.
        ``single_pages``: without readahead, so the pages come in as single 4 KiB pages and
        a write through the map then dirties one page, not a large folio."""
        ...

    def duplicate(self) -> DiskFile:
        """Another handle on the same file (closing one leaves the other usable)."""
        ...

    def close(self) -> None:
        """Unmap (if mapped) and close."""
        ...


class Disk(Protocol):
    """The file system as the store uses it."""

    def open(self, path: str) -> DiskFile:
        """Open an existing file read-write.

        Raises:
            FileNotFoundError: it does not exist.
        """
        ...

    def open_new(self, path: str) -> DiskFile:
        """Create an empty file and open it read-write (replacing one of that name)."""
        ...

    def exists(self, path: str) -> bool: ...
    def isdir(self, path: str) -> bool: ...
    def listdir(self, path: str) -> list[str]:
        """Names in a directory (FileNotFoundError if it does not exist)."""
        ...

    def file_size(self, path: str) -> int: ...
    def mtime_ms(self, path: str) -> int: ...
    def makedirs(self, path: str) -> None:
        """Create ``path`` and missing parents, each new entry synced into its parent."""
        ...

    def unlink(self, path: str) -> None: ...
    def rmdir(self, path: str) -> None: ...
    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` over ``dst`` (not synced: call :meth:`sync_dir`)."""
        ...

    def sync_dir(self, path: str) -> None:
        """Force the names in directory ``path`` to disk."""
        ...

    def read_file(self, path: str) -> bytes:
        """A small file's whole content (FileNotFoundError if missing)."""
        ...

    def write_file(self, path: str, data: bytes, *, sync: bool) -> None:
        """Create or replace ``path``'s content (``sync``: force it to disk)."""
        ...

    def lock(self, path: str) -> int:
        """Take an exclusive lock on ``path`` (created if needed); returns a token for
        :meth:`unlock`.

        Raises:
            BlockingIOError: another process holds it.
        """
        ...

    def unlock(self, token: int) -> None: ...


def create_file(disk: Disk, path: str, size: int) -> DiskFile:
    """Create ``path`` of ``size`` bytes whole and durably: sized and its blocks reserved under
    ``<path>.new``, synced, renamed into place, the directory synced (fault points
    ``file.create.before_rename`` and ``file.create.before_dir_sync``). A crash leaves no
    file or the whole one (and perhaps a ``.new`` leftover, deleted at load).

    Raises:
        FileExistsError: ``path`` exists.
        OSError: the blocks cannot be reserved (``ENOSPC``) or the file not created; the
            temporary file is removed.
    """
    if disk.exists(path):
        raise FileExistsError(errno.EEXIST, "file exists", path)
    tmp = path + FILE_SUFFIX_NEW
    f = disk.open_new(tmp)
    try:
        f.truncate(size)
        f.reserve(size)
        f.sync()
        faults.point("file.create.before_rename")
        disk.replace(tmp, path)
        faults.point("file.create.before_dir_sync")
        disk.sync_dir(os.path.dirname(path) or ".")
    except BaseException:
        f.close()
        if disk.exists(tmp):
            try:
                disk.unlink(tmp)
            except OSError:
                logger.exception("could not delete %s", tmp)
        raise
    return f


def write_atomically(disk: Disk, path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new content: temp file,
    sync, rename, sync the directory (fault points ``metadata.before_rename`` and
    ``metadata.after_rename``)."""
    tmp = path + FILE_SUFFIX_NEW
    disk.write_file(tmp, data, sync=True)
    faults.point("metadata.before_rename")
    disk.replace(tmp, path)
    faults.point("metadata.after_rename")
    disk.sync_dir(os.path.dirname(path) or ".")


def _no_readahead(fd: int) -> None:
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:  # pragma: no branch - absent on macOS
        advise(fd, 0, 0, os.POSIX_FADV_RANDOM)


class _OsFile:
    """A file descriptor plus its optional shared mapping."""

    __slots__ = ("_fd", "_map", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._map: mmap.mmap | None = None

    @property
    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def reserve(self, size: int) -> None:
        try:
            os.posix_fallocate(self._fd, 0, size)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # pragma: no cover - e.g. some FUSE
                logger.warning(
                    "%s: cannot reserve blocks (%s); the file stays sparse", self.path, exc
                )
                return
            raise

    def map(self, size: int) -> FileMap:
        self._map = mmap.mmap(self._fd, size, flags=mmap.MAP_SHARED)
        return self._map

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def read_into(
        self,
        buf: bytearray | memoryview,
        pos: int,
        length: int | None = None,
        *,
        single_pages: bool = False,
    ) -> None:
        if single_pages:
            # No readahead (POSIX_FADV_RANDOM, on the open file this descriptor shares): a
            # sequential read grows the readahead's folios up to 2 MiB (Linux >= 6.x, ext4's
            # large folios), and a later 1 KiB write through the map then dirties, and every
            # fdatasync writes, the whole folio (issue 18: 48 KiB at p50 and 2 MiB at p90 per
            # SYNC_FLUSH round of ~1-2 records). Without readahead each page comes in as one
            # 4 KiB folio. Only SYNC_FLUSH asks for it: an ASYNC_FLUSH writer is faster over
            # large folios (`bench store`'s best pass 233-352k with single pages against
            # 300-352k without, three alternated pairs).
            _no_readahead(self._fd)
        # one preadv of the buffer repeated (IOV_MAX of them at most): the GIL is released
        # once per call, not once per len(buf) bytes
        whole = memoryview(buf)
        end = pos + (len(whole) if length is None else length)
        while pos < end:
            count, rest = divmod(min(end - pos, len(whole) * _IOV_MAX), len(whole))
            got = os.preadv(self._fd, [whole] * count + ([whole[:rest]] if rest else []), pos)
            if got <= 0:  # end of file
                return
            pos += got

    def duplicate(self) -> DiskFile:
        return _OsFile(self.path, os.dup(self._fd))

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # pragma: no cover - the store never exports views
                logger.warning("%s still has exported buffers; leaving it mapped", self.path)
            self._map = None
        os.close(self._fd)


class OsDisk:
    """The real file system."""

    def open(self, path: str) -> DiskFile:
        return _OsFile(path, os.open(path, os.O_RDWR))

    def open_new(self, path: str) -> DiskFile:
        return _OsFile(path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime_ms(self, path: str) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def makedirs(self, path: str) -> None:
        path = os.path.abspath(path)
        if os.path.isdir(path):
            return
        parent = os.path.dirname(path)
        if parent != path:
            self.makedirs(parent)
        try:
            os.mkdir(path)
        except FileExistsError:
            return
        self.sync_dir(parent)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_file(self, path: str, data: bytes, *, sync: bool) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        return fd

    def unlock(self, token: int) -> None:
        os.close(token)


#: The real file system (the store's default).
OS_DISK: Disk = OsDisk()
