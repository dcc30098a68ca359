"""Kill a writing process at random moments; every acknowledged message must survive."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ariane.common.record import decode_record
from ariane.store.config import StoreConfig
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus
from ariane.store.tools.verify import verify

from .crash_child import body_for

CHILD = Path(__file__).with_name("crash_child.py")
RUNS = 20


def _config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=256 * 1024,
        max_message_size=64 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=128,
        max_index_num=500,
    )


def _acked(side: Path) -> list[tuple[int, int, int, int]]:
    out = []
    for line in side.read_bytes().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] != b"FAIL":
            i, phys, q, qoff = (int(p) for p in parts)
            out.append((i, phys, q, qoff))
        else:
            assert not line.startswith(b"FAIL"), line
    return out


def _run_child(root: Path, side: Path, mode: str, start: int, rng: random.Random) -> None:
    before = side.stat().st_size if side.exists() else 0
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(root), str(side), mode, str(start)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while (not side.exists() or side.stat().st_size == before) and proc.poll() is None:
            assert time.monotonic() < deadline, "child never acknowledged a put"
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.1))
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")


def _check(
    root: Path, acked: list[tuple[int, int, int, int]], rng: random.Random, *, full: bool = False
) -> None:
    store = MessageStore(_config(root))
    assert store.load()
    store.start()
    try:
        assert store.wait_dispatched()
        end = store.max_phy_offset
        # every message of the last two runs, and a sample of the older ones
        recent = acked[-4000:]
        older = acked[:-4000] if len(acked) > 4000 else []
        sample = acked if full else recent + rng.sample(older, min(500, len(older)))
        for i, phys, q, qoff in sample:
            raw = store.look_message_by_offset(phys)
            assert raw is not None, f"acknowledged message {i} at {phys} is gone"
            m, _ = decode_record(raw, check_crc=True)
            assert m.body == body_for(i)
            assert (m.queue_id, m.queue_offset) == (q, qoff)
            assert phys + len(raw) <= end
        per_queue: dict[int, int] = {}
        for _i, _phys, q, qoff in acked:
            per_queue[q] = max(per_queue.get(q, -1), qoff)
        for q, last in per_queue.items():
            assert store.get_max_offset_in_queue("Crash", q) > last
            res = store.get_message("g", "Crash", q, last, 1)
            assert res.status is GetStatus.FOUND
            assert decode_record(res.messages[0])[0].queue_offset == last
    finally:
        store.shutdown()
    problems, stats = verify(str(root))
    assert problems == [], problems
    assert stats["records"] >= len(acked)


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_kill_at_random_moments(tmp_path: Path, mode: str) -> None:
    rng = random.Random(20240 + len(mode))
    root = tmp_path / "store"
    side = tmp_path / "acked"
    start = 0
    for _ in range(RUNS):
        _run_child(root, side, mode, start, rng)
        acked = _acked(side)
        assert acked, "nothing acknowledged"
        start = acked[-1][0] + 1
        _check(root, acked, rng)
    _check(root, _acked(side), rng, full=True)
    assert len(_acked(side)) > RUNS
