"""``ariane bench recovery``: how long a start takes after a crash, and after a clean stop.

Phases on one store directory:

1. fill: ASYNC_FLUSH puts of SIZE-byte messages (TAGS and an indexed UNIQ_KEY, 8 queues)
   until the CommitLog holds SIZE_MB MiB, then a flush of everything and a stop without
   cleanup: the abort file stays, as after ``kill -9`` (the checkpoint is the last flush's);
2. abnormal start: ``load()`` walks the CommitLog from the file the checkpoint points into
   (every record's magic, lengths and CRC) and re-dispatches what the ConsumeQueues and index
   may lack;
3. normal start, after a clean ``shutdown()`` of that store: the walk of the last files only.

Before each start the store's files are dropped from the page cache (``posix_fadvise``
DONTNEED after they were synced; ``--warm`` keeps them), so the starts read from the disk as
after a power loss or a reboot.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import click
import orjson

from ariane.bench._workdir import make_work_dir
from ariane.bench.store import _message
from ariane.common.cli_bounds import BODY_BYTES, COUNT
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.message_store import MessageStore

__all__ = ["recovery_bench"]


def _config(root: str, size: int, file_mb: int) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        max_message_size=max(min(4 << 20, (file_mb << 20) // 2), size + 4096),
        mapped_file_size_commit_log=file_mb << 20,
    )


def _drop_page_cache(root: str) -> None:
    """Evict the store's (synced, clean) pages from the page cache, nothing else's."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _fill(root: str, size_mb: int, size: int, file_mb: int) -> tuple[int, float]:
    store = MessageStore(_config(root, size, file_mb))
    store.load()
    store.start()
    body = os.urandom(size)
    target = size_mb << 20
    start = time.perf_counter()
    n = 0
    while store.commit_log.max_offset < target:
        r = store.put_message(_message(body, n, "R" * 20))
        if r.msg_num == 0:
            raise click.ClickException(f"put failed: {r}")
        n += 1
    store.flush()
    elapsed = time.perf_counter() - start
    store.close_without_cleanup()
    return n, elapsed


def _timed_start(
    root: str, size: int, file_mb: int, warm: bool, clean: bool
) -> tuple[float, MessageStore]:
    if not warm:
        _drop_page_cache(root)
    store = MessageStore(_config(root, size, file_mb))
    start = time.perf_counter()
    if not store.load():
        raise click.ClickException("the store did not load")
    elapsed = time.perf_counter() - start
    if store.last_exit_ok is not clean:
        raise click.ClickException(f"expected a {'clean' if clean else 'crashed'} store")
    return elapsed, store


@click.command("recovery")
@click.option(
    "--size-mb", type=COUNT, default=1024, show_default=True, help="CommitLog MiB to recover"
)
@click.option("--size", type=BODY_BYTES, default=1024, show_default=True, help="message body bytes")
@click.option(
    "--file-mb",
    type=click.IntRange(1, 2047),  # a CommitLog file is < 2 GiB (int32 positions)
    default=1024,
    show_default=True,
    help="CommitLog file size (mappedFileSize)",
)
@click.option("--dir", "directory", default=None, help="where to create the store [tmp]")
@click.option("--warm", is_flag=True, help="keep the store's pages in the page cache")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object last")
def recovery_bench(
    size_mb: int, size: int, file_mb: int, directory: str | None, warm: bool, as_json: bool
) -> None:
    """Time the abnormal (after a crash) and the normal start of a SIZE_MB MiB CommitLog."""
    base = make_work_dir("ariane-bench-recovery-", directory)
    root = os.path.join(base, "store")
    out: dict[str, Any] = {"size_mb": size_mb, "size": size, "file_mb": file_mb, "warm": warm}
    try:
        n, fill_s = _fill(root, size_mb, size, file_mb)
        out["messages"] = n
        out["fill_s"] = fill_s
        abnormal_s, store = _timed_start(root, size, file_mb, warm, clean=False)
        try:
            out["max_offset"] = store.commit_log.max_offset
            store.start()  # a clean stop needs a running store (it removes the abort file)
        finally:
            store.shutdown()
        out["abnormal_recovery_s"] = abnormal_s
        normal_s, store = _timed_start(root, size, file_mb, warm, clean=True)
        store.shutdown()
        out["normal_recovery_s"] = normal_s
        out["abnormal_mb_per_s"] = out["max_offset"] / abnormal_s / 1e6
    finally:
        shutil.rmtree(base, ignore_errors=True)
    click.echo(
        f"CommitLog {out['max_offset'] / (1 << 20):,.0f} MiB ({n:,} messages of {size} B, "
        f"{file_mb} MiB files, page cache {'warm' if warm else 'dropped'})"
    )
    click.echo(
        f"abnormal recovery (abort file): {abnormal_s:.2f} s ({out['abnormal_mb_per_s']:.0f} MB/s)"
    )
    click.echo(f"normal recovery (clean shutdown): {normal_s:.2f} s")
    if as_json:
        click.echo(orjson.dumps(out).decode())
