"""The idempotence window on a DLedger group: the master refills it from its committed log
when it is promoted (so a new leader after a failover knows every committed id and no cut
one), followers find nothing, and a duplicate is answered once its first copy is committed
(or refused when the leadership is lost first)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

import pytest

from ariane.common.properties import DEDUP
from ariane.dledger.config import DLedgerConfig
from ariane.dledger.dedup import rebuild_from_log
from ariane.dledger.message_store import DLedgerMessageStore
from ariane.store import MessageInner, PutResult, PutStatus
from ariane.store.dedup import DedupEntry
from ariane.store.message_store import MessageStore
from tests.unit.dledger.group import Group, message


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    g = Group(str(tmp_path))
    yield g
    g.close()


def stamped(body: bytes, dedup_id: str, topic: str = "T", queue_id: int = 0) -> MessageInner:
    msg = message(topic, body, queue_id=queue_id)
    msg.properties[DEDUP] = dedup_id
    return msg


def append(group: Group, node: str, msg: MessageInner) -> tuple[PutResult, Future[PutResult]]:
    """What the send processor does with a stamped message: append, remember the id."""
    store = group.stores[node]
    result, future = store.append_message(msg)
    assert result.msg_num == 1, result
    store.dedup.remember(
        msg.topic, msg.properties[DEDUP],
        DedupEntry(msg.queue_id, result.logics_offset, result.wrote_offset,
                   result.wrote_bytes, result.store_timestamp_ms),
    )  # fmt: skip
    group.pump()
    group.tick()
    return result, future


def where(entry: DedupEntry | PutResult | None) -> tuple[int, int]:
    assert entry is not None
    if isinstance(entry, PutResult):
        return entry.logics_offset, entry.wrote_offset
    return entry.queue_offset, entry.phys_offset


def test_both_stores_deduplicate() -> None:
    assert MessageStore.supports_dedup
    assert DLedgerMessageStore.supports_dedup


def test_a_new_leader_knows_every_committed_id_and_no_cut_one(group: Group) -> None:
    leader = group.elect("n0")
    first, done = append(group, leader, stamped(b"a", "id-a"))
    assert done.result(timeout=5).status is PutStatus.PUT_OK
    other, _ = append(group, leader, stamped(b"x", "id-x", queue_id=1))
    # the window holds what the master appended, from the append on
    assert where(group.stores[leader].dedup.seen("T", "id-a", 0)) == where(first)
    group.cut = {"n0"}
    _, lost_done = append(group, leader, stamped(b"b", "id-b"))
    group.crash("n0")
    assert not lost_done.done()
    new = group.elect("n1")
    window = group.stores[new].dedup
    assert where(window.seen("T", "id-a", 0)) == where(first)
    assert where(window.seen("T", "id-x", 0)) == where(other)
    assert window.seen("T", "id-b", 0) is None  # never committed: a retry stores it once
    assert window.seen("U", "id-a", 0) is None  # ids are per topic
    assert (len(window), window.duplicates) == (2, 2)


def test_followers_find_nothing(group: Group) -> None:
    leader = group.elect("n0")
    _, done = append(group, leader, stamped(b"a", "id-a"))
    assert done.result(timeout=5).status is PutStatus.PUT_OK
    group.tick(5, times=3)  # the followers learn the commit
    for node in ("n1", "n2"):
        store = group.stores[node]
        assert store.rebuild_dedup() == 0
        assert store.dedup.seen("T", "id-a", 0) is None
    # a master that lost its leadership stops finding its own ids
    group.cut = {"n0"}
    group.elect("n1")
    group.tick(100, times=40)
    assert not group.stores["n0"].is_master
    assert len(group.stores["n0"].dedup) == 1
    assert group.stores["n0"].dedup.seen("T", "id-a", 0) is None


def test_a_duplicate_is_answered_once_its_first_copy_is_committed(group: Group) -> None:
    leader = group.elect("n0")
    store = group.stores[leader]
    group.cut = {"n1", "n2"}
    first, first_done = append(group, leader, stamped(b"a", "id-a"))
    again = store.wait_durable(first)
    assert not again.done()
    assert not first_done.done()
    append(group, leader, stamped(b"c", "id-c"))  # behind it in the log
    group.cut = set()
    group.tick(50, times=4)
    assert again.result(timeout=5) is first
    assert first.status is PutStatus.PUT_OK
    # a copy committed already: answered at once
    assert store.wait_durable(first).result(timeout=0) is first


def test_a_duplicate_waiting_when_the_leadership_is_lost_is_refused(group: Group) -> None:
    leader = group.elect("n0")
    store = group.stores[leader]
    group.cut = {"n0"}
    first, _ = append(group, leader, stamped(b"a", "id-a"))
    again = store.wait_durable(first)
    group.elect("n1")
    group.tick(100, times=40)  # n0 steps down
    answer = again.result(timeout=5)
    assert answer.status is PutStatus.UNKNOWN_ERROR
    assert "TERM_CHANGED" in (answer.remark or "")
    # and a node that is not the master refuses at once
    answer = store.wait_durable(first).result(timeout=0)
    assert answer.status is PutStatus.SERVICE_NOT_AVAILABLE


def test_a_rebuilt_window_keeps_the_newest_ids_up_to_its_size(tmp_path: Path) -> None:
    g = Group(str(tmp_path), dedup_window_size=2)
    try:
        leader = g.elect("n0")
        for i in range(3):
            _, done = append(g, leader, stamped(b"m%d" % i, f"id-{i}"))
            assert done.result(timeout=5).status is PutStatus.PUT_OK
        g.cut = {"n0"}
        new = g.elect("n2")
        window = g.stores[new].dedup
        assert len(window) == 2
        assert window.seen("T", "id-0", 0) is None
        assert window.seen("T", "id-2", 0) is not None
        # a refill stops when the node stops leading (its log may be cut from then on)
        store = g.stores[new]
        assert not rebuild_from_log(window, store.commit_log, 0, lambda: False)
        assert len(window) == 0
        assert rebuild_from_log(window, store.commit_log, store.clock.now_ms())
        assert len(window) == 2
    finally:
        g.close()


class QuickTimeout(Group):
    """Appends time out after 50 ms, long before the leader misses its followers."""

    def dledger(self, node: str) -> DLedgerConfig:
        return replace(super().dledger(node), max_wait_ack_time_ms=50)


def test_a_duplicate_of_a_timed_out_append_is_refused_when_the_leadership_is_lost(
    tmp_path: Path,
) -> None:
    """The first copy's own wait ended (quorum timeout) but its entry stays in the log: the
    duplicate waits for the commit, and a lost leadership refuses it."""
    group = QuickTimeout(str(tmp_path))
    try:
        leader = group.elect("n0")
        store = group.stores[leader]
        group.cut = {"n1", "n2"}
        first, first_done = append(group, leader, stamped(b"a", "id-a"))
        for _ in range(10):
            if first_done.done():
                break
            group.tick(10)
        assert first_done.result(timeout=0).status is PutStatus.OS_PAGECACHE_BUSY
        assert store.is_master
        again = store.wait_durable(first)
        assert not again.done()
        group.cut = {"n0"}
        group.elect("n1")
        group.tick(100, times=40)
        answer = again.result(timeout=5)
        assert answer.status is PutStatus.UNKNOWN_ERROR
        assert "TERM_CHANGED" in (answer.remark or "")
    finally:
        group.close()
