"""The background event loop behind the blocking wrappers (no sockets)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ariane.client.errors import ClientStateError
from ariane.client.sync import background_loop


def test_run_executes_on_the_loop_thread_and_returns_the_result() -> None:
    bg = background_loop()

    async def where() -> str:
        return threading.current_thread().name

    assert bg.run(where()) == "ariane-client-loop"
    assert background_loop() is bg  # one per process


def test_run_reraises_the_coroutine_s_exception() -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        background_loop().run(boom())


def test_run_from_the_loop_thread_refuses_instead_of_deadlocking() -> None:
    bg = background_loop()

    async def nested() -> None:
        async def inner() -> None:
            return None

        bg.run(inner())

    with pytest.raises(ClientStateError):
        bg.run(nested())


def test_bridge_completes_a_thread_safe_future_from_an_asyncio_future() -> None:
    bg = background_loop()

    def start() -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.001, future.set_result, 42)
        return future

    assert bg.bridge(start).result(5) == 42

    def failing() -> asyncio.Future[int]:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        bg.bridge(failing).result(5)


def test_run_timeout_cancels() -> None:
    async def forever() -> None:
        await asyncio.sleep(3600)

    with pytest.raises(TimeoutError):
        background_loop().run(forever(), timeout_s=0.01)
