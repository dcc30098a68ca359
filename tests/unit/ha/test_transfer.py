"""Group transfer: shared waits, k-th acknowledgement, deadlines, in-sync replica rules."""

from __future__ import annotations

import pytest

from ariane.ha.transfer import GroupTransfer, ReplicaPolicy, needed_slave_acks

MB = 1 << 20


def test_one_ack_completes_every_covered_request() -> None:
    gt: GroupTransfer[str] = GroupTransfer()
    for i, end in enumerate([100, 300, 200, 400]):
        gt.add(end, 1, 10.0 + i, f"r{end}")
    assert len(gt) == 4
    assert gt.on_acks([]) == []
    assert sorted(gt.on_acks([250])) == ["r100", "r200"]
    assert gt.on_acks([250]) == []
    assert gt.on_acks([300, 100]) == ["r300"]
    assert len(gt) == 1
    assert gt.next_deadline() == 13.0
    assert gt.expire(12.9) == []
    assert gt.expire(13.0) == ["r400"]
    assert gt.next_deadline() is None
    assert len(gt) == 0


def test_k_slaves_means_the_kth_largest_ack() -> None:
    gt: GroupTransfer[str] = GroupTransfer()
    gt.add(500, 2, 9.0, "two")
    gt.add(500, 1, 9.0, "one")
    assert gt.on_acks([600, 100]) == ["one"]
    assert gt.on_acks([600]) == []  # one slave left: "two" keeps waiting
    assert gt.on_acks([600, 500]) == ["two"]


def test_expire_skips_completed_and_drain_returns_the_rest() -> None:
    gt: GroupTransfer[int] = GroupTransfer()
    for i in range(100):
        gt.add(i * 10, 1, float(i), i)
    assert len(gt.on_acks([495])) == 50
    assert gt.expire(60.0) == list(range(50, 61))
    assert gt.next_deadline() == 61.0
    assert sorted(gt.drain()) == list(range(61, 100))
    assert len(gt) == 0
    assert gt.expire(1e9) == []


@pytest.mark.parametrize(
    ("policy", "slaves", "need"),
    [
        (ReplicaPolicy(), [], -1),  # 4.x: SYNC_MASTER without a slave
        (ReplicaPolicy(), [-1], -1),  # connected, no report yet
        (ReplicaPolicy(), [1000], 1),
        (ReplicaPolicy(), [1000 - 300 * MB], -1),  # too far behind (haSlaveFallbehindMax)
        (ReplicaPolicy(), [1000 - 300 * MB, 900], 1),
        (ReplicaPolicy(in_sync_replicas=1), [], 0),  # 5.x default: nothing to wait for
        (ReplicaPolicy(in_sync_replicas=3), [900, 800], 2),
        (ReplicaPolicy(in_sync_replicas=3), [900], -1),
        (ReplicaPolicy(in_sync_replicas=3, auto_in_sync_replicas=True), [900], 1),
        (ReplicaPolicy(in_sync_replicas=3, auto_in_sync_replicas=True), [], 0),
        (
            ReplicaPolicy(in_sync_replicas=3, auto_in_sync_replicas=True, min_in_sync_replicas=2),
            [],
            -1,
        ),
        (ReplicaPolicy(all_ack_in_sync=True), [900, 800, 1000 - 300 * MB], 2),
        (ReplicaPolicy(all_ack_in_sync=True), [], 0),  # the master alone is the in-sync set
        (ReplicaPolicy(all_ack_in_sync=True), [1000 - 300 * MB], 0),
        (ReplicaPolicy(max_gap_not_in_sync=50, all_ack_in_sync=True), [990, 900], 1),
    ],
)
def test_needed_slave_acks(policy: ReplicaPolicy, slaves: list[int], need: int) -> None:
    assert needed_slave_acks(policy, 1000, slaves) == need
