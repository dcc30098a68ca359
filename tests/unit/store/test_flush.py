import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from ariane.common.properties import WAIT_STORE_MSG_OK
from ariane.store.config import FlushDiskType
from ariane.store.flush import GATHER_FROM, GATHER_S, IDLE_WAIT_S, GroupCommitService, _Request
from ariane.store.inner import BatchItem, MessageBatchInner
from ariane.store.results import GetStatus, PutResult, PutStatus

from ..common.test_sched import sched_of, slice_supported
from .helpers import HOST, msg, open_store

SYNC = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}


def test_sync_flush_group_commit(tmp_path: Path) -> None:
    with open_store(tmp_path, **SYNC) as store:
        results: list[PutStatus] = []
        offsets: list[int] = []
        flushed: list[bool] = []
        lock = threading.Lock()

        def writer(w: int) -> None:
            for i in range(40):
                r = store.put_message(msg(queue_id=w % 4, body=b"%d-%d" % (w, i)))
                ok = store.commit_log.flushed_where >= r.wrote_offset + r.wrote_bytes
                with lock:
                    results.append(r.status)
                    offsets.append(r.wrote_offset)
                    flushed.append(ok)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [PutStatus.PUT_OK] * 320
        assert all(flushed)
        assert len(set(offsets)) == 320
        assert store.wait_dispatched()
        assert sum(store.get_max_offset_in_queue("TopicA", q) for q in range(4)) == 320


def test_sync_batch_and_no_wait(tmp_path: Path) -> None:
    with open_store(tmp_path, **SYNC) as store:
        batch = MessageBatchInner("TopicA", 0, [BatchItem(b"a"), BatchItem(b"b")], store_host=HOST)
        r = store.put_messages(batch)
        assert r.ok
        assert store.commit_log.flushed_where >= r.wrote_offset + r.wrote_bytes
        fut = store.submit_message(msg(**{WAIT_STORE_MSG_OK: "false"}))
        assert fut.done()
        assert fut.result().ok
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 3


def test_submit_never_blocks_and_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(tmp_path, sync_flush_timeout_ms=200, **SYNC) as store:
        gate = threading.Event()
        real_flush = store.commit_log.flush

        def stuck_flush(least_pages: int) -> bool:
            gate.wait(5)
            return real_flush(least_pages)

        monkeypatch.setattr(store.commit_log, "flush", stuck_flush)
        started = time.monotonic()
        fut = store.submit_message(msg(body=b"slow"))
        # the stuck flush holds 5 s: a blocking submit would wait it out
        assert time.monotonic() - started < 4.0
        assert not fut.done()
        result = fut.result(timeout=5)
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert result.msg_num == 1
        # not flushed, hence not visible to readers yet
        assert store.get_message("g", "TopicA", 0, 0, 32).status is not GetStatus.FOUND
        gate.set()
        assert store.wait_dispatched()
        assert store.get_message("g", "TopicA", 0, 0, 32).status is GetStatus.FOUND


def test_async_flush_service_flushes(tmp_path: Path) -> None:
    with open_store(
        tmp_path, flush_interval_commit_log_ms=10, flush_commit_log_least_pages=1,
        flush_commit_log_thorough_interval_ms=50,
    ) as store:  # fmt: skip
        r = store.put_message(msg(body=b"x" * 100))
        assert store.commit_log.flushed_where == 0
        deadline = time.monotonic() + 5
        while store.commit_log.flushed_where < r.wrote_bytes and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.commit_log.flushed_where >= r.wrote_bytes
        deadline = time.monotonic() + 5
        while store.checkpoint is not None and store.checkpoint.physic_msg_timestamp == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_least_pages_rule(tmp_path: Path) -> None:
    from ariane.store.mapped_file import MappedFile

    mf = MappedFile(str(tmp_path / "00000000000000000000"), 64 * 1024)
    mf.append(b"x" * 5000)
    assert not mf.is_able_to_flush(4)
    assert mf.is_able_to_flush(1)
    assert mf.flush(4) == 0
    assert mf.flush(0) == 5000
    mf.append(b"y" * (64 * 1024 - 5000))
    assert mf.is_full
    assert mf.is_able_to_flush(100)
    mf.destroy()
    assert not (tmp_path / "00000000000000000000").exists()


def test_relay_wakes_every_waiter_once() -> None:
    from collections import deque
    from concurrent.futures import Future

    from ariane.store.flush import SyncWaiter, _complete
    from ariane.store.results import PutResult

    relay: deque[SyncWaiter] = deque()
    waiters = [SyncWaiter(relay) for _ in range(20)]
    got: list[PutResult] = []
    threads = [threading.Thread(target=lambda w=w: got.append(w.wait())) for w in waiters]
    for t in threads:
        t.start()
    future: Future[PutResult] = Future()
    results = [PutResult(PutStatus.PUT_OK, wrote_offset=i) for i in range(21)]
    _complete([*zip(waiters, results, strict=False), (future, results[20])], relay)
    assert all(w.done() for w in waiters)  # a relayed waiter counts as done: never re-completed
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert sorted(r.wrote_offset for r in got) == list(range(20))
    assert future.result(0) is results[20]
    assert not relay


def test_sync_writers_that_stop_early_do_not_stall_the_rest(tmp_path: Path) -> None:
    # The group commit waits (briefly) for as many requests as its last round completed;
    # writers dropping out must only shrink that, never strand a waiter.
    with open_store(tmp_path, **SYNC) as store:
        statuses: list[PutStatus] = []

        def writer(w: int) -> None:
            for i in range(5 * w + 1):
                statuses.append(store.put_message(msg(body=b"%d-%d" % (w, i))).status)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        assert statuses == [PutStatus.PUT_OK] * sum(5 * w + 1 for w in range(12))
        assert store.group_commit is not None
        assert not store.group_commit.relay


def test_commit_log_files_are_prepared_ahead_of_the_writer(tmp_path: Path) -> None:
    from ariane.store.mapped_file_queue import MappedFileQueue

    size = 64 * 1024
    queue = MappedFileQueue(str(tmp_path / "commitlog"), size, populate=True)
    buf = bytearray(4096)
    assert queue.prepare_ahead(0, 16384, buf)  # creates the first file, warms 4 KiB of it
    assert queue.warmed_to == 4096  # before the writer takes it (a new store's first file)
    steps = 0
    while queue.prepare_ahead(0, 16384, buf):
        steps += 1
    assert steps == 3  # warmed 16 KiB ahead, 4 KiB per step, then nothing to do
    assert queue.warmed_to == 16384
    first = queue.get_last_mapped_file(0)
    assert first is not None
    assert first.file_from_offset == 0
    assert not queue.prepare_ahead(0, 16384, buf)  # taken by the writer: warm already
    assert queue._next is None  # not past half of the first file yet
    first.wrote_position = 40000
    while queue.prepare_ahead(queue.max_offset, 16384, buf):
        pass
    assert queue._next is not None
    assert queue._next.file_from_offset == size
    first.wrote_position = size - 100
    while queue.prepare_ahead(queue.max_offset, 16384, buf):
        pass
    assert queue._warmed_to == size - 100 + 16384  # into the next file
    prepared = queue._next
    first.wrote_position = size
    assert queue.get_last_mapped_file(0) is prepared  # the writer takes the prepared file
    queue.shutdown()
    assert not MappedFileQueue(str(tmp_path / "plain"), size).prepare_ahead(0, 16384, buf)


class _RecordingCond:
    """A Condition stand-in that records its waits instead of blocking."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return False

    def notify(self) -> None:
        return None


def _gather_waits(expect: int, queued: int) -> list[float]:
    """The waits of one group-commit round after a round that completed ``expect``
    requests, with ``queued`` requests queued (no thread, no fsync)."""

    class _Round(GroupCommitService):
        def _do_commit(self) -> int:
            done = len(self._inflight)
            self._inflight = []
            return done

    gc = _Round(None, None, timeout_ms=5000, on_flushed=lambda: None)  # type: ignore[arg-type]
    cond = _RecordingCond()
    gc._cond = cond  # type: ignore[assignment]
    gc._expect = expect
    for i in range(queued):
        future: Future[PutResult] = Future()
        gc._write.append(_Request(i, future, PutResult(PutStatus.PUT_OK), 1e18))
    gc.run_once()
    assert gc._expect == queued
    return cond.waits


def test_group_commit_gathers_only_after_a_big_round() -> None:
    """Issue 18 (latency): after a round of a few requests (2,000 sends/s) the next round
    flushes at once instead of waiting up to 1 ms for as many requests as the last one had;
    after a big round (many blocked writers) it still gathers them."""
    assert _gather_waits(2, 1) == []  # light load: no gather wait
    assert _gather_waits(GATHER_FROM, 1) == [GATHER_S]  # many writers: gather them
    assert _gather_waits(GATHER_FROM, GATHER_FROM) == []  # all back already


class _Log:
    """The two positions the group commit reads to tell idle from unflushed."""

    def __init__(self, written: int, flushed: int) -> None:
        self.max_offset = written
        self.flushed_where = flushed


def _idle_round(written: int, flushed: int, *, stopped: bool = False) -> tuple[list[float], int]:
    """One round of a group commit with no request queued: its waits and how many commits
    it ran (no thread, no fsync)."""
    commits: list[int] = []

    class _Round(GroupCommitService):
        def _do_commit(self) -> int:
            commits.append(1)
            return 0

    gc = _Round(_Log(written, flushed), None, timeout_ms=5000, on_flushed=lambda: None)  # type: ignore[arg-type]
    cond = _RecordingCond()
    gc._cond = cond  # type: ignore[assignment]
    if stopped:
        gc.stop()
    gc.run_once()
    return cond.waits, len(commits)


def test_an_idle_group_commit_sleeps_long_and_commits_nothing() -> None:
    """Nothing written and unflushed, no request: one long wait (every writer wakes it) and no
    commit round; RocketMQ's 10 ms poll made an idle SYNC_FLUSH broker's busiest thread."""
    assert _idle_round(4096, 4096) == ([IDLE_WAIT_S], 0)


def test_unflushed_data_without_a_request_is_flushed_within_10_ms() -> None:
    """Data written without a request (WAIT=false, a replica's append) whose wake-up may have
    come while a round ran: the short wait, then a commit round that flushes it."""
    assert _idle_round(8192, 4096) == ([0.01], 1)


def test_a_stopped_group_commit_does_not_wait() -> None:
    """``stop`` sets the flag under the condition's lock, so a round that starts after it
    never begins the long idle wait."""
    assert _idle_round(4096, 4096, stopped=True) == ([], 0)


def test_wakeup_notifies_the_waiting_round() -> None:
    """A write without a request wakes the round's condition (the base class's event is not
    what the group commit waits on)."""
    notified: list[int] = []

    class _Cond(_RecordingCond):
        def notify(self) -> None:
            notified.append(1)

    gc = GroupCommitService(_Log(0, 0), None, timeout_ms=5000, on_flushed=lambda: None)  # type: ignore[arg-type]
    gc._cond = _Cond()  # type: ignore[assignment]
    gc.wakeup()
    assert notified == [1]


def test_wait_false_put_is_flushed_by_an_idle_group_commit(tmp_path: Path) -> None:
    """End to end on a real store: a WAIT=false put answers at once and its data reaches the
    disk without any waiting put behind it (the wake-up cuts the idle wait short)."""
    with open_store(tmp_path, **SYNC) as store:
        flushed = threading.Event()
        gc = store.group_commit
        assert gc is not None
        dispatch = gc.dispatch
        assert dispatch is not None

        def flushed_then_dispatch() -> bool:  # called after each round that flushed
            flushed.set()
            return dispatch()

        gc.dispatch = flushed_then_dispatch
        fut = store.submit_message(msg(**{WAIT_STORE_MSG_OK: "false"}))
        result = fut.result()
        assert result.ok
        assert flushed.wait(30)
        assert store.commit_log.flushed_where >= result.wrote_offset + result.wrote_bytes


class _FlushingLog(_Log):
    """A log whose flush makes everything written durable (no file, no fsync)."""

    class _Queue:
        store_timestamp = 0

    def __init__(self, written: int) -> None:
        super().__init__(written, 0)
        self.queue = self._Queue()

    def flush(self, least_pages: int) -> bool:
        idle = self.flushed_where == self.max_offset
        self.flushed_where = self.max_offset
        return idle


def _flushing_round(dispatched: bool) -> tuple[list[bool], list[int], Future[PutResult]]:
    """One group-commit round (no thread) for a request the flush covers, with a ``dispatch``
    that returns ``dispatched``: whether the request was completed when ``dispatch`` ran
    (one entry per call), and the ``on_flushed`` calls."""
    completed_at_dispatch: list[bool] = []
    woken: list[int] = []
    future: Future[PutResult] = Future()

    def dispatch() -> bool:
        completed_at_dispatch.append(future.done())
        return dispatched

    gc = GroupCommitService(
        _FlushingLog(4096), None,  # type: ignore[arg-type]
        timeout_ms=5000, on_flushed=lambda: woken.append(1), dispatch=dispatch,
    )  # fmt: skip
    gc.put_request(4096, future, PutResult(PutStatus.PUT_OK, 0, 4096))
    gc.run_once()
    assert future.result().status is PutStatus.PUT_OK
    return completed_at_dispatch, woken, future


def test_a_flushing_round_dispatches_on_its_own_thread_after_its_answers() -> None:
    """Issue 18 (SYNC_FLUSH latency): right after the fdatasync, once the round's requests are
    completed (their answers queued for the loop first), the flushed records are dispatched
    on the group commit's thread (``dispatch``) instead of waking the reput thread: no thread
    hand-over between the flush and the arrival. The reput thread is woken only when
    ``dispatch`` declines (a busy writer, a round running there)."""
    assert _flushing_round(True)[:2] == ([True], [])
    assert _flushing_round(False)[:2] == ([True], [1])


def test_a_round_that_flushed_nothing_dispatches_nothing() -> None:
    """No flush progress (everything was durable already): neither dispatch nor a wake-up."""
    calls: list[str] = []
    log = _FlushingLog(4096)
    log.flushed_where = 4096
    gc = GroupCommitService(
        log, None,  # type: ignore[arg-type]
        timeout_ms=5000, on_flushed=lambda: calls.append("wake"),
        dispatch=lambda: calls.append("dispatch") is None,
    )  # fmt: skip
    future: Future[PutResult] = Future()
    gc.put_request(4096, future, PutResult(PutStatus.PUT_OK, 0, 4096))
    gc.run_once()
    assert future.result().status is PutStatus.PUT_OK
    assert calls == []


def test_a_synced_put_is_dispatched_by_the_group_commit_thread(tmp_path: Path) -> None:
    """End to end on a real SYNC_FLUSH store whose reput thread is stopped: a waiting put is
    answered after its fdatasync, and its record reaches the ConsumeQueue and the arriving
    listener on the group commit's thread, never before it is flushed."""
    with open_store(tmp_path, **SYNC) as store:
        store.reput.stop()  # only the group commit can dispatch now
        seen: list[tuple[str, int, bool]] = []
        arrived = threading.Event()

        def listener(
            topic: str, queue_id: int, nxt: int, tags: int, ts: int, props: dict[str, str] | None
        ) -> None:
            flushed = store.commit_log.flushed_where >= store.reput.reput_from_offset
            seen.append((threading.current_thread().name, nxt, flushed))
            arrived.set()

        store.reput.listener = listener
        result = store.put_message(msg(queue_id=1))
        assert result.ok
        assert store.commit_log.flushed_where >= result.wrote_offset + result.wrote_bytes
        assert arrived.wait(10)
        assert seen == [("GroupCommitService", 1, True)]
        assert store.get_max_offset_in_queue("TopicA", 1) == 1
        got = store.get_message("G", "TopicA", 1, 0, 32)
        assert got.status is GetStatus.FOUND
        assert len(got.messages) == 1


@pytest.mark.skipif(not slice_supported(), reason="needs Linux's se.slice (6.12+)")
def test_the_group_commit_thread_runs_with_the_configured_slice(tmp_path: Path) -> None:
    """Issue 18: woken at the end of each fdatasync, the thread asks for a short slice."""
    with open_store(tmp_path, **SYNC, group_commit_slice_ns=300_000) as store:
        assert store.put_message(msg()).status == PutStatus.PUT_OK  # a round ran: started
        gc = store.group_commit
        assert gc is not None
        thread = gc._thread
        assert thread is not None
        assert thread.native_id is not None
        assert sched_of(thread.native_id)["se.slice"] == "300000"
