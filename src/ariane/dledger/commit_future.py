"""The future of a DLedger put: a ``concurrent.futures.Future`` without its per-future
``threading.Condition`` until a thread blocks on it.

Why: every put on a DLedger leader waits for the quorum through a future, and building a
``Future`` builds a ``Condition`` (pure Python, about half of the future's cost), although the
send path only ever asks ``done()`` and adds a callback; only blocking callers (``result()``
before the commit: tools, the timer's prepared puts, tests) need to wait. Here the future
holds a plain lock; the condition is made over that lock, under a module lock, the first time
the inherited blocking code asks for it, and ``set_result`` wakes it only if it exists. A
waiter makes the condition before it checks the state under the lock, and ``set_result``
sets the state before it looks for the condition under the same lock, so no wake-up is lost.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["CommitFuture"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# concurrent.futures' state names (its module constants)
_PENDING = "PENDING"
_FINISHED = "FINISHED"
_DONE = frozenset({"CANCELLED", "CANCELLED_AND_NOTIFIED", _FINISHED})
_MAKING = threading.Lock()


class CommitFuture(Future[T]):
    """A ``Future`` that makes its ``Condition`` only for blocking waiters (see the module
    docstring); everything else behaves as the standard one."""

    def __init__(self) -> None:  # the base's, minus the Condition
        self._lock = threading.Lock()
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters = []
        self._done_callbacks: list[Callable[[Future[T]], object]] = []

    def __getattr__(self, name: str) -> Any:
        """``_condition`` on first use (the inherited blocking methods)."""
        if name != "_condition":
            raise AttributeError(name)
        with _MAKING:
            cond = self.__dict__.get("_condition")
            if cond is None:
                cond = self.__dict__["_condition"] = threading.Condition(self._lock)
        return cond

    def done(self) -> bool:
        return self._state in _DONE

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        with self._lock:
            if self._state not in _DONE:
                self._done_callbacks.append(fn)
                return
        try:
            fn(self)
        except Exception:
            logger.exception("exception calling callback for %r", self)

    def set_result(self, result: T) -> None:
        with self._lock:
            if self._state in _DONE:  # (no repr here: it takes the lock)
                raise InvalidStateError(f"{self._state}: the result is set already")
            self._result = result
            self._state = _FINISHED
            for waiter in self._waiters:
                waiter.add_result(self)
            cond = self.__dict__.get("_condition")
            if cond is not None:
                cond.notify_all()
        for callback in self._done_callbacks:
            try:
                callback(self)
            except Exception:
                logger.exception("exception calling callback for %r", self)

    def result(self, timeout: float | None = None) -> T:
        if self._state == _FINISHED and self._exception is None:
            return self._result  # type: ignore[return-value]
        return super().result(timeout)
