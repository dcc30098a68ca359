"""``PullWindow``: several pulls of a queue range in flight, answers used in offset order,
every offset answered once (no sockets: a fake queue answers the pulls)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.spark._pipeline import PullWindow


def _drive(
    start: int,
    end: int,
    batch: int,
    depth: int,
    cap: int,
    skip: frozenset[int] = frozenset(),
    scan: int = 800,
    refill_at: int | None = None,
) -> tuple[list[int], list[tuple[int, int]], int]:
    """Read ``[start, end)`` of a fake queue whose broker answers at most ``cap`` messages
    and, with a tag filter (``skip``: offsets that do not match), scans up to ``scan``
    entries. Returns (offsets used, in order; every pull submitted; most in flight)."""
    submitted: list[tuple[int, int]] = []
    most = 0

    def submit(offset: int, count: int) -> tuple[int, int]:
        submitted.append((offset, count))
        return offset, count

    def answer(offset: int, count: int) -> tuple[list[int], int]:
        got: list[int] = []
        pos = offset
        while pos < offset + max(scan, count) and len(got) < min(count, cap):
            if pos not in skip:
                got.append(pos)
            pos += 1
        return got, pos

    window = PullWindow(start, end, batch, depth, submit, refill_at)
    used: list[int] = []
    while not window.done:
        most = max(most, len(window.in_flight()))
        offset, count, handle = window.head()
        assert handle == (offset, count)
        assert offset == window.offset
        got, nxt = answer(offset, count)
        window.advance(nxt, bool(got))
        used += [o for o in got if o < end]
    return used, submitted, most


def test_chunks_follow_the_brokers_cap_and_stay_in_flight() -> None:
    used, submitted, most = _drive(100, 300, batch=256, depth=4, cap=32)
    assert used == list(range(100, 300))
    # the first pull alone learns the cap (32), then chunks of 32 with 4 in flight
    assert submitted[:6] == [(100, 200), (132, 32), (164, 32), (196, 32), (228, 32), (260, 32)]
    assert submitted[-1] == (292, 8)
    assert most == 4


def test_a_short_answer_pulls_the_rest_of_its_chunk_first() -> None:
    calls: list[tuple[int, int]] = []
    window = PullWindow(0, 100, 10, 3, lambda o, n: calls.append((o, n)) or (o, n))
    window.advance(10, True)  # learns step 10
    assert window.in_flight() == [(10, 10), (20, 10), (30, 10)]
    window.advance(14, True)  # the chunk 10..20 answered only 10..14 (byte cap)
    assert window.in_flight() == [(14, 6), (20, 10), (30, 10)]
    assert window.step == 4
    window.advance(20, True)
    assert window.in_flight() == [(20, 10), (30, 10), (40, 4)]


def test_an_answer_past_later_chunks_drops_them() -> None:
    window = PullWindow(0, 100, 10, 3, lambda o, n: (o, n))
    window.advance(10, True)
    assert window.in_flight() == [(10, 10), (20, 10), (30, 10)]
    window.advance(35, True)  # a filter skipped to 35: 20.. and 30.. overlap it
    assert window.offset == 35
    assert window.in_flight() == [(35, 10), (45, 10), (55, 10)]
    window.advance(200, False)  # nothing matched up to past the end
    assert window.done
    assert window.in_flight() == []


def test_restart_pulls_the_current_offset_alone() -> None:
    window = PullWindow(0, 100, 10, 3, lambda o, n: (o, n))
    window.advance(10, True)
    window.restart()
    assert window.in_flight() == [(10, 10)]
    window.advance(20, True)
    assert window.in_flight() == [(20, 10), (30, 10), (40, 10)]


def test_depth_one_is_one_pull_at_a_time() -> None:
    used, submitted, most = _drive(0, 70, batch=32, depth=1, cap=32)
    assert used == list(range(70))
    assert submitted == [(0, 32), (32, 32), (64, 6)]
    assert most == 1


def test_refill_at_sends_pulls_in_bursts() -> None:
    window = PullWindow(0, 1000, 10, 4, lambda o, n: (o, n), refill_at=2)
    window.advance(10, True)  # learned: a full window at once
    assert window.in_flight() == [(10, 10), (20, 10), (30, 10), (40, 10)]
    window.advance(20, True)  # 3 left: more than refill_at, no new pull
    assert window.in_flight() == [(20, 10), (30, 10), (40, 10)]
    window.advance(30, True)  # 2 left: topped up to 4 in one go
    assert window.in_flight() == [(30, 10), (40, 10), (50, 10), (60, 10)]
    used, submitted, most = _drive(0, 300, batch=256, depth=8, cap=32, refill_at=4)
    assert used == list(range(300))
    assert most == 8
    assert [o for o, _ in submitted] == [0, *range(32, 300, 32)]


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 50),
    size=st.integers(1, 400),
    batch=st.integers(1, 300),
    depth=st.integers(1, 6),
    cap=st.integers(1, 40),
    skip=st.frozensets(st.integers(0, 460), max_size=120),
    scan=st.integers(1, 60),
    refill_at=st.one_of(st.none(), st.integers(-1, 6)),
)
def test_every_offset_is_used_once_in_order(
    start: int,
    size: int,
    batch: int,
    depth: int,
    cap: int,
    skip: frozenset[int],
    scan: int,
    refill_at: int | None,
) -> None:
    used, _, most = _drive(start, start + size, batch, depth, cap, skip, scan, refill_at)
    assert used == [o for o in range(start, start + size) if o not in skip]
    assert most <= depth + 1  # a gap pull may briefly join a full window
