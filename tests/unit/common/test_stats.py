"""StatsItemSet: RocketMQ's windows and formulas, checked against a direct transcription of
``StatsItem`` (one list per key) and against the book's worked example."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.stats import (
    DAY_PERIOD_MS,
    HOUR_PERIOD_MS,
    MINUTE_PERIOD_MS,
    StatsItemSet,
    StatsSnapshot,
)

KEEP = {MINUTE_PERIOD_MS: 7, HOUR_PERIOD_MS: 7, DAY_PERIOD_MS: 25}


@dataclass
class RefItem:
    """RocketMQ's ``StatsItem``: own lists, seeded at the item's first sampling."""

    value: int = 0
    times: int = 0
    lists: dict[int, list[tuple[int, int, int]]] = field(
        default_factory=lambda: {p: [] for p in KEEP}
    )

    def sample(self, period: int, now: int) -> None:
        cs = self.lists[period]
        if not cs:
            cs.append((now - period, 0, 0))
        cs.append((now, self.times, self.value))
        if len(cs) > KEEP[period]:
            cs.pop(0)

    def compute(self, period: int) -> StatsSnapshot:
        cs = self.lists[period]
        if not cs:
            return StatsSnapshot()
        (t0, n0, v0), (t1, n1, v1) = cs[0], cs[-1]
        total = v1 - v0
        times = n1 - n0
        return StatsSnapshot(
            total,
            total * 1000.0 / (t1 - t0) if t1 > t0 else 0.0,
            total / times if times > 0 else 0.0,
            times,
        )


def test_the_books_worked_example() -> None:
    # six batches of ten messages in one minute: sum 60, tps 1, avgpt 10
    s = StatsItemSet("TOPIC_PUT_NUMS", now_ms=0)
    for i in range(1, 7):
        s.add("T", 10)
        s.sample(MINUTE_PERIOD_MS, i * 10_000)
    assert s.minute("T") == StatsSnapshot(60, 1.0, 10.0, 6)
    # the window slides: a minute without traffic brings the sum back to 0
    for i in range(7, 14):
        s.sample(MINUTE_PERIOD_MS, i * 10_000)
    assert s.minute("T") == StatsSnapshot(0, 0.0, 0.0, 0)
    assert s.value("T") == 60
    assert s.times("T") == 6


def test_a_key_not_sampled_yet_has_an_empty_window() -> None:
    s = StatsItemSet("X", now_ms=0)
    s.add("k", 5)
    assert s.minute("k") == StatsSnapshot()
    assert s.minute("unknown") is None
    s.sample(MINUTE_PERIOD_MS, 10_000)
    # seeded with (now - 10 s, 0, 0): 5 in 10 s
    assert s.minute("k") == StatsSnapshot(5, 0.5, 5.0, 1)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 5), st.integers(0, 1000), st.integers(0, 3)),
        st.tuples(st.just("sample"), st.sampled_from(sorted(KEEP)), st.integers(1, 20_000)),
        st.tuples(st.just("delete"), st.integers(0, 5)),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_windows_match_per_key_lists(script: list[tuple[object, ...]]) -> None:
    s = StatsItemSet("X", max_keys=4, now_ms=0)
    ref: dict[str, RefItem] = {}
    now = {p: 0 for p in KEEP}
    clock = 0
    for op in script:
        if op[0] == "add":
            _, k, v, n = op
            key = f"k{k}"
            known = key in s
            s.add(key, int(v), int(n))  # type: ignore[call-overload]
            if known or len(ref) < 4:
                item = ref.setdefault(key, RefItem())
                item.value += int(v)  # type: ignore[call-overload]
                item.times += int(n)  # type: ignore[call-overload]
        elif op[0] == "sample":
            _, period, step = op
            clock += int(step)  # type: ignore[call-overload]
            now[int(period)] = clock  # type: ignore[call-overload]
            s.sample(int(period), clock)  # type: ignore[call-overload]
            for item in ref.values():
                item.sample(int(period), clock)  # type: ignore[call-overload]
        else:
            key = f"k{op[1]}"
            assert s.delete(key) == (ref.pop(key, None) is not None)
    for key, item in ref.items():
        assert s.value(key) == item.value
        assert s.minute(key) == item.compute(MINUTE_PERIOD_MS)
        assert s.hour(key) == item.compute(HOUR_PERIOD_MS)
        assert s.day(key) == item.compute(DAY_PERIOD_MS)


def test_key_limit_drops_and_counts() -> None:
    s = StatsItemSet("X", max_keys=2)
    for key in ("a", "b", "c", "c"):
        s.add(key, 1)
    assert len(s) == 2
    assert "c" not in s
    assert s.dropped == 2
    assert s.delete("a")
    s.add("c", 3)  # the freed column is reused, clean
    assert s.value("c") == 3
    assert s.minute("c") == StatsSnapshot()


def test_idle_keys_expire_and_deleted_columns_start_clean() -> None:
    s = StatsItemSet("X", now_ms=0)
    s.add("busy", 1)
    s.add("idle", 1)
    s.sample(MINUTE_PERIOD_MS, 10_000)
    for t in range(2, 8):
        s.add("busy", 1)
        s.sample(MINUTE_PERIOD_MS, t * 10_000)
    s.add("fresh", 1)  # not sampled yet: never expired before its first sample
    assert s.expire_idle(75_000, 30_000) == 1
    assert "idle" not in s
    assert "busy" in s
    assert "fresh" in s
    s.add("again", 2)
    s.sample(MINUTE_PERIOD_MS, 80_000)
    assert s.minute("again") == StatsSnapshot(2, 0.2, 2.0, 1)


def test_delete_by_key_part() -> None:
    s = StatsItemSet("GROUP_GET_LATENCY")
    for key in ("0@T@G", "1@T@G", "0@TT@G", "0@T@H"):
        s.add(key, 1)
    assert s.delete_where("infix", "T") == 3
    assert [k for k, _, _ in s.items()] == ["0@TT@G"]
    s2 = StatsItemSet("GROUP_GET_NUMS")
    for key in ("T@G", "T@H", "U@G"):
        s2.add(key, 1)
    assert s2.delete_where("prefix", "T") == 2
    assert s2.delete_where("suffix", "G") == 1
    with pytest.raises(ValueError, match="predicate"):
        s2.delete_where("middle", "x")
