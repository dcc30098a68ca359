"""``tests.support.proctree`` kills whole trees: children, grandchildren, and orphans that
init adopted, whether the root is alive or already gone."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.proctree import descendants, kill_tree, live, spawn, spawned

pytestmark = pytest.mark.integration

# a child, a grandchild, and an orphan (its subshell exits at once): each prints its pid
_TREE = "sleep 300 & echo $!; sh -c 'sleep 300 & echo $!; wait' & (sleep 300 & echo $!); wait"


def _pids(proc: subprocess.Popen[str], n: int) -> list[int]:
    assert proc.stdout is not None
    return [int(proc.stdout.readline()) for _ in range(n)]


def test_kills_children_grandchildren_and_orphans() -> None:
    with spawned(["sh", "-c", _TREE], stdout=subprocess.PIPE, text=True) as proc:
        pids = _pids(proc, 3)
        assert set(pids) <= descendants(proc.pid)
        assert all(live(p) for p in pids)
        killed = kill_tree(proc.pid, proc=proc)
        assert {proc.pid, *pids} <= killed
        assert proc.returncode is not None
        assert not any(live(p) for p in pids)


def test_orphans_of_a_root_that_already_exited() -> None:
    proc = spawn(["sh", "-c", "(sleep 300 & echo $!)"], stdout=subprocess.PIPE, text=True)
    try:
        (orphan,) = _pids(proc, 1)
        assert proc.wait(30) == 0
        assert live(orphan)
        assert kill_tree(proc.pid, proc=proc) == {orphan}
        assert not live(orphan)
    finally:
        kill_tree(proc.pid, proc=proc)
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_block_that_fails_leaves_nothing() -> None:
    pids: list[int] = []
    with (  # noqa: PT012
        pytest.raises(subprocess.TimeoutExpired),
        spawned(["sh", "-c", _TREE], stdout=subprocess.PIPE, text=True) as proc,
    ):
        pids.extend(_pids(proc, 3))
        proc.wait(0.01)
    assert not any(live(p) for p in [proc.pid, *pids])
