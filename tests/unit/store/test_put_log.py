"""``CommitLog.put_message`` in one C call (``put_log``, ``_speedups_putlog.h`` via
``store/commit_log_state.py``) next to the reference (``CommitLog._put_two_steps``): the same
results, records, requests and put state (the file's wrote position and store time, the last
store time, the counters); None before any effect (the lock released) whenever it does not
take a put. The put state tests run in both builds (``ARIANE_PURE=1`` too)."""

from __future__ import annotations

import gc
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ariane.common.clock import Clock, ManualClock, SystemClock
from ariane.common.message import HostPort
from ariane.store.commit_log import CommitLog
from ariane.store.commit_log_state import PutState, put_log
from ariane.store.inner import MessageInner
from ariane.store.results import PutResult
from tests.unit.store.helpers import small_config

compiled = pytest.mark.skipif(put_log is None, reason="pure build")

_V4 = HostPort(b"\x0a\x00\x00\x05", 10911)


def _msg(i: int, size: int = 700, text: bool = True) -> MessageInner:
    props = {"TAGS": "TagA", "UNIQ_KEY": f"U{i:08d}", "KEYS": f"k{i % 3}"}
    encoded = "".join(f"{k}\x01{v}\x02" for k, v in props.items()) if text else None
    return MessageInner(
        "T" if i % 2 else "Topic2", i % 3, bytes([i % 251]) * size, i, props, 0, 5, _V4, _V4,
        0, 0, encoded,
    )  # fmt: skip


@contextmanager
def _log(clock: Clock, reference: bool = False) -> Iterator[CommitLog]:
    with tempfile.TemporaryDirectory() as d:
        log = CommitLog(small_config(d, max_message_size=4096), clock)
        if reference:
            log._fast_prepare = log._fast_write = log._fast_put = None
        try:
            yield log
        finally:
            log.shutdown()


def _state(log: CommitLog) -> tuple[object, ...]:
    s, mf = log._state, log._state.current
    assert mf is not None
    return (
        s.last_store_ts, s.put_times_total, s.put_size_total, mf.wrote_position,
        mf.store_timestamp, mf.file_from_offset, len(log.queue.files),
    )  # fmt: skip


def _result(r: PutResult) -> tuple[object, ...]:
    return tuple(getattr(r, name) for name in PutResult.__slots__)


@compiled
def test_put_log_writes_and_advances_what_the_reference_does() -> None:
    """Puts over several 64 KiB file rolls, the clock going back now and then (the store time
    stays monotonic), both property forms: put_log takes every put but the first of each
    topic (cold caches) and those that roll, and leaves the same log as the reference."""
    clocks = ManualClock(), ManualClock()
    with _log(clocks[0]) as fast, _log(clocks[1], reference=True) as pure:
        assert put_log is not None
        taken = 0
        for i in range(300):
            msg = _msg(i, 300 + (i * 37) % 700, text=i % 4 != 0)
            for clock in clocks:
                clock.advance(-3 if i % 7 == 0 else 2)
            expected = pure.put_message(msg)
            got = None
            if fast._state.current is not None:
                got = put_log(fast._state, msg, fast.put_lock, fast.topic_queue_table, fast.staged)
            taken += got is not None
            if got is None:
                got = fast.put_message(msg)  # the cold caches, a roll: the reference's steps
            assert _result(got) == _result(expected)
            assert _state(fast) == _state(pure)
        assert taken > 250
        assert len(fast.queue.files) > 3
        assert [bytes(f.mm[: f.wrote_position]) for f in fast.queue.files] == [
            bytes(f.mm[: f.wrote_position]) for f in pure.queue.files
        ]
        assert list(fast.pending) == list(pure.pending)
        assert fast.topic_queue_table == pure.topic_queue_table
        assert not fast.put_lock.locked()


class _OddClock(ManualClock):
    def now_ms(self) -> int:
        return "soon"  # type: ignore[return-value]


@compiled
def test_put_log_declines_before_any_effect() -> None:
    """No current file, a record longer than the file's room, a clock that does not answer
    an int, an uncached topic: None, nothing written or advanced, the lock free."""
    with _log(ManualClock()) as log:
        assert put_log is not None
        state = log._state
        args = (log.put_lock, log.topic_queue_table, log.staged)
        assert state.current is None
        assert put_log(state, _msg(1), *args) is None  # no file yet
        log.put_message(_msg(1))  # opens the file, fills the caches
        log.put_message(_msg(2))
        before = (_state(log), list(log.pending), dict(log.topic_queue_table))
        state.room_limit = state.current.wrote_position + 100  # type: ignore[union-attr]
        assert put_log(state, _msg(3), *args) is None  # does not fit: the file rolls first
        state.room_limit = log.file_size - 8
        odd = PutState(state.topics, state.tag_codes, state.max_props, state.max_size,
                       state.room_limit, _OddClock())  # fmt: skip
        odd.current = state.current
        assert put_log(odd, _msg(3), *args) is None
        uncached = _msg(3)
        uncached.topic = "NotSeenYet"
        assert put_log(state, uncached, *args) is None
        assert (_state(log), list(log.pending), dict(log.topic_queue_table)) == before
        assert not log.put_lock.locked()


class _Refusing(list[object]):
    def append(self, item: object) -> None:
        raise RuntimeError("refused")


@compiled
def test_put_log_releases_the_lock_when_the_put_fails() -> None:
    with _log(ManualClock()) as log:
        assert put_log is not None
        log.put_message(_msg(1))
        with pytest.raises(RuntimeError, match="refused"):
            put_log(log._state, _msg(3), log.put_lock, log.topic_queue_table, _Refusing())
        assert not log.put_lock.locked()
        with pytest.raises(TypeError):
            put_log(object(), _msg(3), log.put_lock, log.topic_queue_table, log.staged)  # type: ignore[arg-type]
        assert not log.put_lock.locked()


@compiled
def test_put_log_waits_for_the_put_lock() -> None:
    """A put while another thread holds the put lock happens after it is released."""
    with _log(ManualClock()) as log:
        assert put_log is not None
        log.put_message(_msg(1))
        done: list[PutResult | None] = []
        log.put_lock.acquire()
        t = threading.Thread(
            target=lambda: done.append(
                put_log(log._state, _msg(1), log.put_lock, log.topic_queue_table, log.staged)
            )
        )
        t.start()
        assert done == []  # it cannot have put: the lock is held
        log.put_lock.release()
        t.join()
        assert done[0] is not None
        assert done[0].logics_offset == 1
        assert not log.put_lock.locked()


@compiled
def test_put_log_under_a_lock_its_caller_holds() -> None:
    """``lock`` None (a run of puts under one hold, ``store/put_run.py``): the same put as
    with the lock, which put_log neither takes nor releases."""
    with _log(ManualClock()) as log, _log(ManualClock(), reference=True) as pure:
        assert put_log is not None
        for msg in (_msg(1), _msg(3)):
            expected = pure.put_message(msg)
            if log._state.current is None:
                got = log.put_message(msg)
            else:
                with log.put_lock:
                    got = put_log(log._state, msg, None, log.topic_queue_table, log.staged)
                    assert log.put_lock.locked()
            assert got is not None
            assert _result(got) == _result(expected)
            assert _state(log) == _state(pure)
        assert list(log.pending) == list(pure.pending)


def test_the_put_state_follows_every_put_path() -> None:
    """Single puts, prepared puts and a batch advance one put state: the counters, the store
    time (monotonic under a clock going back) and the file's wrote position (both builds)."""
    clock = ManualClock()
    with _log(clock) as log:
        sizes = []
        for i in range(40):
            clock.advance(-5 if i % 3 == 0 else 4)
            r = log.put_message(_msg(i, 200 + i))
            sizes.append(r.wrote_bytes)
            assert r.store_timestamp_ms == log._last_store_ts == log._state.last_store_ts
        ones = [log.prepare_one(_msg(i, 100)) for i in range(40, 45)]
        out: list[PutResult] = []
        log.put_prepared(ones, out)  # type: ignore[arg-type]
        sizes += [r.wrote_bytes for r in out]
        stamps = [r.store_timestamp_ms for r in out]
        assert stamps == sorted(stamps)
        assert log.put_times_total == log._state.put_times_total == 45
        assert log.put_size_total == log._state.put_size_total == sum(sizes)
        mf = log._state.current
        assert mf is not None
        assert mf is log._current
        assert mf.file_from_offset + mf.wrote_position == log.max_offset
        assert mf.store_timestamp == log._state.last_store_ts


def test_system_clock_store_times_lie_between_two_readings() -> None:
    """Under the system clock (read in C by put_log as ``time.time_ns() // 1_000_000``)
    every store time lies between a reading before and one after the put (both builds)."""
    with _log(SystemClock()) as log:
        last = 0
        for i in range(50):
            before = time.time_ns() // 1_000_000
            r = log.put_message(_msg(i, 64))
            after = time.time_ns() // 1_000_000
            assert max(before, last) <= r.store_timestamp_ms <= max(after, last)
            last = r.store_timestamp_ms
        assert log._state.clock is None


@compiled
def test_put_log_takes_a_free_lock_and_any_other_lock_by_its_methods() -> None:
    """A free ``threading.Lock`` is taken and released in C; a lock of another type (here an
    ``RLock``, and a wrapper counting its calls) through its ``acquire``/``release``: the same
    puts, each lock free afterwards."""

    class Counting:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.calls: list[str] = []

        def acquire(self) -> bool:
            self.calls.append("acquire")
            return self.lock.acquire()

        def release(self) -> None:
            self.calls.append("release")
            self.lock.release()

    with _log(ManualClock()) as log, _log(ManualClock(), reference=True) as pure:
        assert put_log is not None
        counting, rlock = Counting(), threading.RLock()
        for i, lock in enumerate([log.put_lock, counting, rlock, log.put_lock] * 3):
            msg = _msg(i)
            expected = pure.put_message(msg)
            got = None
            if log._state.current is not None:
                got = put_log(log._state, msg, lock, log.topic_queue_table, log.staged)
            if got is None:
                got = log.put_message(msg)
            assert _result(got) == _result(expected)
        assert counting.calls == ["acquire", "release"] * 3
        assert not log.put_lock.locked()
        assert not counting.lock.locked()
        assert rlock.acquire(blocking=False)  # free: not held by this thread either
        rlock.release()
        assert list(log.pending) == list(pure.pending)


@compiled
def test_put_log_queue_offsets_across_topics_and_queue_ids() -> None:
    """Queue offsets per (topic, queue id) as the reference counts them, for queue ids past
    the key cache's 1,024, topic names built anew per message (equal, not identical) and more
    topics than the cache keeps (it starts over); one key object per pair in the table."""
    with _log(ManualClock()) as log, _log(ManualClock(), reference=True) as pure:
        for i in range(4200):
            topic = "".join(("t", str(i % 4100 if i < 4150 else i % 3)))
            msg = _msg(i, 16)
            msg.topic = topic
            msg.queue_id = (0, 1, 1023, 1024, 70000)[i % 5]
            assert _result(log.put_message(msg)) == _result(pure.put_message(msg))
        assert log.topic_queue_table == pure.topic_queue_table
        assert list(log.pending) == list(pure.pending)
    with _log(ManualClock()) as one, _log(ManualClock()) as two:
        for log in (one, two):
            for _ in range(3):
                log.put_message(_msg(1))  # topic "T", queue 1
        assert one.topic_queue_table[("T", 1)] == 3
        (key_one,) = [k for k in one.topic_queue_table if k == ("T", 1)]
        (key_two,) = [k for k in two.topic_queue_table if k == ("T", 1)]
        assert key_one is key_two  # the cached key: no tuple made per put


@compiled
def test_put_log_requests_are_not_tracked_by_the_collector() -> None:
    """The dispatch requests a compiled put queues hold no cycle: untracked, so the
    collector does not walk the requests waiting for dispatch; equal to the reference's."""
    with _log(ManualClock()) as log, _log(ManualClock(), reference=True) as pure:
        for i in range(5):
            log.put_message(_msg(i))
            pure.put_message(_msg(i))
        assert list(log.pending) == list(pure.pending)
        assert not any(gc.is_tracked(r) for r in list(log.pending)[2:])  # after the cold puts


@compiled
def test_put_many_compiled_loop_gives_the_python_loops_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """``put_many`` with ``put_log_run`` (its loop in C) and with the Python loop over
    ``put_log`` (the reference, ``put_log_run`` None): the same results, records, requests,
    queue table and put state over runs that roll files, meet new topics (put_log declines
    them midway: the run goes on after the two-step put) and a message too large; the compiled
    loop stops at exactly the messages put_log declines."""
    from ariane.store import commit_log_state, put_run

    if commit_log_state.put_log_run is None:
        pytest.skip("an extension built before put_log_run")
    runs = [[_msg(i, 300 + (i * 53) % 900) for i in range(k, k + 40)] for k in range(0, 400, 40)]
    for j, run_msgs in enumerate(runs):
        run_msgs[7 + j].topic = f"New{j}"  # a topic put_log has not cached: declined
    runs[3][20] = _msg(9999, 5000)  # larger than max_message_size: a failed result
    logs: list[tuple[object, ...]] = []
    calls: list[int] = []
    real = commit_log_state.put_log_run

    def counting(state: PutState, msgs: list[MessageInner], i: int, *rest: object) -> int:
        end = real(state, msgs, i, *rest)  # type: ignore[arg-type]
        calls.append(end - i)
        return end

    for loop in (counting, None):
        monkeypatch.setattr(put_run, "put_log_run", loop)
        clock = ManualClock()
        with _log(clock) as log:
            results: list[PutResult] = []
            for run_msgs in runs:
                clock.advance(3)
                put_run.put_many(log, run_msgs, results)
            logs.append((
                [_result(r) for r in results], _state(log), list(log.pending),
                dict(log.topic_queue_table),
                [bytes(f.mm[: f.wrote_position]) for f in log.queue.files],
            ))  # fmt: skip
            assert not log.put_lock.locked()
            assert len(log.queue.files) > 3
    assert logs[0] == logs[1]
    assert sum(1 for r in logs[0][0] if r[PutResult.__slots__.index("msg_num")] == 0) == 1  # type: ignore[index]
    assert len(calls) > len(runs)  # stopped at the declined ones, went on after them
    assert sum(calls) > 300
