"""Event-loop selection: uvloop when it is installed, the standard loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run", "uvloop_available"]

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
