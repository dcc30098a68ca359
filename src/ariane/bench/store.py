"""``ariane bench store``: message store throughput next to the raw disk bandwidth.

Phases, each timed separately on the same directory's file system:

1. disk: the same number of bytes the async phase stores, written sequentially in 4 MiB
   chunks, twice without (first and best pass) and twice with a final fsync (best kept);
2. async, in ``--passes`` passes (3): each pass first writes the reference, the same bytes
   copied in 4 MiB chunks into fresh ``posix_fallocate``d files of the CommitLog's size mapped
   with mmap (the file state the CommitLog writes into), then runs the store: one writer
   appends N messages of S bytes with ASYNC_FLUSH; the clock stops when dispatch has caught up
   (ConsumeQueue + index built), the append-only rate is printed too. The ratio of each pass
   compares the store with the reference written just before it into the same kind of fresh
   pages (the median pass's ratio is reported as ``async_ratio_to_mapped``), so the VM's fresh-memory rate, which swings between runs, cancels out (issue 18
   item 3: the old ratio against a single probe swung from 110 % to 13 %);
3. read: every message read back through the ConsumeQueues (32 per call, like a pull);
4. sync: 64 writer threads append with SYNC_FLUSH (group commit), each put returning only
   after fsync covered it.

The store phases count and time the directory fsyncs the store makes (new CommitLog,
ConsumeQueue and index files, the checkpoint; issue 12) and print their share of the phase.

Messages look like a producer's: a TAGS property and a 32-character UNIQ_KEY (indexed), built
the way the send processor hands them to the store (positionally, with the properties' wire
text). The process runs the collector the way a started broker does (``settle_after_start`` with
the broker's ``gcYoungThreshold``, ``--gc-young-threshold``): the put is measured in a broker's
process, not in a CLI's with CPython's defaults.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Any

import click
import orjson

from ariane.bench._workdir import make_work_dir
from ariane.broker.config import BrokerConfig
from ariane.common.cli_bounds import BODY_BYTES, COUNT, OPTIONAL_COUNT, THREADS
from ariane.common.gc_policy import settle_after_start
from ariane.common.message import HostPort
from ariane.common.native import build_name
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.disk import OsDisk
from ariane.store.inner import MessageInner
from ariane.store.mapped_file import MappedFile
from ariane.store.message_store import MessageStore
from ariane.store.put_native import new_inner
from ariane.store.results import GetStatus

__all__ = ["store_bench"]

_QUEUES = 8
_HOST = HostPort(b"\x7f\x00\x00\x01", 10911)
_TOPIC = "BenchmarkTest"
#: a started broker's young-collection threshold (``gcYoungThreshold``'s default)
_BROKER_GC_YOUNG = BrokerConfig().gc_young_threshold


def _disk_bandwidth(directory: str, total: int, fsync: bool) -> float:
    path = os.path.join(directory, "disk-probe")
    chunk = os.urandom(4 << 20)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < total:
            n = min(len(chunk), total - written)
            os.write(fd, chunk[:n] if n < len(chunk) else chunk)
            written += n
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    os.unlink(path)
    return total / elapsed / 1e6


def _mapped_bandwidth(directory: str, total: int, file_size: int) -> float:
    """MB/s of copying ``total`` bytes into fresh fallocated, mapped files (the clock runs from
    the first copy to the last, like the store's after ``start()`` created its first file)."""
    os.makedirs(directory, exist_ok=True)
    chunk = os.urandom(4 << 20)
    files = [
        MappedFile(os.path.join(directory, f"{i * file_size:020d}"), file_size)
        for i in range(-(-total // file_size))
    ]
    try:
        start = time.perf_counter()
        written = 0
        for mf in files:
            mm = mf.mm
            pos = 0
            while pos < file_size and written < total:
                n = min(len(chunk), file_size - pos, total - written)
                mm[pos : pos + n] = chunk if n == len(chunk) else chunk[:n]
                pos += n
                written += n
        elapsed = time.perf_counter() - start
    finally:
        for mf in files:
            mf.destroy(sync_dir=False)
    return total / elapsed / 1e6


class _TimedDirSyncs(OsDisk):
    """The real file system, counting and timing directory fsyncs."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.frozen = (0, 0.0)
        self._lock = threading.Lock()

    #: False skips them (``--no-dir-sync``: to measure what they cost; unsafe otherwise)
    enabled = True

    def sync_dir(self, path: str) -> None:
        start = time.perf_counter()
        if self.enabled:
            super().sync_dir(path)
        elapsed = time.perf_counter() - start
        with self._lock:
            self.count += 1
            self.seconds += elapsed

    def reset(self) -> None:
        """Count from now on (the timed part of a phase)."""
        with self._lock:
            self.count, self.seconds = 0, 0.0

    def freeze(self) -> None:
        """Stop counting: what the timed part of the phase made."""
        with self._lock:
            self.frozen = (self.count, self.seconds)


_DIR_SYNCS = {"async": _TimedDirSyncs(), "sync": _TimedDirSyncs()}


def _config(root: str, flush: FlushDiskType, size: int, index: bool = True) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        flush_disk_type=flush,
        max_message_size=max(4 << 20, size + 4096),
        message_index_enable=index,
    )


def _message(body: bytes, i: int, prefix: str) -> MessageInner:
    """Message ``i`` the way the send processor hands one to the store: built positionally
    (``new_inner``, as the processor builds it), with its property map and the properties'
    text as it came off the wire."""
    uniq = f"{prefix}{i:012X}"
    return new_inner(
        _TOPIC, i % _QUEUES, body, 0, {"TAGS": "TagA", "UNIQ_KEY": uniq}, 0, 0, _HOST, _HOST,
        0, 0, f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq}\x02",
    )  # fmt: skip


def _async_phase(
    root: str, n: int, body: bytes, index: bool, gc_young: int
) -> tuple[float, float, MessageStore]:
    store = MessageStore(
        _config(root, FlushDiskType.ASYNC_FLUSH, len(body), index), disk=_DIR_SYNCS["async"]
    )
    store.load()
    store.start()
    if gc_young >= 0:  # the collector as a started broker sets it (broker/cli.py)
        settle_after_start(gc_young)
    put = store.put_message
    prefix = "A" * 20
    _DIR_SYNCS["async"].reset()
    start = time.perf_counter()
    for i in range(n):
        r = put(_message(body, i, prefix))
        if r.msg_num == 0:
            raise click.ClickException(f"put failed: {r}")
    appended = time.perf_counter() - start
    store.wait_dispatched(600)
    dispatched = time.perf_counter() - start
    _DIR_SYNCS["async"].freeze()
    return appended, dispatched, store


def _read_phase(store: MessageStore, n: int) -> float:
    start = time.perf_counter()
    got = 0
    for q in range(_QUEUES):
        offset = 0
        while True:
            res = store.get_message("bench", _TOPIC, q, offset, 32)
            if res.status is not GetStatus.FOUND:
                break
            got += len(res.messages)
            offset = res.next_begin_offset
    elapsed = time.perf_counter() - start
    if got != n:
        raise click.ClickException(f"read back {got} messages, expected {n}")
    return elapsed


def _sync_phase(root: str, n: int, body: bytes, writers: int, index: bool) -> float:
    store = MessageStore(
        _config(root, FlushDiskType.SYNC_FLUSH, len(body), index), disk=_DIR_SYNCS["sync"]
    )
    store.load()
    store.start()
    per = n // writers
    errors: list[str] = []
    barrier = threading.Barrier(writers + 1)

    def run(w: int) -> None:
        prefix = f"S{w:019d}"
        barrier.wait()
        for i in range(w * per, (w + 1) * per):
            r = store.put_message(_message(body, i, prefix))
            if not r.ok:
                errors.append(str(r))
                return

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    _DIR_SYNCS["sync"].reset()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    _DIR_SYNCS["sync"].freeze()
    store.shutdown()
    if errors:
        raise click.ClickException(f"sync put failed: {errors[0]}")
    return elapsed


@click.command("store")
@click.option("--messages", "messages", type=COUNT, default=1_000_000, show_default=True, help="N")
@click.option("--size", "size", type=BODY_BYTES, default=1024, show_default=True, help="body bytes")
@click.option(
    "--sync-messages", default=None, type=OPTIONAL_COUNT, help="N for the sync phase (0: skip) [N]"
)
@click.option(
    "--writers", type=THREADS, default=64, show_default=True, help="sync-phase writer threads"
)
@click.option("--dir", "directory", default=None, help="where to create the stores [tmp]")
@click.option("--no-index", is_flag=True, help="disable the key index (messageIndexEnable)")
@click.option(
    "--passes", type=COUNT, default=3, show_default=True, help="reference + async store passes"
)
@click.option(
    "--gc-young-threshold",
    "gc_young",
    type=click.IntRange(-1, 1_000_000),  # the broker's gcYoungThreshold takes 0..1000000
    default=_BROKER_GC_YOUNG,
    show_default=True,
    help="young collections every N allocations, as a broker (gcYoungThreshold; 0: freeze only,"
    " CPython's 700; -1: the collector untouched)",
)
@click.option(
    "--no-dir-sync",
    is_flag=True,
    help="skip the store's directory fsyncs (to measure their cost; not crash-safe)",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object last")
def store_bench(
    messages: int,
    size: int,
    sync_messages: int | None,
    writers: int,
    directory: str | None,
    no_index: bool,
    passes: int,
    gc_young: int,
    no_dir_sync: bool,
    as_json: bool,
) -> None:
    """Append, dispatch and read back N messages of SIZE bytes; compare with the disk."""
    _TimedDirSyncs.enabled = not no_dir_sync
    base = make_work_dir("ariane-bench-", directory)
    body = os.urandom(size)
    n_sync = sync_messages if sync_messages is not None else messages
    n_sync -= n_sync % writers
    out: dict[str, Any] = {
        "dir_sync": not no_dir_sync,
        "messages": messages,
        "size": size,
        "sync_messages": n_sync,
        "index": not no_index,
        "build": build_name(),
        "gc_young_threshold": gc_young,
    }
    try:
        probe = os.path.join(base, "disk")
        os.makedirs(probe)
        total = messages * size
        # The first write needs fresh page-cache pages; the second reuses the pages the first
        # freed and is often much faster. Both are reported, and the async ratio against both:
        # the store also writes into fresh pages (its CommitLog pages are read into the page
        # cache a window ahead of the writer, inside the timed run).
        cold = _disk_bandwidth(probe, total, fsync=False)
        warm = _disk_bandwidth(probe, total, fsync=False)
        out["disk_write_cold_mb_per_s"] = cold
        out["disk_write_mb_per_s"] = max(cold, warm)
        out["disk_fsync_write_mb_per_s"] = max(
            _disk_bandwidth(probe, total, fsync=True) for _ in range(2)
        )
        file_size = _config(base, FlushDiskType.ASYNC_FLUSH, size).mapped_file_size_commit_log
        out["passes"] = []
        for p in range(max(1, passes)):
            mapped = _mapped_bandwidth(os.path.join(base, "mapped"), total, file_size)
            appended, dispatched, store = _async_phase(
                os.path.join(base, "async"), messages, body, not no_index, gc_young
            )
            if p < passes - 1:
                store.shutdown()
                shutil.rmtree(os.path.join(base, "async"), ignore_errors=True)
            mb = messages * size / dispatched / 1e6
            out["passes"].append(
                {
                    "disk_mapped_mb_per_s": mapped,
                    "async_msgs_per_s": messages / dispatched,
                    "async_mb_per_s": mb,
                    "async_append_msgs_per_s": messages / appended,
                    "ratio_to_mapped": mb / mapped,
                }
            )
        try:
            read = _read_phase(store, messages)
        finally:
            store.shutdown()
        shutil.rmtree(os.path.join(base, "async"), ignore_errors=True)
        ratios = sorted(p["ratio_to_mapped"] for p in out["passes"])
        out["async_ratio_to_mapped"] = ratios[len(ratios) // 2]  # the median pass
        out["async_append_msgs_per_s"] = messages / appended
        out["async_msgs_per_s"] = messages / dispatched
        out["async_mb_per_s"] = messages * size / dispatched / 1e6
        out["read_msgs_per_s"] = messages / read
        out["read_mb_per_s"] = messages * size / read / 1e6
        sync = (
            _sync_phase(os.path.join(base, "sync"), n_sync, body, writers, not no_index)
            if n_sync
            else 0.0
        )
        out["sync_msgs_per_s"] = n_sync / sync if sync else 0.0
        out["sync_mb_per_s"] = n_sync * size / sync / 1e6 if sync else 0.0
        for phase, seconds in (("async", dispatched), ("sync", sync)):
            count, dir_s = _DIR_SYNCS[phase].frozen
            out[f"{phase}_dir_fsyncs"] = count
            out[f"{phase}_dir_fsync_ms"] = dir_s * 1000
            out[f"{phase}_dir_fsync_share"] = dir_s / seconds if seconds else 0.0
        out["async_ratio_to_disk"] = out["async_mb_per_s"] / out["disk_write_mb_per_s"]
        out["async_ratio_to_disk_cold"] = out["async_mb_per_s"] / out["disk_write_cold_mb_per_s"]
        out["sync_ratio_to_disk_fsync"] = out["sync_mb_per_s"] / out["disk_fsync_write_mb_per_s"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _print(out)
    if as_json:
        click.echo(orjson.dumps(out).decode())


def _print(out: dict[str, Any]) -> None:
    click.echo(
        f"messages={out['messages']} size={out['size']} B index={out['index']} build={out['build']}"
        f" gc_young_threshold={out['gc_young_threshold']}"
    )
    click.echo(
        f"disk sequential write: {out['disk_write_mb_per_s']:.0f} MB/s (page cache, best; "
        f"first write {out['disk_write_cold_mb_per_s']:.0f} MB/s), "
        f"{out['disk_fsync_write_mb_per_s']:.0f} MB/s (with fsync)"
    )
    for i, p in enumerate(out["passes"], 1):
        click.echo(
            f"pass {i}: mapped-file write {p['disk_mapped_mb_per_s']:.0f} MB/s, async put+dispatch"
            f" {p['async_msgs_per_s']:,.0f} msg/s {p['async_mb_per_s']:.0f} MB/s"
            f" = {p['ratio_to_mapped']:.2f} x the mapped-file write"
        )
    click.echo(
        f"async put+dispatch: {out['async_msgs_per_s']:,.0f} msg/s {out['async_mb_per_s']:.0f} MB/s"
        f" (appends alone {out['async_append_msgs_per_s']:,.0f} msg/s),"
        f" {out['async_ratio_to_disk']:.2f} x best disk write,"
        f" {out['async_ratio_to_disk_cold']:.2f} x first disk write"
    )
    click.echo(f"median pass: {out['async_ratio_to_mapped']:.2f} x the mapped-file write")
    click.echo(f"read back: {out['read_msgs_per_s']:,.0f} msg/s {out['read_mb_per_s']:.0f} MB/s")
    click.echo(
        f"sync ({out['sync_messages']} msgs): {out['sync_msgs_per_s']:,.0f} msg/s "
        f"{out['sync_mb_per_s']:.0f} MB/s, {out['sync_ratio_to_disk_fsync']:.2f} x fsync disk"
    )
    click.echo(
        "directory fsyncs: "
        + ", ".join(
            f"{phase} {out[f'{phase}_dir_fsyncs']} ({out[f'{phase}_dir_fsync_ms']:.1f} ms, "
            f"{out[f'{phase}_dir_fsync_share'] * 100:.2f} % of the phase)"
            for phase in ("async", "sync")
        )
    )
