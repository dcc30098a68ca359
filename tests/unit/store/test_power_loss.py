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

import pytest

from ariane.errors import StoreDamagedError
from ariane.store.config import FlushDiskType
from ariane.store.simdisk import SimDisk
from tests.unit.store.powerloss import power_loss_run, recover_and_check

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
