"""The reput thread's wait after a round (issue 18, latency): after a small round it waits as
*idle*, so the next put wakes it at once; only after a big round (a busy writer) does it take
a 1 ms wait that puts do not cut short, to gather the next batch. No thread, no sleep: the
round is run directly and ``wait`` is recorded."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ariane.store.dispatch import ReputService
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
