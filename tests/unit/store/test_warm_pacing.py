"""The CommitLog warm lead paced like a buffer refilled while idle (issue 18): a burst keeps
only the minimum lead warm (its pages were warmed before it), an idle or slow writer gets the
maximum lead back in steps with pauses. ``WarmPacer.decide`` is driven with positions and
times; the allocation thread with a stand-in file queue and a clock its waits advance."""

from __future__ import annotations

import pytest

from ariane.broker.config import load_properties, store_to_properties
from ariane.errors import ConfigError
from ariane.store.allocate import IDLE_POLL_MAX_S, POLL_S, AllocateMappedFileService
from ariane.store.config import StoreConfig
from ariane.store.warm_pacing import (
    BURST_HOLD_S,
    BURST_LEAD_S,
    CATCH_UP_STEP_BYTES,
    IDLE_STEP_PAUSE_S,
    RATE_WINDOW_S,
    REFILL_GAP_BYTES,
    REFILL_STEP_BYTES,
    WARM_FAST_WRITER_BYTES_PER_S,
    WARM_MAX_LEAD_BYTES,
    WARM_MIN_LEAD_BYTES,
    WarmPacer,
    WarmStep,
)

MIB = 1 << 20
MIN, MAX = WARM_MIN_LEAD_BYTES, WARM_MAX_LEAD_BYTES
#: a step at once (a burst's lead, a full lead) and a paced refill step
ONCE, PACED = CATCH_UP_STEP_BYTES, REFILL_STEP_BYTES


def pacer() -> WarmPacer:
    return WarmPacer(MIN, MAX, WARM_FAST_WRITER_BYTES_PER_S)


def test_defaults() -> None:
    assert (MIN, MAX, WARM_FAST_WRITER_BYTES_PER_S) == (16 * MIB, 256 * MIB, 1_000_000)
    cfg = StoreConfig()
    assert cfg.commit_log_warm_min_lead_bytes == MIN
    assert cfg.commit_log_warm_max_lead_bytes == MAX
    assert cfg.commit_log_warm_fast_writer_bytes_per_s == WARM_FAST_WRITER_BYTES_PER_S


def test_below_the_min_lead_steps_come_at_once_then_paced_up_to_the_max() -> None:
    p = pacer()
    # the whole shortfall below the min lead in one step (old code: 1 MiB steps)
    assert p.decide(0.0, 0, 0) == WarmStep(MAX, 0.0, MIN)
    assert p.decide(0.0, 0, 5 * MIB) == WarmStep(MAX, 0.0, MIN - 5 * MIB)
    assert p.decide(0.0, 0, MIN - 1) == WarmStep(MAX, 0.0, PACED)  # never less than a step
    assert p.decide(0.0, 0, MIN) == WarmStep(MAX, IDLE_STEP_PAUSE_S, PACED)
    assert p.decide(0.1, 0, MAX - 1) == WarmStep(MAX, IDLE_STEP_PAUSE_S, PACED)
    assert p.decide(0.1, 0, MAX) == WarmStep(MIN, 0.0, ONCE)  # full: nothing to warm
    assert not p.filling


def test_a_refill_starts_only_a_gap_below_the_max_and_then_fills_it() -> None:
    p = pacer()
    assert p.decide(0.0, 0, MAX) == WarmStep(MIN, 0.0, ONCE)
    # a slow writer (0.5 MB/s: 100 kB per rate window) eats into the lead
    now, write = 0.0, 0
    while write < REFILL_GAP_BYTES:
        now += RATE_WINDOW_S
        write = min(REFILL_GAP_BYTES, write + 100_000)
        step = p.decide(now, write, MAX)
        assert not p.fast
        if write < REFILL_GAP_BYTES:
            assert step == WarmStep(MIN, 0.0, ONCE)  # less than the gap: no refill yet
    assert step == WarmStep(MAX, IDLE_STEP_PAUSE_S, PACED)
    # once started, the refill goes on up to the max
    assert p.decide(now, write, write + MAX - 1) == WarmStep(MAX, IDLE_STEP_PAUSE_S, PACED)
    assert p.decide(now, write, write + MAX) == WarmStep(MIN, 0.0, ONCE)


def test_a_burst_is_seen_at_the_first_look_even_after_a_long_idle_time() -> None:
    p = pacer()
    burst = WARM_FAST_WRITER_BYTES_PER_S * RATE_WINDOW_S
    p.decide(0.0, 0, MAX)
    p.decide(60.0, 0, MAX)  # a minute later, nothing written
    assert p.decide(60.1, int(burst) + 1, MAX) == WarmStep(MIN, 0.0, ONCE)
    assert p.fast
    # the burst has eaten into the lead: only the min lead is asked for, without a pause
    # (100 MB/s: the min lead covers more than a burst lead time of it)
    write = int(burst) + 2_000_000
    assert p.decide(60.12, write, write + MIN // 2) == WarmStep(MIN, 0.0, ONCE)


def test_the_writer_is_slow_again_a_hold_time_after_its_last_window_over_the_rate() -> None:
    p = pacer()
    p.decide(0.0, 0, 0)
    p.decide(0.05, 100 * MIB, 100 * MIB + MIN)
    assert p.fast
    p.decide(0.05 + RATE_WINDOW_S, 100 * MIB, 100 * MIB + MIN)
    assert p.fast  # a whole window without writes: the consumers may still be catching up
    p.decide(0.05 + BURST_HOLD_S * 0.99, 100 * MIB, 100 * MIB + MIN)
    assert p.fast
    step = p.decide(0.05 + BURST_HOLD_S, 100 * MIB, 100 * MIB + MIN)
    assert not p.fast
    assert step == WarmStep(MAX, IDLE_STEP_PAUSE_S, PACED)


def test_a_writer_just_under_the_rate_is_slow_and_one_just_over_it_fast() -> None:
    burst = int(WARM_FAST_WRITER_BYTES_PER_S * RATE_WINDOW_S)
    for moved, fast in ((burst, False), (burst + 1, True)):
        p = pacer()
        p.decide(0.0, 0, MAX)
        p.decide(RATE_WINDOW_S, moved, MAX)
        assert p.fast is fast


def test_leads_are_ordered_and_the_refill_gap_fits_between_them() -> None:
    p = WarmPacer(8 * MIB, 4 * MIB, 1)
    assert (p.min_lead, p.max_lead) == (8 * MIB, 8 * MIB)
    p = WarmPacer(10 * MIB, 12 * MIB, 1)
    assert p.refill_at == 10 * MIB
    assert p.decide(0.0, 0, 11 * MIB) == WarmStep(10 * MIB, 0.0, ONCE)
    assert p.decide(0.0, 0, 10 * MIB) == WarmStep(12 * MIB, IDLE_STEP_PAUSE_S, PACED)


def test_store_config_keys_and_their_checks() -> None:
    loaded = load_properties(
        {
            "commitLogWarmMinLead": str(32 * MIB),
            "commitLogWarmMaxLead": str(128 * MIB),
            "commitLogWarmFastWriterRate": "8000000",
        }
    )
    s = loaded.store
    assert s.commit_log_warm_min_lead_bytes == 32 * MIB
    assert s.commit_log_warm_max_lead_bytes == 128 * MIB
    assert s.commit_log_warm_fast_writer_bytes_per_s == 8_000_000
    assert store_to_properties(s)["commitLogWarmMaxLead"] == str(128 * MIB)
    for props, key in (
        ({"commitLogWarmMinLead": "-1"}, "commitLogWarmMinLead"),
        ({"commitLogWarmMaxLead": str(MIN - 1)}, "commitLogWarmMaxLead"),
        ({"commitLogWarmFastWriterRate": "0"}, "commitLogWarmFastWriterRate"),
    ):
        with pytest.raises(ConfigError) as info:
            load_properties(props)
        assert info.value.key == key


# -- the allocation thread --------------------------------------------------------------------


class _SimQueue:
    """A CommitLog file queue stand-in: its writer at ``max_offset``; ``prepare_ahead`` warms
    one 1 MiB step (the service's buffer) below ``write + window``, counting the bytes."""

    mapped_file_size = 1 << 30
    next_ready = True
    last = None

    def __init__(self) -> None:
        self.max_offset = 0
        self.warmed_to = 0
        self.warmed_bytes = 0
        #: reads (steps that warmed something), and the writer's bytes it found cold
        self.reads = 0
        self.cold_bytes = 0

    def prepare_ahead(
        self, write: int, window: int, buf: bytearray, step_bytes: int | None = None
    ) -> bool:
        self.cold_bytes += max(0, write - self.warmed_to)
        start = max(self.warmed_to, write)
        stop = write + window
        if start >= stop:
            return False
        n = min(len(buf) if step_bytes is None else step_bytes, stop - start)
        self.warmed_to = start + n
        self.warmed_bytes += n
        self.reads += 1
        return True


class _Allocator(AllocateMappedFileService):
    """Its waits advance its clock instead of waiting."""

    def __init__(self, queue: _SimQueue) -> None:
        self.now = 100.0
        self.waits: list[float] = []
        super().__init__(queue, clock=lambda: self.now)  # type: ignore[arg-type]

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def _look(allocator: _Allocator) -> None:
    """Rounds until the thread waits (a round that warmed without a pause goes on at once)."""
    waits = len(allocator.waits)
    while len(allocator.waits) == waits:
        allocator.run_once()


def _idle_until_full(allocator: _Allocator, queue: _SimQueue) -> None:
    for _ in range(2000):
        allocator.run_once()
        if allocator.waits and allocator.waits[-1] >= POLL_S:
            return


def test_an_idle_broker_warms_the_max_lead_in_paced_steps() -> None:
    queue = _SimQueue()
    allocator = _Allocator(queue)
    _idle_until_full(allocator, queue)
    assert queue.warmed_to == MAX  # the old fixed window: 64 MiB
    # 16 steps at once up to the min lead, then one pause after each of the other 240
    assert allocator.waits[:-1] == [IDLE_STEP_PAUSE_S] * ((MAX - MIN) // MIB)
    assert allocator.waits[-1] == POLL_S


def test_a_burst_writes_into_pages_warmed_before_it() -> None:
    queue = _SimQueue()
    allocator = _Allocator(queue)
    _idle_until_full(allocator, queue)
    before = queue.warmed_bytes
    # the peer harness's phase 1: 120 MB at 70 MB/s, 1.4 MB between two 20 ms looks
    while queue.max_offset < 120_000_000:
        queue.max_offset += 1_400_000
        _look(allocator)
    assert queue.warmed_bytes == before  # nothing warmed inside the burst (old code: 120 MB)
    # a burst longer than the lead: only the min lead is warmed ahead, without pauses
    waits = len(allocator.waits)
    while queue.max_offset < 400_000_000:
        queue.max_offset += 1_400_000
        _look(allocator)
        assert queue.warmed_to - queue.max_offset >= MIN
    assert queue.warmed_to == queue.max_offset + MIN
    assert set(allocator.waits[waits:]) == {POLL_S}
    # the writer stops: no refill for a hold time (the consumers catch up), then the lead
    # is refilled to the max, paced
    end = allocator.now
    while allocator.pacer.fast or queue.warmed_to == queue.max_offset + MIN:
        allocator.run_once()
        if allocator.now < end + BURST_HOLD_S - IDLE_POLL_MAX_S:
            assert queue.warmed_to == queue.max_offset + MIN
    assert (
        end + BURST_HOLD_S - IDLE_POLL_MAX_S
        <= allocator.now
        <= end + BURST_HOLD_S + IDLE_POLL_MAX_S
    )
    waits = len(allocator.waits)
    _idle_until_full(allocator, queue)
    assert queue.warmed_to == queue.max_offset + MAX
    assert allocator.waits[waits:-1] == [IDLE_STEP_PAUSE_S] * ((MAX - MIN) // MIB - 1)


def test_a_slow_writer_keeps_most_of_the_max_lead() -> None:
    queue = _SimQueue()
    allocator = _Allocator(queue)
    _idle_until_full(allocator, queue)
    # 0.5 MB/s (400 messages of 1.2 kB a second), a look every 20 ms, for 30 s
    for _ in range(1500):
        queue.max_offset += 10_000
        _look(allocator)
        assert queue.warmed_to - queue.max_offset >= MAX - REFILL_GAP_BYTES - MIB
    assert not allocator.pacer.fast


def test_the_latency_phase_writer_is_a_burst() -> None:
    """2,000 messages of 1.2 kB a second (the peer harness's latency phase): only the min
    lead is kept, so crossing into a new file does not start a refill inside the phase."""
    queue = _SimQueue()
    allocator = _Allocator(queue)
    _idle_until_full(allocator, queue)
    before = queue.warmed_bytes
    for _ in range(500):  # 10 s, a look every 20 ms
        queue.max_offset += 48_000
        _look(allocator)
    assert allocator.pacer.fast
    assert queue.warmed_bytes == before  # 24 MB written into the 256 MiB warmed before


def test_a_writer_faster_than_the_min_lead_a_burst_lead_time_gets_a_lead_of_its_rate() -> None:
    p = pacer()
    p.decide(0.0, 0, MAX)
    # `bench store`'s one writer: 360 MB/s, 7.2 MB between two 20 ms looks
    assert p.decide(0.02, 7_200_000, MAX) == WarmStep(int(360e6 * BURST_LEAD_S), 0.0, ONCE)
    assert p.rate == pytest.approx(360e6)
    # a look within a window keeps the last window's rate
    assert p.decide(0.03, 7_300_000, MAX) == WarmStep(int(360e6 * BURST_LEAD_S), 0.0, ONCE)
    # slower: the min lead; far faster: never more than the max lead
    p = pacer()
    p.decide(0.0, 0, MAX)
    assert p.decide(0.02, 1_400_000, MAX) == WarmStep(MIN, 0.0, ONCE)  # 70 MB/s
    p = pacer()
    p.decide(0.0, 0, MAX)
    assert p.decide(0.02, 100_000_000, MAX) == WarmStep(MAX, 0.0, ONCE)  # 5 GB/s
    p = WarmPacer(0, MAX, WARM_FAST_WRITER_BYTES_PER_S)  # no lead in a burst stays none
    p.decide(0.0, 0, MAX)
    assert p.decide(0.02, 7_200_000, MAX) == WarmStep(0, 0.0, ONCE)


def test_a_fast_writers_shortfall_is_warmed_in_one_read_per_look() -> None:
    """At 360 MB/s the writer moves 7.2 MB between two looks: one read warms it (old code:
    eight 1 MiB reads, each taking the GIL from the writer about three times)."""
    queue = _SimQueue()
    allocator = _Allocator(queue)
    _idle_until_full(allocator, queue)
    for _ in range(100):  # 720 MB, more than the max lead
        queue.max_offset += 7_200_000
        _look(allocator)
    assert allocator.pacer.fast
    reads = queue.reads
    for _ in range(50):
        queue.max_offset += 7_200_000
        _look(allocator)
        assert queue.warmed_to - queue.max_offset == int(360e6 * BURST_LEAD_S)
    assert queue.reads - reads == 50
    assert queue.cold_bytes == 0
