"""Power-loss crash tests: at least 200 random post-crash images per flush mode.

SYNC_FLUSH: every acknowledged message survives, intact, in its queue at its offset.
ASYNC_FLUSH: the loss is bounded by what was not flushed: every message whose record ended
before the CommitLog's flush point at the power cut survives; later ones may be lost (at most
``flushCommitLogLeastPages`` pages or ``flushIntervalCommitLog`` worth of writes, whichever
the flush thread reaches first).
Both: nothing corrupt or foreign is ever served, recovery never raises, every queue is a
prefix without holes, keys find every survivor, ``ariane store verify`` is clean afterwards.
"""

from __future__ import annotations

import random
import tempfile

import pytest

from ariane.common.clock import ManualClock
from ariane.common.record import decode_record
from ariane.errors import StoreDamagedError
from ariane.store.config import FlushDiskType
from ariane.store.message_store import MessageStore
from ariane.store.results import PutStatus
from ariane.store.simdisk import PAGE_SIZE, SimDisk
from tests.unit.store.helpers import msg
from tests.unit.store.powerloss import (
    QUEUES,
    SHM,
    SIM_ROOT,
    TOPIC,
    body_of,
    config,
    power_loss_run,
    recover_and_check,
)

RUNS = 10
IMAGES_PER_RUN = 20  # x RUNS = 200 images per mode


@pytest.mark.parametrize("mode", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
@pytest.mark.parametrize("run_no", range(RUNS))
def test_random_power_cuts(mode: FlushDiskType, run_no: int) -> None:
    rng = random.Random(f"{mode.value}-{run_no}")
    run = power_loss_run(mode, rng)
    if mode is FlushDiskType.SYNC_FLUSH:
        assert run.acked, "a SYNC_FLUSH run with nothing acknowledged proves nothing"
    recover_and_check(run, run.frozen.lost())
    recover_and_check(run, run.frozen.survivor())
    for _ in range(IMAGES_PER_RUN - 2):
        recover_and_check(run, run.frozen.image(rng))


#: The fault points a writing store reaches by itself (recovery and cleanup points are killed
#: in tests/integration/store/test_fault_points.py).
WRITING_POINTS = [
    "file.create.before_rename",
    "file.create.before_dir_sync",
    "commitlog.roll.after_blank",
    "metadata.before_rename",
    "metadata.after_rename",
    "index.create.after_file",
]


@pytest.mark.parametrize("mode", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
@pytest.mark.parametrize("point", WRITING_POINTS)
def test_power_cut_exactly_at_a_fault_point(mode: FlushDiskType, point: str) -> None:
    rng = random.Random(f"{mode.value}-{point}")
    run = power_loss_run(mode, rng, at_point=point)
    recover_and_check(run, run.frozen.lost())
    recover_and_check(run, run.frozen.survivor())
    for _ in range(3):
        recover_and_check(run, run.frozen.image(rng))


@pytest.mark.parametrize("broken", ["sync_inode", "sync_dir"])
def test_the_check_catches_a_store_that_skips_syncs(
    monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    # the same run with file syncs (fdatasync/msync) or directory syncs doing nothing: the
    # image that keeps only synced data must lose acknowledged messages, or the tests above
    # could not fail
    monkeypatch.setattr(SimDisk, broken, lambda self, *args: None)
    run = power_loss_run(FlushDiskType.SYNC_FLUSH, random.Random(f"broken-{broken}"))
    assert run.acked
    with pytest.raises((AssertionError, StoreDamagedError)):
        recover_and_check(run, run.frozen.lost())


def test_keys_stored_in_the_index_checkpoints_millisecond_survive_a_power_cut() -> None:
    # the index checkpoint T promises the keys of records stored before T; records stored in
    # T after the flush that wrote it can lose their keys while their index file's end time
    # stays T (not past the checkpoint: the file is kept) and its end offset covers them (the
    # header page reached the disk, the entry page did not): nothing re-dispatches them
    clock = ManualClock()
    disk = SimDisk()
    sizes = {
        "max_hash_slot_num": 1020,  # header and slots fill page 0, the entries start on page 1
        "max_index_num": 64,
    }
    cfg = config(
        SIM_ROOT, FlushDiskType.SYNC_FLUSH, **sizes,
        flush_interval_consume_queue_ms=3_600_000,  # flushed by the test only
        flush_consume_queue_thorough_interval_ms=3_600_000,
    )  # fmt: skip
    store = MessageStore(cfg, disk=disk, clock=clock)
    assert store.load()
    store.start()
    flusher = store.flush_consume_queue
    assert flusher is not None

    def put(first: int, n: int) -> None:
        for i in range(first, first + n):
            r = store.put_message(msg(TOPIC, i % QUEUES, body_of(i), KEYS=f"key{i}"))
            assert r.status is PutStatus.PUT_OK
        assert store.wait_dispatched()

    try:
        put(0, 4)
        clock.advance(1)
        put(4, 2)
        flusher.do_flush(thorough=True)  # the index checkpoint: this millisecond
        put(6, 3)  # same millisecond, after the flush: keys in the map only
        for cq in store.all_consume_queues():  # their queue entries on disk: not re-dispatched
            cq.flush(0)
        frozen = disk.power_cut()
    finally:
        store.close_without_cleanup()
    index_dir = f"{SIM_ROOT}/index"
    lost, kept = frozen.lost(), frozen.survivor()
    (path,) = [p for p in lost.files if p.startswith(index_dir + "/")]
    durable, current = lost.files[path], kept.files[path]
    assert durable is not None
    assert current is not None
    assert durable[:PAGE_SIZE] != current[:PAGE_SIZE]  # the header page moved on
    lost.files[path] = current[:PAGE_SIZE] + durable[PAGE_SIZE:]
    with tempfile.TemporaryDirectory(dir=SHM) as real:
        lost.write_to(SIM_ROOT, real)
        recovered = MessageStore(config(real, FlushDiskType.SYNC_FLUSH, **sizes))
        assert recovered.load()
        try:
            for i in range(9):
                found = recovered.query_message(TOPIC, f"key{i}", 4, 0, 2**62).messages
                assert len(found) == 1, f"key{i} finds {len(found)}"
                assert decode_record(found[0])[0].body == body_of(i)
        finally:
            recovered.shutdown()
