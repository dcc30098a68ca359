"""Every named fault point, a process killed exactly there: the store restarts and every
invariant holds (each acknowledged SYNC_FLUSH put readable, intact, at its queue offset; keys
find it; ``ariane store verify`` clean; the store takes new messages).

The recovery points are reached by loading a store that has a torn tail and an abort file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ariane.common import faults
from ariane.common.record import decode_record
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus
from ariane.store.tools.verify import verify

from .fault_child import body_for, config, message

CHILD = Path(__file__).with_name("fault_child.py")
RECOVERY_POINTS = {"recovery.after_save_tail", "recovery.after_zero_tail"}

pytestmark = pytest.mark.integration


def _run_child(root: Path, side: Path, point: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(root), str(side), point],
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, (
        f"the child did not die at {point} (exit {proc.returncode}): "
        f"{proc.stderr.decode(errors='replace')[-2000:]}"
    )


def _acked(side: Path) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in line.split()) for line in side.read_bytes().splitlines()]  # type: ignore[misc]


def _torn_store(root: Path, side: Path) -> None:
    """A store with acknowledged messages, a torn tail after them and an abort file."""
    store = MessageStore(config(str(root)))
    assert store.load()
    store.start()
    with open(side, "wb") as f:
        for i in range(30):
            r = store.put_message(message(i))
            assert r.ok
            f.write(b"%d %d %d\n" % (i, i % 2, r.logics_offset))
    end = store.max_phy_offset
    store.close_without_cleanup()
    last = sorted(p for p in (root / "commitlog").glob("0*") if p.name.isdigit())[-1]
    with open(last, "r+b") as f:
        f.seek(end - int(last.name))
        f.write(b"\x00\x00\x01\x00\xda\xa3\x20\xa7" + os.urandom(200))  # a record cut short


def _check(root: Path, acked: list[tuple[int, int, int]]) -> None:
    store = MessageStore(config(str(root)))
    assert store.load()
    store.start()
    try:
        for i, q, qoff in acked:
            if qoff < store.get_min_offset_in_queue("Faults", q):
                continue  # deleted by the cleanup the child ran (its CommitLog file expired)
            res = store.get_message("g", "Faults", q, qoff, 1)
            assert res.status is GetStatus.FOUND, (i, res.status)
            m, _ = decode_record(res.messages[0], check_crc=True)
            assert (m.body, m.queue_offset) == (body_for(i), qoff)
        for i, _q, _qoff in acked[-5:]:
            assert len(store.query_message("Faults", f"key{i}", 2, 0, 2**62).messages) == 1
        nxt = len(acked)
        r = store.put_message(message(nxt))
        assert r.ok
    finally:
        store.shutdown()
    problems, _ = verify(str(root))
    assert problems == [], problems


@pytest.mark.parametrize("point", sorted(faults.POINTS))
def test_killed_at_each_fault_point(tmp_path: Path, point: str) -> None:
    root = tmp_path / "store"
    side = tmp_path / "acked"
    side.touch()
    if point in RECOVERY_POINTS:
        _torn_store(root, side)
    _run_child(root, side, point)
    acked = _acked(side)
    if point not in RECOVERY_POINTS:
        assert acked or point.startswith(("file.", "index.")), "the point fired before any put"
    _check(root, acked)
    if point == "recovery.after_save_tail":
        assert list((root / "commitlog").glob("*.tr*")), "the saved tail is kept"
