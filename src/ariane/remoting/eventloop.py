"""Event-loop selection (uvloop when it is installed, the standard loop otherwise), and
stopping background tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["cancel_and_wait", "loop_factory", "run", "uvloop_available"]

T = TypeVar("T")

_uvloop: Any
try:
    import uvloop as _uvloop
except ImportError:  # pragma: no cover - uvloop is a declared dependency on POSIX
    _uvloop = None


def uvloop_available() -> bool:
    """Whether uvloop can be used."""
    return _uvloop is not None


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A callable creating the fastest available event loop."""
    if _uvloop is not None:
        factory: Callable[[], asyncio.AbstractEventLoop] = _uvloop.new_event_loop
        return factory
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], *, use_uvloop: bool = True) -> T:
    """Run ``main`` to completion on a new loop (uvloop if available and wanted)."""
    if use_uvloop and _uvloop is not None:
        with asyncio.Runner(loop_factory=_uvloop.new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel ``tasks`` (``None`` entries are skipped) and wait until each has finished.

    A task's own ``CancelledError`` is the expected end and is swallowed; any other error it
    ends with is raised. If the caller itself is being cancelled meanwhile, that cancellation
    is raised, not swallowed (which a bare ``except CancelledError: pass`` would do).
    """
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    for task in pending:
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
