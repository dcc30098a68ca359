"""Power cuts through the real kernel path: a store on the real ``OsDisk`` writes on a FUSE
file system that keeps only what was synced (tests/support/powerfs.py).

The unit power-loss tests swap the store's disk for the simulated one; these keep the store's
real I/O (``mmap`` through the page cache, ``fdatasync``, directory ``fsync``, ``rename``,
``fallocate``) and cut the power below the kernel, so a store that skipped a syscall, or a
``Disk`` implementation that synced nothing, loses acknowledged messages here. Every image is
recovered by a real store and checked as in the unit tests (SYNC_FLUSH: every acknowledged
message at its offset; ASYNC_FLUSH: everything below the flush point the store had reported;
nothing corrupt or foreign; queues without holes; keys find every survivor; ``verify`` clean).
The last test shows the check can fail: stores with ``fdatasync`` or directory syncs turned
off lose acknowledged messages on the "only what was synced" image.
"""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ariane.errors import StoreDamagedError
from ariane.store.config import FlushDiskType
from ariane.store.simdisk import Image
from tests.support.powerfs import fuse_unavailable
from tests.unit.store.powerloss import Run, recover_and_check

_WHY_NOT = fuse_unavailable()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(_WHY_NOT is not None, reason=f"FUSE power-loss tests: {_WHY_NOT}"),
]

REPO = Path(__file__).resolve().parents[3]
IMAGES = 20
SIM_STORE = "/store"  # the store's directory inside the FUSE file system


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def cut_power(
    tmp: Path, mode: FlushDiskType, seed: str, images: int, broken: str = ""
) -> tuple[Run, list[Image]]:
    """Mount the file system, let a store write until a random number of puts were acked,
    cut the power and return what the writer reported and the post-crash images."""
    rng = random.Random(seed)
    acks_before_cut = rng.randint(20, 120)
    mnt = tmp / "mnt"
    mnt.mkdir()
    fs_log = tmp / "powerfs.log"
    with open(fs_log, "w") as log:
        fs = subprocess.Popen(
            [sys.executable, "-m", "tests.support.powerfs", str(mnt)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO,
        )  # fmt: skip
    writer: subprocess.Popen[str] | None = None
    try:
        assert fs.stdout is not None
        assert fs.stdin is not None
        if fs.stdout.readline().strip() != "mounted":  # e.g. a container without mount rights
            fs.wait(timeout=30)
            pytest.skip(f"the FUSE file system did not mount: {fs_log.read_text()[-500:]}")
        args = [str(mnt / "store"), mode.value, seed, *([broken] if broken else [])]
        writer = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.store.powerloss_child", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        assert writer.stdout is not None
        assert writer.stdin is not None
        run = Run(mode, None)
        flushed_at = 0
        ends: list[tuple[int, tuple[int, int, int]]] = []

        while len(run.acked) < acks_before_cut:
            line = writer.stdout.readline()
            assert line, f"the writer died (exit {writer.wait()})"
            kind, *nums = line.split()
            i, q, qoff, end, flushed = map(int, nums)
            run.written[(q, qoff)] = (b"m%05d-" % i) * (1 + i % 37)
            ends.append((end, (i, q, qoff)))
            flushed_at = max(flushed_at, flushed)
            if kind == "A":
                run.acked.append((i, q, qoff))
        out = tmp / "images.pickle"
        fs.stdin.write(f"cut {out} {seed} {images}\n")
        fs.stdin.flush()
        assert fs.stdout.readline().strip() == "cut-done"
        # every put in flight at the cut may have written its record: learn them all
        writer.stdin.close()
        for line in writer.stdout:
            if line.strip() == "end":
                break
            kind, *nums = line.split()
            i, q, qoff = map(int, nums[:3])
            run.written[(q, qoff)] = (b"m%05d-" % i) * (1 + i % 37)
        run.flushed.extend(entry for end, entry in ends if end <= flushed_at)
        with open(out, "rb") as f:
            return run, pickle.load(f)
    finally:
        if writer is not None:
            _stop(writer)
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)
        _stop(fs)


@pytest.mark.parametrize("mode", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
@pytest.mark.parametrize("run_no", range(2))
def test_power_cut_below_the_kernel(tmp_path: Path, mode: FlushDiskType, run_no: int) -> None:
    run, images = cut_power(tmp_path, mode, f"fuse-{mode.value}-{run_no}", IMAGES)
    assert len(run.acked) >= 20
    if mode is FlushDiskType.SYNC_FLUSH:
        assert set(run.acked) <= set(run.flushed), "an ack came before its flush"
    survived = [recover_and_check(run, image, SIM_STORE) for image in images]
    # the image that kept only synced data still has every message that had to survive
    assert survived[0] >= len(run.acked if mode is FlushDiskType.SYNC_FLUSH else run.flushed)


@pytest.mark.parametrize("broken", ["no-fdatasync", "no-dir-sync"])
def test_a_store_that_skips_syncs_fails_the_check(tmp_path: Path, broken: str) -> None:
    run, images = cut_power(tmp_path, FlushDiskType.SYNC_FLUSH, f"fuse-{broken}", 2, broken)
    assert run.acked
    # (the same runs with the syncs in place pass: test_power_cut_below_the_kernel)
    with pytest.raises((AssertionError, StoreDamagedError)):
        recover_and_check(run, images[0], SIM_STORE)  # only what was synced: acks lost
