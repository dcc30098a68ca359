"""A warm step longer than the allocation thread's buffer is one read (issue 18): the buffer
repeated in one ``preadv`` (so the GIL is released and taken back once per step, not once
per 1 MiB), up to ``IOV_MAX`` buffers a call, stopping at the end of the file."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from ariane.common.clock import ManualClock
from ariane.store import disk as disk_module
from ariane.store.commit_log import CommitLog
from ariane.store.config import FlushDiskType
from ariane.store.disk import OsDisk
from ariane.store.mapped_file_queue import MappedFileQueue
from tests.unit.store.helpers import small_config


def _file(tmp_path: Path, size: int) -> str:
    path = str(tmp_path / "f")
    with open(path, "wb") as f:
        f.write(bytes(i % 251 for i in range(size)))
    return path


def _counting_preadv(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    real = os.preadv

    def preadv(fd: int, buffers: list[memoryview], pos: int) -> int:
        calls.append((len(buffers), pos))
        return real(fd, buffers, pos)

    monkeypatch.setattr(disk_module.os, "preadv", preadv)
    return calls


def test_a_read_longer_than_the_buffer_is_one_preadv_of_the_buffer_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path, 65536)
    calls = _counting_preadv(monkeypatch)
    f = OsDisk().open(path)
    buf = bytearray(4096)
    f.read_into(buf, 1000, 3 * 4096 + 100)
    assert calls == [(4, 1000)]
    # the buffer holds the last piece over the start of the one before it
    last = 1000 + 3 * 4096
    expected = bytearray(i % 251 for i in range(last - 4096, last))
    expected[:100] = bytes(i % 251 for i in range(last, last + 100))
    assert buf == expected
    calls.clear()
    f.read_into(buf, 8)  # the default: len(buf) bytes
    assert calls == [(1, 8)]
    assert buf == bytes(i % 251 for i in range(8, 8 + 4096))
    f.close()


def test_more_than_iov_max_buffers_take_more_calls_and_the_end_of_file_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path, 3 * 1024 * 16 + 5)
    calls = _counting_preadv(monkeypatch)
    f = OsDisk().open(path)
    buf = bytearray(16)
    f.read_into(buf, 0, 2 * 1024 * 16 + 5)
    assert calls == [(1024, 0), (1024, 1024 * 16), (1, 2 * 1024 * 16)]
    calls.clear()
    f.read_into(buf, 3 * 1024 * 16, 1024 * 16)  # 5 bytes left: one short read, then the end
    # 1023 whole buffers and 11 bytes of one for the rest, which reads nothing: done
    assert calls == [(1024, 3 * 1024 * 16), (1024, 3 * 1024 * 16 + 5)]
    assert buf[:5] == bytes(i % 251 for i in range(3 * 1024 * 16, 3 * 1024 * 16 + 5))
    f.close()


def test_prepare_ahead_warms_a_step_longer_than_its_buffer_in_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = MappedFileQueue(str(tmp_path / "commitlog"), 64 * 1024, populate=True)
    buf = bytearray(4096)
    calls = _counting_preadv(monkeypatch)
    assert queue.prepare_ahead(0, 16384, buf, 12288)  # creates the first file, warms 12 KiB
    assert queue.warmed_to == 12288
    assert calls == [(3, 0)]
    assert queue.prepare_ahead(0, 16384, buf, 12288)  # the window's last 4 KiB
    assert queue.warmed_to == 16384
    assert calls[1:] == [(1, 12288)]
    assert not queue.prepare_ahead(0, 16384, buf, 12288)
    queue.shutdown()


def _dirtied_by_one_byte_at(path: str, pos: int) -> int:
    """Bytes this thread is charged as dirtied (``write_bytes`` of ``/proc/thread-self/io``,
    counted per folio when it turns dirty) by one byte written through a map at ``pos``."""

    def written() -> int:
        with open("/proc/thread-self/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("write_bytes"))

    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as mm:
            before = written()
            mm[pos] = 1
            return written() - before
    finally:
        os.close(fd)


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"), reason="needs Linux's task io")
def test_warmed_pages_are_single_pages_so_a_write_dirties_one_page(tmp_path: Path) -> None:
    """Issue 18: a sequential read ramps the readahead's folios up (256 KiB-2 MiB on this
    project's Linux 6.18 ext4), and every SYNC_FLUSH round's fdatasync then wrote the whole
    folio a 1 KiB record had dirtied. A warm read brings single pages in."""
    size, at = 48 << 20, 40 << 20
    plain, warmed = str(tmp_path / "plain"), str(tmp_path / "warmed")
    for path in (plain, warmed):
        with open(path, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, size)
    buf = bytearray(1 << 20)
    fd = os.open(plain, os.O_RDONLY)  # the same reads without the store: its folios grow
    try:
        for pos in range(0, size, len(buf)):
            os.preadv(fd, [buf], pos)
    finally:
        os.close(fd)
    if _dirtied_by_one_byte_at(plain, at) <= mmap.PAGESIZE:
        pytest.skip("this kernel or file system reads single pages anyway")
    f = OsDisk().open(warmed)
    for pos in range(0, size, len(buf)):
        f.read_into(buf, pos, single_pages=True)
    f.close()
    assert _dirtied_by_one_byte_at(warmed, at) == mmap.PAGESIZE


@pytest.mark.parametrize("single", [False, True])
def test_a_queue_warms_without_readahead_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, single: bool
) -> None:
    advised: list[int] = []
    monkeypatch.setattr(disk_module, "_no_readahead", advised.append)
    queue = MappedFileQueue(
        str(tmp_path / "commitlog"), 64 * 1024, populate=True, warm_single_pages=single
    )
    assert queue.prepare_ahead(0, 16384, bytearray(4096), 8192)
    assert queue.warmed_to == 8192
    assert len(advised) == (1 if single else 0)
    queue.shutdown()


@pytest.mark.parametrize(
    ("flush", "single"), [(FlushDiskType.ASYNC_FLUSH, False), (FlushDiskType.SYNC_FLUSH, True)]
)
def test_only_a_sync_flush_commit_log_warms_single_pages(
    tmp_path: Path, flush: FlushDiskType, single: bool
) -> None:
    """An ASYNC_FLUSH writer is faster over the readahead's large folios (issue 18's `bench
    store`); a SYNC_FLUSH one wants each group commit to write only what it dirtied."""
    log = CommitLog(small_config(str(tmp_path), flush_disk_type=flush), ManualClock(1))
    assert log.queue.warm_single_pages is single
