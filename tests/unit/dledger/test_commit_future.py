"""CommitFuture behaves as a concurrent.futures.Future: callbacks, blocking waits from other
threads (no lost wake-up whichever comes first), ``wait``, ``asyncio.wrap_future``."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, InvalidStateError, wait

import pytest

from ariane.dledger.commit_future import CommitFuture


def test_callbacks_run_once_in_order_and_late_ones_at_once() -> None:
    f: CommitFuture[int] = CommitFuture()
    seen: list[tuple[str, int]] = []
    f.add_done_callback(lambda x: seen.append(("a", x.result())))
    f.add_done_callback(lambda x: seen.append(("b", x.result())))
    assert not f.done()
    assert "_condition" not in f.__dict__  # nobody blocked: no Condition was made
    f.set_result(7)
    assert f.done()
    assert f.result() == 7
    f.add_done_callback(lambda x: seen.append(("c", x.result())))
    assert seen == [("a", 7), ("b", 7), ("c", 7)]
    with pytest.raises(InvalidStateError):
        f.set_result(8)
    assert "_condition" not in f.__dict__
    assert isinstance(f, Future)


def test_a_failing_callback_does_not_stop_the_others() -> None:
    f: CommitFuture[int] = CommitFuture()
    seen: list[int] = []

    def bad(_: Future[int]) -> None:
        raise ValueError("boom")

    f.add_done_callback(bad)
    f.add_done_callback(lambda x: seen.append(x.result()))
    f.set_result(1)
    assert seen == [1]


def test_blocking_waiters_in_other_threads_are_always_woken() -> None:
    for _ in range(300):
        f: CommitFuture[int] = CommitFuture()
        got: list[int] = []
        started = threading.Event()

        def waiter(
            fut: CommitFuture[int] = f, out: list[int] = got, ev: threading.Event = started
        ) -> None:
            ev.set()
            out.append(fut.result(timeout=10))

        threads = [threading.Thread(target=waiter) for _ in range(2)]
        for t in threads:
            t.start()
        started.wait()
        f.set_result(3)
        for t in threads:
            t.join()
        assert got == [3, 3]


def test_timeout_cancel_wait_and_asyncio() -> None:
    f: CommitFuture[int] = CommitFuture()
    with pytest.raises(TimeoutError):
        f.result(timeout=0)
    g: CommitFuture[int] = CommitFuture()
    assert g.cancel()
    assert g.cancelled()
    h: CommitFuture[int] = CommitFuture()
    threading.Thread(target=h.set_result, args=(5,)).start()
    done, _ = wait([h], timeout=10)
    assert done == {h}

    async def main() -> int:
        k: CommitFuture[int] = CommitFuture()
        asyncio.get_running_loop().call_soon(k.set_result, 9)
        return await asyncio.wrap_future(k)

    assert asyncio.run(main()) == 9
    f.set_result(1)
    assert f.result(timeout=0) == 1
