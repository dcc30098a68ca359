"""A store on a small file system that fills up: puts are refused with a clear status (never a
SIGBUS from a mapped page without a block), nothing stored is damaged, and puts are accepted
again once space is freed.

The file system is a size-limited tmpfs mounted for the test (block reservations count against
its size, as on ext4); the test is skipped, saying why, where mounting is not allowed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ariane.common.record import decode_record
from ariane.store.config import FlushDiskType
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus, PutStatus
from ariane.store.tools.verify import verify
from tests.support.polling import wait_until
from tests.unit.store.helpers import msg, small_config

pytestmark = pytest.mark.integration

FS_BYTES = 6 * 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(path: Path, leave: int) -> None:
    """Take all the space but ``leave`` bytes with one file."""
    stat = os.statvfs(path.parent)
    free = stat.f_bavail * stat.f_frsize
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, max(4096, free - leave))
    finally:
        os.close(fd)


def _read_back(store: MessageStore, acked: list[tuple[int, int, bytes]]) -> None:
    for q, qoff, body in acked:
        res = store.get_message("g", "Full", q, qoff, 1)
        assert res.status is GetStatus.FOUND, (q, qoff, res.status)
        m, _ = decode_record(res.messages[0], check_crc=True)
        assert (m.body, m.queue_offset) == (body, qoff)


@pytest.mark.parametrize("mode", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_full_disk_refuses_puts_then_recovers(small_fs: Path, mode: FlushDiskType) -> None:
    root = small_fs / "store"
    config = small_config(
        root, flush_disk_type=mode, mapped_file_size_commit_log=512 * 1024,
        mapped_file_size_consume_queue=200 * 20,
    )  # fmt: skip
    # the 90 %-used rule would refuse puts first; here the reservations themselves must
    store = MessageStore(config, disk_usage=lambda path: 0.0)
    assert store.load()
    store.start()
    filler = small_fs / "filler"
    _fill(filler, leave=1024 * 1024)
    acked: list[tuple[int, int, bytes]] = []
    refused = None
    try:
        for i in range(20_000):
            body = b"%06d" % i * 50
            r = store.put_message(msg("Full", i % 2, body))
            if not r.ok:
                refused = r
                break
            acked.append((i % 2, r.logics_offset, body))
        assert refused is not None, "the file system never filled up"
        assert refused.status in (
            PutStatus.CREATE_MAPPED_FILE_FAILED, PutStatus.SERVICE_NOT_AVAILABLE,
        )  # fmt: skip
        assert refused.remark is not None
        assert "No space left" in refused.remark or "disk full" in refused.remark
        again = store.put_message(msg("Full", 0, b"still full"))
        assert again.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert again.remark is not None
        filler.unlink()
        assert wait_until(lambda: store.is_writeable, timeout_s=30, what="writes accepted again")
        r = store.put_message(msg("Full", 0, b"after"))
        assert r.ok, r.remark
        acked.append((0, r.logics_offset, b"after"))
        # a ConsumeQueue file that could not be created held dispatch back: it catches up
        assert store.wait_dispatched(30)
        _read_back(store, acked)
    finally:
        store.shutdown()
    problems, _ = verify(str(root))
    assert problems == [], problems
    with MessageStore(config) as again_store:
        _read_back(again_store, acked)
