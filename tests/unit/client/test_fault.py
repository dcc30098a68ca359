"""Latency fault tolerance (book §3.7, §17.30) with a manual clock."""

from __future__ import annotations

import random

import pytest

from ariane.client._fault import (
    LatencyFaultTolerance,
    MQFaultStrategy,
    compute_not_available_duration,
)
from ariane.client._route import TopicPublishInfo
from ariane.client.message import MessageQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.mark.parametrize(
    ("latency", "ban"),
    [
        (0, 0),
        (40, 0),
        (80, 0),
        (549, 0),
        (550, 30_000),
        (600, 30_000),
        (1500, 60_000),
        (2500, 120_000),
        (3000, 180_000),
        (14_999, 180_000),
        (20_000, 600_000),
        (30_000, 600_000),
    ],
)
def test_latency_maps_to_the_ban_of_the_highest_threshold_reached(latency: int, ban: int) -> None:
    assert compute_not_available_duration(latency) == ban


def test_a_banned_broker_becomes_available_when_its_ban_ends() -> None:
    clock = Clock()
    table = LatencyFaultTolerance(clock)
    assert table.is_available("a")  # never reported
    table.update_fault_item("a", 600, 30_000)
    assert not table.is_available("a")
    clock.now += 29_999
    assert not table.is_available("a")
    clock.now += 1
    assert table.is_available("a")


def test_a_fast_send_lifts_a_ban() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(enabled=True, now_ms=clock)
    strategy.update_fault_item("a", 700, isolation=False)
    assert not strategy.tolerance.is_available("a")
    strategy.update_fault_item("a", 5, isolation=False)
    assert strategy.tolerance.is_available("a")


def test_isolation_bans_for_ten_minutes() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(enabled=True, now_ms=clock)
    strategy.update_fault_item("a", 3, isolation=True)
    clock.now += 599_999
    assert not strategy.tolerance.is_available("a")
    clock.now += 1
    assert strategy.tolerance.is_available("a")


def test_disabled_strategy_records_nothing() -> None:
    strategy = MQFaultStrategy(enabled=False, now_ms=Clock())
    strategy.update_fault_item("a", 100_000, isolation=True)
    assert "a" not in strategy.tolerance


def _info() -> TopicPublishInfo:
    queues = [MessageQueue("T", b, i) for b in ("a", "b", "c") for i in range(2)]
    return TopicPublishInfo("T", queues, have_route=True, counter=0)


def test_selection_skips_banned_brokers() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(enabled=True, now_ms=clock)
    strategy.update_fault_item("a", 0, isolation=True)
    strategy.update_fault_item("c", 2000, isolation=False)
    info = _info()
    picked = {strategy.select_one_message_queue(info, None).broker_name for _ in range(30)}
    assert picked == {"b"}
    clock.now += 120_000  # c's 2 s latency ban (120 s) is over, a's isolation is not
    picked = {strategy.select_one_message_queue(info, None).broker_name for _ in range(30)}
    assert picked == {"b", "c"}


def test_selection_prefers_another_broker_than_the_last_attempt() -> None:
    strategy = MQFaultStrategy(enabled=True, now_ms=Clock())
    info = _info()
    for _ in range(30):
        assert strategy.select_one_message_queue(info, "a").broker_name != "a"


def test_when_every_broker_is_banned_the_least_bad_one_gets_a_copied_queue() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(enabled=True, now_ms=clock, rng=random.Random(7))
    strategy.update_fault_item("a", 0, isolation=True)  # 600 s
    strategy.update_fault_item("b", 20_000, isolation=False)  # 600 s, slower
    strategy.update_fault_item("c", 0, isolation=True)
    info = _info()
    before = list(info.message_queues)
    mq = strategy.select_one_message_queue(info, None)
    # half of the 3 items = 1: always the best one; a and c tie on latency 0, start time too
    assert mq.broker_name in {"a", "c"}
    assert 0 <= mq.queue_id < 2
    assert info.message_queues == before  # the route's entries are not mutated


def test_pick_one_at_least_orders_available_then_latency() -> None:
    clock = Clock()
    table = LatencyFaultTolerance(clock, random.Random(1))
    table.update_fault_item("slow", 900, 0)  # available
    table.update_fault_item("banned", 10, 60_000)
    table.update_fault_item("fast", 20, 0)  # available
    table.update_fault_item("worse", 5000, 60_000)
    # half = 2: the two best in turn
    assert [table.pick_one_at_least() for _ in range(4)] == ["fast", "slow", "fast", "slow"]


def test_pick_one_at_least_of_an_unknown_broker_is_dropped() -> None:
    strategy = MQFaultStrategy(enabled=True, now_ms=Clock())
    strategy.update_fault_item("gone", 0, isolation=True)
    info = TopicPublishInfo("T", [MessageQueue("T", "gone", 0)], have_route=True, counter=0)
    # "gone" has no writable queue in the route: it is forgotten, round robin takes over
    info.route = None
    mq = strategy.select_one_message_queue(info, None)
    assert mq == MessageQueue("T", "gone", 0)
    assert "gone" not in strategy.tolerance
