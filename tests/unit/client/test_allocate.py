"""Allocation strategies: RocketMQ's examples, and the property every strategy must keep."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.client import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    MessageQueue,
)
from ariane.client._allocate import md5_hash, mq_sort_key, mq_string
from ariane.errors import InvalidArgumentError

QUEUES = [MessageQueue("T", b, i) for b in ("b1", "b2") for i in range(4)]
CIDS = ["c1", "c2", "c3"]


def _names(mqs: list[MessageQueue]) -> list[str]:
    return [f"{mq.broker_name}q{mq.queue_id}" for mq in mqs]


def test_averagely_gives_contiguous_blocks_extra_to_the_first() -> None:
    avg = AllocateMessageQueueAveragely()
    assert [_names(avg.allocate("g", c, QUEUES, CIDS)) for c in CIDS] == [
        ["b1q0", "b1q1", "b1q2"],
        ["b1q3", "b2q0", "b2q1"],
        ["b2q2", "b2q3"],
    ]


def test_averagely_with_more_consumers_than_queues() -> None:
    avg = AllocateMessageQueueAveragely()
    two = QUEUES[:2]
    assert [_names(avg.allocate("g", c, two, CIDS)) for c in CIDS] == [["b1q0"], ["b1q1"], []]


def test_by_circle_deals_round_robin() -> None:
    circle = AllocateMessageQueueAveragelyByCircle()
    assert [_names(circle.allocate("g", c, QUEUES, CIDS)) for c in CIDS] == [
        ["b1q0", "b1q3", "b2q2"],
        ["b1q1", "b2q0", "b2q3"],
        ["b1q2", "b2q1"],
    ]


def test_unknown_consumer_gets_nothing_and_empty_inputs_are_errors() -> None:
    avg = AllocateMessageQueueAveragely()
    assert avg.allocate("g", "stranger", QUEUES, CIDS) == []
    with pytest.raises(InvalidArgumentError):
        avg.allocate("g", "c1", [], CIDS)
    with pytest.raises(InvalidArgumentError):
        avg.allocate("g", "c1", QUEUES, [])
    with pytest.raises(InvalidArgumentError):
        avg.allocate("g", "", QUEUES, CIDS)


def test_consistent_hash_uses_java_strings_and_md5() -> None:
    assert mq_string(QUEUES[0]) == "MessageQueue [topic=T, brokerName=b1, queueId=0]"
    # first four MD5 bytes of "a", big-endian unsigned (0cc175b9...)
    assert md5_hash("a") == 0x0CC175B9
    ch = AllocateMessageQueueConsistentHash()
    # a consumer alone owns everything; adding one moves only part of the queues
    assert ch.allocate("g", "c1", QUEUES, ["c1"]) == QUEUES
    with pytest.raises(InvalidArgumentError):
        AllocateMessageQueueConsistentHash(-1)


def test_by_config_and_machine_room() -> None:
    mine = [QUEUES[3]]
    assert AllocateMessageQueueByConfig(mine).allocate("g", "c1", QUEUES, CIDS) == mine
    rooms = [
        MessageQueue("T", f"{room}@b{i}", q)
        for room in ("hz", "sh")
        for i in (1, 2)
        for q in (0, 1)
    ]
    room = AllocateMessageQueueByMachineRoom({"hz"})
    got = [room.allocate("g", c, rooms, CIDS) for c in CIDS]
    # 4 hz queues over 3 consumers: one each, the remainder to the first
    assert [len(g) for g in got] == [2, 1, 1]
    assert sorted((q for g in got for q in g), key=mq_sort_key) == rooms[:4]


STRATEGIES = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMessageQueueConsistentHash(virtual_node_count=3),
]

queues_st = st.lists(
    st.builds(
        MessageQueue,
        st.sampled_from(["T", "U"]),
        st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        st.integers(0, 40),
    ),
    min_size=1,
    max_size=60,
    unique=True,
)
cids_st = st.lists(
    st.from_regex(r"10\.0\.0\.[0-9]{1,3}@[0-9]{1,5}", fullmatch=True),
    min_size=1,
    max_size=12,
    unique=True,
)


@settings(max_examples=150, deadline=None)
@given(queues=queues_st, cids=cids_st, which=st.integers(0, len(STRATEGIES) - 1))
def test_every_queue_is_assigned_exactly_once(
    queues: list[MessageQueue], cids: list[str], which: int
) -> None:
    strategy = STRATEGIES[which]
    mq_all = sorted(queues, key=mq_sort_key)
    cid_all = sorted(cids)
    shares = [strategy.allocate("g", cid, mq_all, cid_all) for cid in cid_all]
    owned = [mq for share in shares for mq in share]
    assert sorted(owned, key=mq_sort_key) == mq_all  # each queue once, none lost
    # deterministic: a second consumer process computing the same inputs agrees
    assert shares == [strategy.allocate("g", cid, list(mq_all), list(cid_all)) for cid in cid_all]


@settings(max_examples=60, deadline=None)
@given(queues=queues_st, cids=cids_st)
def test_averagely_shares_differ_by_at_most_one(
    queues: list[MessageQueue], cids: list[str]
) -> None:
    mq_all = sorted(queues, key=mq_sort_key)
    sizes = [
        len(AllocateMessageQueueAveragely().allocate("g", c, mq_all, sorted(cids)))
        for c in sorted(cids)
    ]
    assert max(sizes) - min(sizes) <= 1
