"""``cancel_and_wait``: the one way background tasks are stopped."""

from __future__ import annotations

import asyncio

import pytest

from ariane.remoting.eventloop import cancel_and_wait


def test_tasks_are_cancelled_and_awaited_and_none_is_skipped() -> None:
    finished: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            finished.append(name)

    async def main() -> list[bool]:
        a = asyncio.create_task(forever("a"))
        b = asyncio.create_task(forever("b"))
        await asyncio.sleep(0)
        await cancel_and_wait(a, None, b)
        return [a.cancelled(), b.cancelled()]

    assert asyncio.run(main()) == [True, True]
    assert finished == ["a", "b"]


def test_an_error_the_task_ended_with_is_raised() -> None:
    async def broken() -> None:
        raise ValueError("boom")

    async def main() -> None:
        task = asyncio.create_task(broken())
        await asyncio.sleep(0)
        await cancel_and_wait(task)

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(main())


def test_a_cancelled_caller_stays_cancelled() -> None:
    """A stop() that is itself cancelled while waiting must not swallow that."""

    async def stubborn(gate: asyncio.Event) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await gate.wait()  # finishes its clean-up only when told
            raise

    async def main() -> tuple[bool, bool]:
        gate = asyncio.Event()
        inner = asyncio.create_task(stubborn(gate))
        await asyncio.sleep(0)
        stopper = asyncio.create_task(cancel_and_wait(inner))
        await asyncio.sleep(0)
        stopper.cancel()  # the caller is cancelled while the task cleans up
        await asyncio.sleep(0)
        gate.set()
        try:
            await stopper
        except asyncio.CancelledError:
            caller_cancelled = True
        else:
            caller_cancelled = False
        return caller_cancelled, inner.cancelled()

    assert asyncio.run(main()) == (True, True)


def test_nothing_to_stop() -> None:
    asyncio.run(cancel_and_wait())
    asyncio.run(cancel_and_wait(None, None))
