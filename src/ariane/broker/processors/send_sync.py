"""SYNC_FLUSH single sends answered on the event loop in bulk (issue 18; RocketMQ answers
from the ``CompletableFuture`` of ``asyncPutMessage`` that ``GroupCommitService`` completes).

How it works: a single send under SYNC_FLUSH is answered once the group commit covers its
record. Instead of a ``concurrent.futures.Future`` per put (a ``Condition``, a done-callback, a
``call_soon_threadsafe`` and a loop handle per message), the put gets a :class:`SyncSend`: the
group-commit thread's ``set_result`` (a whole round at once) queues it on :class:`LoopAnswers`,
and the first of a round schedules one drain on the event loop, which answers every queued send
in one loop turn with the channels' flushes held, so a round's answers leave in one write per
connection. A send the store completes at once on the loop (``WAIT=false``, nothing to flush)
is answered by the processor directly, as before.

A read's run of sends (``send_run.py``) waits with one group-commit request and one
:class:`SyncRun`: the round's ``set_result`` queues the whole run, and the drain answers it in
one call (its SUCCESS frames written by the compiled ``answer_run``, as under ASYNC_FLUSH).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from ariane.remoting.channel import Channel, flushes_held
from ariane.remoting.dispatch import RequestContext
from ariane.store import PutResult, PutStatus

__all__ = ["LoopAnswers", "SyncRun", "SyncSend"]

T = TypeVar("T")
_TIMEOUT = PutStatus.FLUSH_DISK_TIMEOUT

logger = logging.getLogger(__name__)


class LoopAnswers(Generic[T]):
    """Sends (or runs of sends) completed on other threads, answered on ``loop`` by
    ``answer(send)``, in bulk.

    Args:
        loop: the event loop of the connections.
        answer: answers one completed send or run (on the loop thread).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, answer: Callable[[T], None]) -> None:
        self.loop = loop
        self.loop_thread = threading.get_ident()  # made on the loop (the first SYNC send)
        self._answer = answer
        self._queue: deque[T] = deque()
        self._scheduled = False

    def add(self, send: T) -> None:
        """Queue a completed send (any thread); schedule the drain unless one is due."""
        self._queue.append(send)
        if not self._scheduled:
            # the drain clears the flag before it pops: a send queued after its last pop
            # sees the flag clear and schedules another drain (at worst one too many)
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: the broker is gone, nobody to answer
                logger.debug("a SYNC_FLUSH put completed after the event loop closed")

    def _drain(self) -> None:
        self._scheduled = False
        queue = self._queue
        answer = self._answer
        with flushes_held():
            while queue:
                send = queue.popleft()
                try:
                    answer(send)
                except Exception:
                    logger.exception("answering a SYNC_FLUSH send failed")


class SyncSend:
    """One single send waiting for the group commit: the store's completion (``done`` /
    ``set_result``) and what its answer needs."""

    __slots__ = ("answers", "at_once", "ctx", "queue_id", "result", "submitting", "topic", "uniq")

    def __init__(
        self,
        answers: LoopAnswers[Any],
        ctx: RequestContext,
        topic: str,
        queue_id: int,
        uniq: str | None,
    ) -> None:
        self.answers = answers
        self.ctx = ctx
        self.topic = topic
        self.queue_id = queue_id
        self.uniq = uniq
        self.result: PutResult | None = None
        #: True while the processor's put call runs (set and cleared on the loop thread)
        self.submitting = True
        #: completed on the loop inside the put call: the processor answers it directly
        self.at_once = False

    def done(self) -> bool:
        return self.result is not None

    def set_result(self, result: PutResult) -> None:
        self.result = result
        answers = self.answers
        if self.submitting and threading.get_ident() == answers.loop_thread:
            self.at_once = True
            return
        answers.add(self)


class SyncRun:
    """A read's sends that wait for one group-commit request (``put_run.store_wait_run``): the
    store's completion of them all, queued whole on ``answers`` when the request completes.

    Attributes:
        channel: the connection they came on.
        requests / ready / results: each send's request (a ``RawSend`` or a command), what the
            pass prepared of it (``send_run._Ready``) and its put's result, in log order.
    """

    __slots__ = ("_done", "answers", "channel", "ready", "requests", "results")

    def __init__(
        self,
        answers: LoopAnswers[Any],
        channel: Channel,
        requests: Sequence[Any],
        ready: Sequence[Any],
        results: Sequence[PutResult],
    ) -> None:
        self.answers = answers
        self.channel = channel
        self.requests = requests
        self.ready = ready
        self.results = results
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: PutResult) -> None:
        """The group commit's answer for the run: FLUSH_DISK_TIMEOUT to each send if the
        request timed out; the run is queued for the loop either way."""
        self._done = True
        if result.status is _TIMEOUT:
            for own in self.results:
                own.status = _TIMEOUT
        self.answers.add(self)
