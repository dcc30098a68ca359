"""BrokerStats: the sampling schedule, the rate strings, the day totals and forgetting,
driven by a manual clock (no sleeps)."""

from __future__ import annotations

import datetime

from ariane.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStats,
    StoreCounters,
)
from ariane.common.clock import ManualClock
from ariane.common.stats import StatsSnapshot


class Store:
    def __init__(self) -> None:
        self.counters = StoreCounters()

    def __call__(self) -> StoreCounters:
        return self.counters


def ticks(stats: BrokerStats, clock: ManualClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(1000)
        stats.tick()


def test_put_and_get_counters_and_minute_windows() -> None:
    clock = ManualClock()
    stats = BrokerStats(clock, "C1")
    stats.on_put("T", 10, 2000)
    stats.on_put("T", 1, 5000)
    stats.on_get("G", "T", 4)
    assert stats.put_total == 11
    assert stats.get_total == 4
    assert stats.view(BROKER_PUT_NUMS, "C1") is not None  # the totals move in when read
    assert stats.sets[BROKER_PUT_NUMS].value("C1") == 11
    assert stats.sets[BROKER_PUT_NUMS].times("C1") == 0  # RocketMQ does not count calls
    assert stats.topic_put_tps("T") == 0.0  # no sample yet
    ticks(stats, clock, 10)  # the first 10 s sample
    windows = stats.view(TOPIC_PUT_NUMS, "T")
    assert windows is not None
    minute, hour, day = windows
    assert minute == StatsSnapshot(11, 1.1, 5.5, 2)
    assert hour == StatsSnapshot()
    assert day == StatsSnapshot()
    assert stats.view(TOPIC_PUT_SIZE, "T")[0].sum == 7000  # type: ignore[index]
    assert stats.group_get_tps("G", "T") == 0.4
    assert stats.view(GROUP_GET_NUMS, "T@G")[0].avgpt == 4.0  # type: ignore[index]
    assert stats.view(GROUP_GET_NUMS, "nope") is None
    assert stats.view("NO_SUCH_STATS", "T") is None
    hist = stats.message_size["T"]
    # one observation per put of bytes per message: 200 B (<= 1 KiB) and 5000 B (<= 512 KiB)
    assert hist.count == 2
    assert hist.counts[:3] == [1, 0, 1]
    ticks(stats, clock, 600)  # the first 10 min sample
    assert stats.view(TOPIC_PUT_NUMS, "T")[1].sum == 11  # type: ignore[index]
    assert stats.view(TOPIC_PUT_NUMS, "T")[0].sum == 0  # type: ignore[index]


def test_rate_strings_use_ten_sixty_and_six_hundred_seconds() -> None:
    clock = ManualClock()
    store = Store()
    stats = BrokerStats(clock, store_counters=store)
    assert stats.runtime_rates()["putTps"] == "0.0 0.0 0.0"
    stats.tick()
    for _ in range(60):
        clock.advance(1000)
        c = store.counters
        store.counters = StoreCounters(
            c.put_times + 100, c.get_found + 2, c.get_miss + 1, c.get_transferred + 50
        )
        stats.tick()
    rates = stats.runtime_rates()
    assert rates["putTps"] == "100.0 100.0 100.0"
    assert rates["getFoundTps"] == "2.0 2.0 2.0"
    assert rates["getMissTps"] == "1.0 1.0 1.0"
    assert rates["getTotalTps"] == "3.0 3.0 3.0"
    assert rates["getTransferredTps"] == "50.0 50.0 50.0"
    for _ in range(10):  # ten quiet seconds: the 10 s rate drops, the others dilute
        clock.advance(1000)
        stats.tick()
    assert stats.runtime_rates()["putTps"].split() == ["0.0", repr(5000 / 60), repr(6000 / 70)]


def test_day_totals_shift_at_local_midnight() -> None:
    tomorrow = datetime.datetime.combine(datetime.date(2030, 5, 17), datetime.time(23, 59, 58))
    clock = ManualClock(int(tomorrow.timestamp() * 1000))
    store = Store()
    stats = BrokerStats(clock, store_counters=store)
    store.counters = StoreCounters(put_times=40)
    stats.on_get("G", "T", 7)
    stats.tick()
    assert stats.msg_put_total_today_morning == 0
    ticks(stats, clock, 3)  # past midnight
    assert stats.msg_put_total_today_morning == 40
    assert stats.msg_get_total_today_morning == 7
    assert stats.msg_put_total_yesterday_morning == 0
    store.counters = StoreCounters(put_times=90)
    stats.record_morning()
    assert stats.msg_put_total_yesterday_morning == 40
    assert stats.msg_put_total_today_morning == 90
    assert stats.msg_put_total_today_now() == 90


def test_idle_and_deleted_topics_are_forgotten() -> None:
    clock = ManualClock()
    stats = BrokerStats(clock, idle_minutes=20)
    live = {"T", "U"}
    stats.live_topics = lambda: live
    stats.on_put("T", 1, 10)
    stats.on_put("U", 1, 10)
    stats.on_get("G", "T", 1)
    stats.on_get_latency("G", "T", 3, 5)
    live.discard("U")
    ticks(stats, clock, 600)  # the 10 min clean-up: U is gone, T stays
    assert "U" not in stats.sets[TOPIC_PUT_NUMS]
    assert "U" not in stats.message_size
    assert "T" in stats.sets[TOPIC_PUT_NUMS]
    ticks(stats, clock, 1800)  # 30 min without traffic: idle keys expire too
    assert len(stats.sets[TOPIC_PUT_NUMS]) == 0
    assert len(stats.sets[GROUP_GET_LATENCY]) == 0
    assert stats.sets[BROKER_GET_NUMS].value("DefaultCluster") == 1  # totals stay


def test_topic_and_group_deletion() -> None:
    stats = BrokerStats(ManualClock())
    stats.on_put("T", 1, 1)
    stats.on_get("G", "T", 1)
    stats.on_get("H", "T", 1)
    stats.on_get_size("G", "T", 100)
    stats.on_get_latency("G", "T", 0, 3)
    stats.on_send_back("G", "T")
    stats.on_group_deleted("H")
    assert "T@H" not in stats.sets[GROUP_GET_NUMS]
    assert "T@G" in stats.sets[GROUP_GET_NUMS]
    stats.on_topic_deleted("T")
    assert all(
        len(items) == 0 for name, items in stats.sets.items() if not name.startswith("BROKER")
    )


def test_put_each_counts_as_one_put_per_size() -> None:
    # a read's sizes in one bucket (no loop), across buckets and on the bounds (the loop)
    runs = [[1180] * 100, [1024, 1025, 4096, 4097, 10], [5000, 4097, 524288, 3_000_000], [7]]
    each, one = BrokerStats(ManualClock(), "C1"), BrokerStats(ManualClock(), "C1")
    for sizes in runs:
        each.on_put_each("T", sizes)
        for size in sizes:
            one.on_put("T", 1, size)
    for stats in (each, one):
        assert stats.put_total == 110
    a, b = each.message_size["T"], one.message_size["T"]
    assert a.counts == b.counts == [3, 102, 4, 0, 0, 1, 0]
    assert (a.sum, a.count) == (b.sum, b.count) == (float(sum(map(sum, runs))), 110)
    assert each.sets[TOPIC_PUT_SIZE].value("T") == one.sets[TOPIC_PUT_SIZE].value("T")
