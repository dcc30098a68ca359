"""The reput thread's wait after a round (issue 18, latency): after a small round it waits as
*idle*, so the next put wakes it at once; only after a big round (a busy writer) does it take
a 1 ms wait that puts do not cut short, to gather the next batch. No thread, no sleep: the
round is run directly and ``wait`` is recorded."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ariane.store.dispatch import ReputService
from ariane.store.dispatch_block import DispatchBlock
from ariane.store.format import DispatchRequest


def _req(phys: int, qoff: int) -> DispatchRequest:
    return DispatchRequest("T", 0, phys, 100, 0, 500, qoff, None, None, 0, None)


class _Log:
    def __init__(self, count: int) -> None:
        self.pending: deque[Any] = deque(_req(i * 100, i) for i in range(count))
        self.blocks_queued = 0
        self.max_offset = self.flushed_where = count * 100
        self.put_lock = threading.Lock()


class _Dispatcher:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.dispatched = 0

    def dispatch(self, batch: list[DispatchRequest]) -> None:
        self.dispatched += len(batch)

    def dispatch_columns(self, columns: tuple[tuple[Any, ...], ...]) -> None:
        self.dispatched += len(columns[0])


class _Recorded(ReputService):
    """Records each wait (seconds, idle during it) instead of waiting."""

    def __init__(self, log: _Log) -> None:
        super().__init__(
            log,  # type: ignore[arg-type]
            _Dispatcher(),  # type: ignore[arg-type]
            sync_visibility=False,
            on_error=lambda reason: None,
        )
        self.waits: list[tuple[float, bool]] = []

    def wait(self, seconds: float) -> None:
        self.waits.append((seconds, self.idle))


def test_after_a_small_round_the_next_put_wakes_the_thread() -> None:
    reput = _Recorded(_Log(1))
    reput.run_once()
    assert reput.dispatcher.dispatched == 1  # type: ignore[attr-defined]
    # idle during the wait: a put calls wakeup (MessageStore.put_message checks ``idle``)
    assert reput.waits == [(0.05, True)]
    assert not reput.idle


def test_after_a_big_round_puts_gather_for_1_ms() -> None:
    reput = _Recorded(_Log(40))
    assert reput.gather_from <= 40
    reput.run_once()
    assert reput.waits == [(0.001, False)]


def test_a_put_during_the_idle_wait_cuts_it_short() -> None:
    """``wakeup`` (what a put calls when ``idle``) sets the event the wait waits on."""
    log = _Log(1)
    reput = ReputService(
        log,  # type: ignore[arg-type]
        _Dispatcher(),  # type: ignore[arg-type]
        sync_visibility=False,
        on_error=lambda reason: None,
    )
    seen: list[bool] = []

    def wait(seconds: float) -> None:
        seen.append(reput.idle)
        if reput.idle:  # the writer's side: append, then wake the idle thread
            reput.wakeup()
        assert reput._event.is_set()  # the real wait would return at once

    reput.wait = wait  # type: ignore[method-assign]
    reput.run_once()
    assert seen == [True]


class _SyncLog(_Log):
    """``count`` requests pending, the first ``flushed`` of them flushed (SYNC_FLUSH's limit)."""

    def __init__(self, count: int, flushed: int) -> None:
        super().__init__(count)
        self.flushed_where = flushed * 100


def _sync_reput(log: _Log) -> tuple[ReputService, list[tuple[int, str]]]:
    """A SYNC_FLUSH reput service (no thread) whose listener records (next offset, thread)."""
    reput = ReputService(
        log,  # type: ignore[arg-type]
        _Dispatcher(),  # type: ignore[arg-type]
        sync_visibility=True,
        on_error=lambda reason: None,
    )
    calls: list[tuple[int, str]] = []

    def listener(
        topic: str, queue_id: int, nxt: int, tags: int, ts: int, props: dict[str, str] | None
    ) -> None:
        calls.append((nxt, threading.current_thread().name))

    reput.listener = listener
    return reput, calls


def test_unflushed_records_are_waited_for_as_idle_under_sync_flush() -> None:
    """SYNC_FLUSH: the records still pending are not flushed; the group commit's round that
    flushes them dispatches them or wakes the thread, so the thread waits idle (0.05 s, cut
    short by that wake-up) instead of polling every millisecond (it took the GIL 1,000 times
    a second while a put waited for its fdatasync)."""
    reput, calls = _sync_reput(_SyncLog(3, 0))
    waits: list[tuple[float, bool]] = []
    reput.wait = lambda seconds: waits.append((seconds, reput.idle))  # type: ignore[method-assign]
    reput.run_once()
    assert calls == []
    assert len(reput.commit_log.pending) == 3
    assert waits == [(0.05, True)]


def test_reput_here_dispatches_the_flushed_records_on_the_calling_thread() -> None:
    """What the group commit calls right after its fdatasync: the visible records dispatched
    and their arrival reported on the caller's thread; the unflushed one stays pending."""
    reput, calls = _sync_reput(_SyncLog(4, 3))
    assert reput.reput_here() is True
    assert reput.dispatcher.dispatched == 3  # type: ignore[attr-defined]
    assert reput.reput_from_offset == 300
    assert calls == [(3, threading.current_thread().name)]
    assert len(reput.commit_log.pending) == 1


def test_reput_here_leaves_the_records_to_a_round_running_elsewhere() -> None:
    """A round running on the reput thread may have read the visibility limit before the
    flush: ``reput_here`` does nothing and says so (the caller wakes the thread)."""
    reput, calls = _sync_reput(_SyncLog(2, 2))
    with reput._round:
        assert reput.reput_here() is False
    assert reput.dispatcher.dispatched == 0  # type: ignore[attr-defined]
    assert calls == []
    assert len(reput.commit_log.pending) == 2


def test_reput_here_leaves_a_busy_writers_records_to_the_thread() -> None:
    """More than ``gather_from`` requests pending (many writers): the reput thread dispatches
    them while the group commit runs its next fdatasync."""
    reput, calls = _sync_reput(_SyncLog(40, 40))
    assert reput.gather_from < 40
    assert reput.reput_here() is False
    assert reput.dispatcher.dispatched == 0  # type: ignore[attr-defined]
    assert calls == []


def test_reput_here_reports_a_failed_dispatch() -> None:
    """A failed dispatch puts the batch back and returns False: the thread retries it."""
    reput, calls = _sync_reput(_SyncLog(2, 2))

    def fail(columns: tuple[tuple[Any, ...], ...]) -> None:
        raise OSError("disk gone")

    reput.dispatcher.dispatch = fail  # type: ignore[method-assign]
    reput.dispatcher.dispatch_columns = fail  # type: ignore[method-assign]
    assert reput.reput_here() is False
    assert calls == []
    assert len(reput.commit_log.pending) == 2


def test_reput_here_counts_a_blocks_records() -> None:
    """One pending block of 40 records is a busy writer's too: left to the thread."""
    n = 40
    block = DispatchBlock(
        ["T"] * n, [0] * n, [i * 100 for i in range(n)], [100] * n, [0] * n, 500,
        list(range(n)), [None] * n, [None] * n, [0] * n,
    )  # fmt: skip
    log = _SyncLog(0, 0)
    log.pending.append(block)
    log.blocks_queued = 1
    log.flushed_where = log.max_offset = n * 100
    reput, calls = _sync_reput(log)
    assert reput.reput_here() is False
    assert calls == []
    assert reput.dispatcher.dispatched == 0  # type: ignore[attr-defined]
    log.pending[0], _rest = block.split(3)
    assert reput.reput_here() is True  # a block of 3: light
    assert reput.dispatcher.dispatched == 3  # type: ignore[attr-defined]
