"""The collector settled after a broker's start-up: what is alive is frozen out of later
collections (cycles made afterwards are still collected), and the young threshold is set only
when asked."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ariane.common.gc_policy import settle_after_start


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
