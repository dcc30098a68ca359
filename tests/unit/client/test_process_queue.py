"""ProcessQueue: the commit rule, flow-control counters, orderly take/commit/rollback."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.client._process_queue import ProcessQueue
from ariane.common.message import MessageExt


def _msgs(*offsets: int, size: int = 10) -> list[MessageExt]:
    return [MessageExt("T", b"x" * size, queue_offset=o) for o in offsets]


def test_commit_offset_is_the_smallest_still_buffered() -> None:
    pq = ProcessQueue()
    m = {o: msg for o, msg in zip(range(10, 101, 10), _msgs(*range(10, 101, 10)), strict=True)}
    assert pq.put_messages(list(m.values())) is True
    # tasks {20, 40} and {50, 70} finish while 10 is still in a listener: commit 10
    assert pq.remove_messages([m[20], m[40]]) == 10
    assert pq.remove_messages([m[50], m[70]]) == 10
    # 10 finishes: the smallest left is 30
    assert pq.remove_messages([m[10]]) == 30
    # everything done: max offset + 1
    assert pq.remove_messages([m[o] for o in (30, 60, 80, 90, 100)]) == 101
    assert pq.msg_count == 0
    assert pq.msg_size == 0
    # nothing buffered: -1 (nothing to commit)
    assert pq.remove_messages(_msgs(5)) == -1


def test_counts_sizes_span_and_duplicates() -> None:
    pq = ProcessQueue()
    pq.put_messages(_msgs(5, 6, 7, size=100))
    pq.put_messages(_msgs(7, 2000, size=100))  # 7 is a duplicate: not counted twice
    assert pq.msg_count == 4
    assert pq.msg_size == 400
    assert pq.max_span == 1995
    assert pq.queue_offset_max == 2000
    pq.remove_messages(_msgs(5))
    assert pq.max_span == 1994


def test_out_of_order_puts_keep_the_rule() -> None:
    pq = ProcessQueue()
    pq.put_messages(_msgs(10, 11))
    pq.put_messages(_msgs(3))
    assert pq.first_offset() == 3
    assert pq.remove_messages(_msgs(3)) == 10


def test_orderly_take_commit_and_consume_again() -> None:
    pq = ProcessQueue()
    assert pq.put_messages(_msgs(0, 1, 2, 3)) is True
    assert pq.put_messages(_msgs(4)) is False  # a drain is already active
    first = pq.take_messages(2)
    assert [m.queue_offset for m in first] == [0, 1]
    pq.make_message_to_consume_again(first)
    again = pq.take_messages(3)
    assert [m.queue_offset for m in again] == [0, 1, 2]
    assert pq.commit() == 3
    assert pq.msg_count == 2
    rest = pq.take_messages(10)
    assert [m.queue_offset for m in rest] == [3, 4]
    pq.rollback()
    assert pq.first_offset() == 3
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4]
    assert pq.commit() == 5
    assert pq.take_messages(1) == []
    assert pq.consuming is False
    assert pq.commit() == -1


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 60),
    data=st.data(),
)
def test_commit_rule_matches_a_model(n: int, data: st.DataObject) -> None:
    pq = ProcessQueue()
    msgs = _msgs(*range(100, 100 + n))
    pq.put_messages(msgs)
    left = set(range(100, 100 + n))
    order = data.draw(st.permutations(msgs))
    for msg in order:
        got = pq.remove_messages([msg])
        left.discard(msg.queue_offset)
        assert got == (min(left) if left else 100 + n)
