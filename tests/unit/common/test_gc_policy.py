"""The collector settled after a broker's start-up: what is alive is frozen out of later
collections (cycles made afterwards are still collected), and the young threshold is set only
when asked; a client process settles once (again in a forked child), keeps its thresholds, and
leaves a disabled collector alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ariane.common import gc_policy
from ariane.common.gc_policy import settle_after_start, settle_client_process


class _Node:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restore_gc")
def test_alive_objects_are_frozen_and_new_cycles_still_collected() -> None:
    kept = _Node()
    thresholds = gc.get_threshold()
    frozen = settle_after_start()
    # A frozen object whose last reference goes away leaves the permanent generation, so the
    # count can only have fallen since (by a few: CI once saw one object go in between).
    assert frozen > 1000
    assert frozen - 100 <= gc.get_freeze_count() <= frozen
    assert gc.get_threshold() == thresholds  # 0: CPython's thresholds kept
    assert not any(o is kept for o in gc.get_objects())  # frozen: no collection walks it
    gc.disable()  # no automatic collection (another thread's allocations) may take the cycle first
    _Node()  # a cycle made after start-up
    assert gc.collect() >= 1
    assert kept.me is kept


@pytest.mark.usefixtures("restore_gc")
def test_young_threshold() -> None:
    _, older, oldest = gc.get_threshold()
    settle_after_start(10_000)
    assert gc.get_threshold() == (10_000, older, oldest)


@pytest.fixture
def fresh_client_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has not settled its collector for a client yet."""
    monkeypatch.setattr(gc_policy, "_settled_pid", None)


@pytest.mark.usefixtures("restore_gc", "fresh_client_process")
def test_a_client_process_settles_once_and_keeps_its_thresholds() -> None:
    gc.set_threshold(1234, 11, 12)  # the application's own settings
    kept = _Node()
    frozen = settle_client_process()
    assert frozen is not None
    assert frozen > 1000
    assert not any(o is kept for o in gc.get_objects())  # frozen
    assert gc.get_threshold() == (1234, 11, 12)
    count = gc.get_freeze_count()
    later = _Node()
    assert settle_client_process() is None  # the second client: nothing more
    # nothing more frozen; the count may only fall (a frozen object whose last reference goes
    # away, e.g. another thread's, leaves the permanent generation: CI saw 288,834 -> 288,832)
    assert gc.get_freeze_count() <= count
    assert any(o is later for o in gc.get_objects())  # made since: still collected normally


@pytest.mark.usefixtures("restore_gc", "fresh_client_process")
def test_a_forked_child_settles_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settle_client_process() is not None
    assert settle_client_process() is None
    monkeypatch.setattr(gc_policy.os, "getpid", lambda: -7)  # another process id: a child
    assert settle_client_process() is not None
    assert settle_client_process() is None


@pytest.mark.usefixtures("restore_gc", "fresh_client_process")
def test_a_disabled_collector_is_left_to_the_application() -> None:
    gc.unfreeze()
    gc.disable()
    assert settle_client_process() is None
    assert gc.get_freeze_count() == 0
    assert not gc.isenabled()
