"""Waiting for a condition in integration tests: the one set of polling helpers.

Integration tests watch real processes, so some facts can only be observed by asking again
(a route registered, a message delivered). These helpers ask until the condition holds and
fail the test with what was awaited when it does not within the timeout; the timeout only
bounds a broken run, it is never the thing a test waits for. Unit tests use none of them:
they drive clocks and events directly.

``wait_until``/``wait_for`` block (tests outside an event loop); ``await_until``/``await_for``
are their coroutine twins, and accept checks that are plain functions or coroutines.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["await_for", "await_until", "wait_for", "wait_until"]

T = TypeVar("T")

#: Pause between two checks.
INTERVAL_S = 0.05


class TimedOut(AssertionError):
    """A condition a test waited for never held."""


def _fail(what: object, timeout_s: float) -> TimedOut:
    return TimedOut(f"timed out after {timeout_s:g} s waiting for {what}")


def wait_until(
    check: Callable[[], object],
    timeout_s: float = 20.0,
    interval_s: float = INTERVAL_S,
    *,
    what: object = "",
) -> bool:
    """Call ``check`` until it returns something true; True, or :class:`TimedOut` (an
    ``AssertionError``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise _fail(what or getattr(check, "__name__", check), timeout_s)
        time.sleep(interval_s)
    return True


def wait_for(
    probe: Callable[[], T],
    accept: Callable[[T], object] = bool,
    timeout_s: float = 20.0,
    interval_s: float = 0.1,
) -> T:
    """Call ``probe`` until ``accept`` likes its value; returns the last value either way
    (the caller asserts on it, so a failure shows what was seen)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if accept(value) or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


async def _value(call: Callable[[], Any]) -> Any:
    value = call()
    if inspect.isawaitable(value):
        value = await value
    return value


async def await_until(
    check: Callable[[], object] | Callable[[], Awaitable[object]],
    timeout_s: float = 20.0,
    interval_s: float = INTERVAL_S,
    *,
    what: object = "",
) -> bool:
    """``wait_until`` on an event loop (``check`` may be a coroutine function)."""
    deadline = time.monotonic() + timeout_s
    while not await _value(check):
        if time.monotonic() > deadline:
            raise _fail(what or getattr(check, "__name__", check), timeout_s)
        await asyncio.sleep(interval_s)
    return True


async def await_for(
    probe: Callable[[], T] | Callable[[], Awaitable[T]],
    accept: Callable[[T], object] = bool,
    timeout_s: float = 20.0,
    interval_s: float = INTERVAL_S,
) -> T:
    """``wait_for`` on an event loop (``probe`` may be a coroutine function)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value: T = await _value(probe)
        if accept(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(interval_s)
