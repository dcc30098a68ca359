"""RebalanceImpl without sockets: start offsets by consume-from, assignment changes, orderly
locks and the order of hooks."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pytest

from ariane.client import (
    AllocateMessageQueueAveragely,
    ConsumeFromWhere,
    MessageModel,
    MessageQueue,
    ReadOffsetType,
)
from ariane.client._rebalance import PullTarget, RebalanceImpl, parse_consume_timestamp

T = "Topic"
RETRY = "%RETRY%g"


@dataclass
class FakeApi:
    max_offsets: dict[MessageQueue, int] = field(default_factory=dict)
    searched: list[int] = field(default_factory=list)
    locked: set[MessageQueue] = field(default_factory=set)
    lock_calls: list[list[MessageQueue]] = field(default_factory=list)
    unlocks: list[list[MessageQueue]] = field(default_factory=list)

    async def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return self.max_offsets.get(MessageQueue(topic, "b", queue_id), 0)

    async def search_offset(self, addr: str, topic: str, queue_id: int, ts: int) -> int:
        self.searched.append(ts)
        return 42

    async def lock_batch_mq(self, addr: str, body: Any, timeout_ms: int) -> set[MessageQueue]:
        self.lock_calls.append(list(body.mq_set))
        return {mq for mq in body.mq_set if mq in self.locked}

    async def unlock_batch_mq(self, addr: str, body: Any, *, oneway: bool, timeout_ms: int) -> None:
        self.unlocks.append(list(body.mq_set))


@dataclass
class FakeInstance:
    api: FakeApi
    client_id: str = "c1"
    cids: list[str] = field(default_factory=lambda: ["c1"])

    def find_broker_addr_in_subscribe(
        self, name: str, broker_id: int = 0, *, only_this_broker: bool = False
    ) -> tuple[str, bool]:
        return "127.0.0.1:1", False

    async def update_topic_route(self, topic: str) -> bool:
        return True

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        return list(self.cids)


@dataclass
class FakeStore:
    stored: dict[MessageQueue, int] = field(default_factory=dict)
    fail: bool = False
    offset_table: dict[MessageQueue, int] = field(default_factory=dict)
    persisted: list[MessageQueue] = field(default_factory=list)

    def load(self) -> None:
        pass

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if self.fail:
            return -2
        return self.stored.get(mq, -1)

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None:
        pass

    async def persist(self, mq: MessageQueue) -> None:
        self.persisted.append(mq)

    async def flush(self, mqs: Collection[MessageQueue]) -> None:
        self.persisted.extend(mqs)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)


def _rebalance(
    cfw: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    store: FakeStore | None = None,
    api: FakeApi | None = None,
    **kw: Any,
) -> tuple[RebalanceImpl, FakeInstance, FakeStore]:
    instance = FakeInstance(api or FakeApi())
    store = store or FakeStore()
    rb = RebalanceImpl(
        group="g",
        model=kw.pop("model", MessageModel.CLUSTERING),
        strategy=AllocateMessageQueueAveragely(),
        instance=instance,  # type: ignore[arg-type]
        offset_store=store,
        consume_from_where=cfw,
        consume_timestamp="20260101120000",
        **kw,
    )
    return rb, instance, store


def _mq(i: int, topic: str = T) -> MessageQueue:
    return MessageQueue(topic, "b", i)


@pytest.mark.parametrize(
    ("cfw", "topic", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, T, 77),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, RETRY, 0),
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, T, 0),
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, RETRY, 0),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, T, 42),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, RETRY, 77),
        # deprecated values behave as LAST_OFFSET, as in Java
        (ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET, T, 77),
    ],
)
def test_start_offset_without_a_stored_offset(
    cfw: ConsumeFromWhere, topic: str, expected: int
) -> None:
    api = FakeApi(max_offsets={_mq(0, topic): 77})
    rb, _, _ = _rebalance(cfw, api=api)
    assert asyncio.run(rb.compute_pull_from_where(_mq(0, topic))) == expected
    if expected == 42:
        assert api.searched == [parse_consume_timestamp("20260101120000")]


def test_a_stored_offset_wins_and_read_errors_skip_the_queue() -> None:
    rb, _, _ = _rebalance(
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, store=FakeStore(stored={_mq(0): 9})
    )
    assert asyncio.run(rb.compute_pull_from_where(_mq(0))) == 9
    rb, _, _ = _rebalance(store=FakeStore(fail=True))
    assert asyncio.run(rb.compute_pull_from_where(_mq(0))) == -1


def test_assignment_changes_drop_persist_and_dispatch_after_the_hook() -> None:
    events: list[str] = []
    dispatched: list[PullTarget] = []

    async def changed(topic: str, all_: set[MessageQueue], mine: set[MessageQueue]) -> None:
        events.append(f"changed {len(mine)}")

    def dispatch(targets: list[PullTarget]) -> None:
        events.append(f"dispatch {len(targets)}")
        dispatched.extend(targets)

    async def go() -> None:
        rb, instance, store = _rebalance(on_queue_changed=changed, dispatch=dispatch)
        rb.subscription_inner[T] = object()  # type: ignore[assignment]
        rb.topic_subscribe_info[T] = {_mq(i) for i in range(4)}
        await rb.do_rebalance()
        assert set(rb.process_queue_table) == {_mq(i) for i in range(4)}
        assert events == ["changed 4", "dispatch 4"]
        # a second consumer joins: this one keeps the first half
        instance.cids = ["c1", "c2"]
        old = dict(rb.process_queue_table)
        await rb.do_rebalance()
        assert set(rb.process_queue_table) == {_mq(0), _mq(1)}
        assert old[_mq(2)].dropped
        assert old[_mq(3)].dropped
        assert set(store.persisted) == {_mq(2), _mq(3)}
        assert events[-1] == "changed 2"
        # unchanged: no hook
        await rb.do_rebalance()
        assert len(events) == 3
        # the topic is unsubscribed: its queues go
        del rb.subscription_inner[T]
        await rb.do_rebalance()
        assert rb.process_queue_table == {}

    asyncio.run(go())


def test_orderly_adds_only_locked_queues_and_unlocks_dropped_ones() -> None:
    async def go() -> None:
        api = FakeApi(locked={_mq(0), _mq(1)})
        rb, _, _ = _rebalance(api=api, orderly=True)
        rb.subscription_inner[T] = object()  # type: ignore[assignment]
        rb.topic_subscribe_info[T] = {_mq(i) for i in range(3)}
        await rb.do_rebalance()
        assert set(rb.process_queue_table) == {_mq(0), _mq(1)}  # queue 2 is held elsewhere
        assert all(pq.locked for pq in rb.process_queue_table.values())
        # renewal: the broker no longer grants queue 1
        api.locked = {_mq(0)}
        await rb.lock_all()
        assert rb.process_queue_table[_mq(0)].locked
        assert not rb.process_queue_table[_mq(1)].locked
        # queue 0 is busy in a listener: it cannot be released this round
        pq0 = rb.process_queue_table[_mq(0)]
        await pq0.consume_lock.acquire()
        rb.topic_subscribe_info[T] = {_mq(1), _mq(2)}
        api.locked = {_mq(1), _mq(2)}
        try:
            await asyncio.wait_for(rb.do_rebalance(), 5)
        finally:
            pq0.consume_lock.release()
        assert _mq(0) in rb.process_queue_table
        assert pq0.try_unlock_times == 1
        await rb.do_rebalance()
        assert _mq(0) not in rb.process_queue_table
        assert [_mq(0)] in api.unlocks

    asyncio.run(go())


def test_broadcasting_takes_every_queue() -> None:
    async def go() -> None:
        rb, instance, _ = _rebalance(model=MessageModel.BROADCASTING)
        instance.cids = ["c0", "c1", "c2"]
        rb.subscription_inner[T] = object()  # type: ignore[assignment]
        rb.topic_subscribe_info[T] = {_mq(i) for i in range(5)}
        await rb.do_rebalance()
        assert len(rb.process_queue_table) == 5

    asyncio.run(go())


def test_bad_timestamp_is_reported() -> None:
    with pytest.raises(ValueError):
        parse_consume_timestamp("2026-01-01")
