"""SYNC_FLUSH: the CommitLog's pages just ahead of the writer written back once, unchanged
(issue 18). A fallocated block is *unwritten* until its first write-back; converting it made
a group commit's ``fdatasync`` wait for a kernel worker and write the inode. The allocation
thread now does it ahead of the writer, under the writers' lock, without changing a byte."""

from __future__ import annotations

import fcntl
import struct
import threading
from pathlib import Path
from types import TracebackType

import pytest

from ariane.store.config import FlushDiskType
from ariane.store.format import OS_PAGE_SIZE
from ariane.store.mapped_file import INIT_PAGES_PER_LOCK, MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue

from .helpers import open_store

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_EXTENT_UNWRITTEN = 0x800
_EXTENTS = 32


def unwritten_ranges(path: str) -> list[tuple[int, int]] | None:
    """The file's unwritten extents as (start, end), or None without FIEMAP."""
    head = struct.pack("=QQIIII", 0, 2**64 - 1, 0, 0, _EXTENTS, 0)
    buf = bytearray(head + bytes(56 * _EXTENTS))
    with open(path, "rb") as f:
        try:
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, buf)
        except OSError:
            return None
    count = struct.unpack_from("=I", buf, 20)[0]
    out = []
    for i in range(count):
        logical, _, length = struct.unpack_from("=QQQ", buf, 32 + 56 * i)
        flags = struct.unpack_from("=I", buf, 32 + 56 * i + 40)[0]
        if flags & FIEMAP_EXTENT_UNWRITTEN:
            out.append((logical, logical + length))
    return out


class CountingLock:
    """A lock that counts its holds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holds = 0

    def __enter__(self) -> bool:
        self.lock.acquire()
        self.holds += 1
        return True

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.lock.release()


def test_initialize_writes_the_pages_back_unchanged_and_converts_their_blocks(
    tmp_path: Path,
) -> None:
    size = 1 << 20
    mf = MappedFile(str(tmp_path / "00000000000000000000"), size)
    try:
        if unwritten_ranges(mf.path) != [(0, size)]:
            pytest.skip("no unwritten extents from posix_fallocate here")
        mf.mm[0:3] = b"abc"
        mf.wrote_position = 3
        lock = CountingLock()
        assert mf.initialize(OS_PAGE_SIZE + 10, 40 * OS_PAGE_SIZE, lock)
        # pages 1..39 written back: 16 + 16 + 7 pages, one hold each
        assert INIT_PAGES_PER_LOCK == 16
        assert lock.holds == 3
        # (page 0, dirty with the record, was written by the same fdatasync)
        assert unwritten_ranges(mf.path) == [(40 * OS_PAGE_SIZE, size)]
        assert mf.mm[0:3] == b"abc"
        assert mf.mm[3:size] == bytes(size - 3)
        assert mf.wrote_position == 3  # no bookkeeping moved
    finally:
        mf.close()
    assert not mf.initialize(0, OS_PAGE_SIZE, CountingLock())  # closed: nothing


def test_a_writer_holding_the_lock_keeps_every_byte(tmp_path: Path) -> None:
    """The writer's bytes land in pages being written back: none is lost."""
    size = 1 << 20
    mf = MappedFile(str(tmp_path / "00000000000000000000"), size)
    lock = threading.Lock()
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        pos = 0
        while not stop.is_set() and pos < size - 100:
            with lock:
                mf.mm[pos : pos + 100] = bytes([1 + pos % 250]) * 100
            written.append(pos)
            pos += 100

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(5):
            mf.initialize(0, size, lock)
    finally:
        stop.set()
        t.join()
    for pos in written:
        assert mf.mm[pos : pos + 100] == bytes([1 + pos % 250]) * 100
    end = written[-1] + 100
    assert mf.mm[end:size] == bytes(size - end)
    mf.close()


def test_initialize_ahead_goes_on_from_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = 1 << 20
    queue = MappedFileQueue(str(tmp_path / "commitlog"), size)
    assert queue.get_last_mapped_file(0) is not None
    calls: list[tuple[int, int]] = []

    def record(self: MappedFile, start: int, end: int, lock: object) -> bool:
        calls.append((start, end))
        return True

    monkeypatch.setattr(MappedFile, "initialize", record)
    lock = threading.Lock()
    assert not queue.initialize_ahead(100, 0, lock)  # off
    assert queue.initialize_ahead(100, 64 << 10, lock)  # from the page after the writer's
    assert calls == [(OS_PAGE_SIZE, 64 << 10)]
    assert not queue.initialize_ahead(200, 64 << 10, lock)  # less than a page further
    assert queue.initialize_ahead(40_000, 64 << 10, lock)
    assert calls[-1] == (64 << 10, (40_000 + (64 << 10)) // OS_PAGE_SIZE * OS_PAGE_SIZE)
    assert queue.initialize_ahead(size - 10_000, 64 << 10, lock)  # never past the file
    assert calls[-1] == (size - 10_000 + OS_PAGE_SIZE - (size - 10_000) % OS_PAGE_SIZE, size)
    monkeypatch.undo()
    queue.destroy()


def test_only_a_sync_flush_store_initializes_ahead(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", flush_disk_type=FlushDiskType.SYNC_FLUSH) as store:
        assert store.allocator is not None
        assert store.allocator.init_lead_bytes == 256 << 10
        assert store.allocator.init_lock is store.commit_log.put_lock
    with open_store(tmp_path / "a") as store:
        assert store.allocator is not None
        assert store.allocator.init_lead_bytes == 0
