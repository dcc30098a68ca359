"""Power-loss runs on the simulated disk, and the checks every post-crash image must pass.

A run writes messages through a real ``MessageStore`` on a :class:`SimDisk` (its own flush
threads running), records what each put answered, then cuts the power at a random moment.
Each image built from that moment is written to a real directory, recovered by a real store,
and checked: what must survive survived, byte for byte at its queue offset; nothing served is
corrupt or foreign; every queue is a prefix without holes; keys find every survivor;
``ariane store verify`` is clean afterwards.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ariane.common import faults
from ariane.common.record import decode_record
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus, PutStatus
from ariane.store.simdisk import Frozen, Image, SimDisk
from ariane.store.tools.verify import verify
from tests.unit.store.helpers import msg

TOPIC = "PowerLoss"
QUEUES = 3
SIM_ROOT = "/sim/store"
SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None


def config(root: str, mode: FlushDiskType, **overrides: Any) -> StoreConfig:
    """Small files (rolls happen every few messages) and quick flush threads."""
    values: dict[str, Any] = {
        "store_path_root_dir": root,
        "flush_disk_type": mode,
        "mapped_file_size_commit_log": 8 * 1024,
        "max_message_size": 4 * 1024,
        "mapped_file_size_consume_queue": 16 * 20,
        "max_hash_slot_num": 16,
        "max_index_num": 32,
        "flush_interval_commit_log_ms": 5,
        "flush_commit_log_least_pages": 1,
        "flush_interval_consume_queue_ms": 5,
        "flush_consume_queue_thorough_interval_ms": 20,
        "flush_commit_log_thorough_interval_ms": 20,
    }
    values.update(overrides)
    return StoreConfig(**values)


def body_of(i: int) -> bytes:
    return (b"m%05d-" % i) * (1 + i % 37)


@dataclass
class Run:
    """What one run put and what the store answered."""

    mode: FlushDiskType
    #: the disk at the power cut (None when the images were built elsewhere: the FUSE tests)
    frozen: Frozen | None
    #: (queue id, queue offset) -> body, for every record the store may have written
    written: dict[tuple[int, int], bytes] = field(default_factory=dict)
    #: acknowledged puts: (i, queue id, queue offset)
    acked: list[tuple[int, int, int]] = field(default_factory=list)
    #: puts whose record ended before the CommitLog's flush point at the power cut
    flushed: list[tuple[int, int, int]] = field(default_factory=list)


def power_loss_run(
    mode: FlushDiskType,
    rng: random.Random,
    *,
    writers: int = 3,
    at_point: str | None = None,
    **overrides: Any,
) -> Run:
    """Writer threads put messages (each waits for its answer, as a client would) while the
    flush threads run; the power is cut when the k-th put (k random) is answered, with other
    puts in flight, or, with ``at_point``, exactly when that fault point is reached (its
    n-th time, n random)."""
    disk = SimDisk()
    store = MessageStore(config(SIM_ROOT, mode, **overrides), disk=disk)
    assert store.load()
    store.start()
    cut_after = rng.randint(1, 150)
    lock = threading.Condition()
    written: dict[tuple[int, int], bytes] = {}
    ends: list[tuple[int, tuple[int, int, int]]] = []
    acked: list[tuple[int, int, int]] = []
    stop = threading.Event()
    counter = iter(range(1_000_000))
    seeds = [rng.random() for _ in range(writers)]

    def write(seed: float) -> None:
        wrng = random.Random(seed)
        while not stop.is_set():
            with lock:
                i = next(counter)
            q = wrng.randrange(QUEUES)
            r = store.put_message(msg(TOPIC, q, body_of(i), KEYS=f"key{i}"))
            if r.msg_num == 0:
                continue
            with lock:
                written[(q, r.logics_offset)] = body_of(i)
                ends.append((r.wrote_offset + r.wrote_bytes, (i, q, r.logics_offset)))
                if r.status is PutStatus.PUT_OK:
                    acked.append((i, q, r.logics_offset))
                    lock.notify_all()
            if wrng.random() < 0.3:
                time.sleep(wrng.random() * 0.002)

    cut: list[tuple[list[tuple[int, int, int]], int, list[Any], Frozen]] = []

    def power_cut() -> None:
        with lock:
            acked_now = list(acked)
            flushed_now = store.commit_log.flushed_where  # only grows: below it is on disk
            ends_now = list(ends)
            cut.append((acked_now, flushed_now, ends_now, disk.power_cut()))
            lock.notify_all()

    if at_point is not None:
        faults.arm(at_point, power_cut, after=rng.randrange(3))
    threads = [threading.Thread(target=write, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    try:
        if at_point is None:
            with lock:
                assert lock.wait_for(lambda: len(acked) >= cut_after, 60)
            power_cut()
        else:
            with lock:
                assert lock.wait_for(lambda: bool(cut), 60), f"{at_point} never reached"
    finally:
        faults.disarm_all()
        stop.set()
        for t in threads:
            t.join()
        store.close_without_cleanup()
    acked_before, flushed_at, ends_before, frozen = cut[0]
    flushed = [entry for end, entry in ends_before if end <= flushed_at]
    return Run(mode, frozen, dict(written), acked_before, flushed)


def recover_and_check(run: Run, image: Image, sim_root: str = SIM_ROOT) -> int:
    """Recover ``image`` (its store under ``sim_root``) with a real store and check it;
    returns how many messages survive."""
    with tempfile.TemporaryDirectory(dir=SHM) as real:
        image.write_to(sim_root, real)
        store = MessageStore(config(real, run.mode))
        assert store.load(), "recovery failed"
        try:
            survivors = _check_queues(store, run)
            _check_keys(store, survivors)
            must = run.acked if run.mode is FlushDiskType.SYNC_FLUSH else run.flushed
            for i, q, qoff in must:
                assert survivors.get((q, qoff)) == i, f"message {i} ({q}, {qoff}) lost"
        finally:
            store.shutdown()
        problems, _ = verify(real)
        assert problems == [], problems
        return len(survivors)


def _check_queues(store: MessageStore, run: Run) -> dict[tuple[int, int], int]:
    """Every served message is intact and is the one put at its queue offset; each queue is a
    prefix from offset 0."""
    survivors: dict[tuple[int, int], int] = {}
    for q in range(QUEUES):
        offset = 0
        while True:
            res = store.get_message("g", TOPIC, q, offset, 32)
            if res.status is not GetStatus.FOUND:
                assert store.get_max_offset_in_queue(TOPIC, q) == offset
                break
            for raw in res.messages:
                m, _ = decode_record(raw, check_crc=True)
                assert (m.queue_id, m.queue_offset) == (q, offset)
                assert run.written.get((q, offset)) == m.body, f"corrupt or foreign at {q}/{offset}"
                survivors[(q, offset)] = int(m.properties["KEYS"][3:])
                offset += 1
    return survivors


def _check_keys(store: MessageStore, survivors: dict[tuple[int, int], int]) -> None:
    for (q, qoff), i in survivors.items():
        found = store.query_message(TOPIC, f"key{i}", 4, 0, 2**62).messages
        assert len(found) == 1, f"key{i} finds {len(found)}"
        m = decode_record(found[0])[0]
        assert (m.queue_id, m.queue_offset) == (q, qoff)
