"""A light ASYNC_FLUSH send answered without the reput thread (issue 18: latency at 2,000
msg/s; RocketMQ leaves every dispatch to ``ReputMessageService``).

How it works. At a light load (the reput thread *idle*: its last round was small, it waits
for the next put's wake-up) a send that puts to a queue somebody holds a pull on *claims* the
next round before its put (``ReputService.claimed``): the puts do not wake the reput thread
(``idle and not claimed``) and the loop runs the round itself with one ``call_soon``, in the
loop turn right after the read (``ReputService.reput_here``). The arrival is reported on the
loop's own thread, so the held pull is answered in that round
(``PullRequestHoldService.arriving``). Before, the same message went put -> wake-up of the
reput thread (a futex and a GIL hand-over) -> dispatch -> ``call_soon_threadsafe`` (an eventfd
write) -> the loop's next wake-up -> the held pull's answer.

The round runs after the read, not inside it: the read's own answers (the producer's
acknowledgements) are written first, at the read's end, and nothing is dispatched while the
read is handled. A round already running on the reput thread keeps the records (``reput_here``
declines: it takes rounds one at a time) and that thread is woken, as it is when more than a
light round is pending or dispatch fails. The claim is cleared *before* the round, so a put
after that wakes an idle thread again. Under load (the thread not idle: it gathers 1 ms
batches) or with no pull held on the queue nothing changes; SYNC_FLUSH is not concerned (its
records are visible only after the group commit, which has its own light round).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["LoopRound"]


class _Reput(Protocol):
    """What :class:`LoopRound` uses of the store's ``ReputService``."""

    idle: bool
    claimed: bool

    def reput_here(self) -> bool: ...
    def wakeup(self) -> None: ...


class LoopRound:
    """Claims and runs the reput's next round on the event loop (see the module docstring).

    Args:
        reput: the store's ``ReputService``.
        table: the held pulls by ``(topic, queue id)`` (``PullRequestHoldService.table``).
        loop: the event loop the sends are handled on.
    """

    def __init__(
        self,
        reput: _Reput,
        table: Mapping[tuple[str, int], object],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.reput = reput
        self.table = table
        self.loop = loop
        #: rounds run here (tests, benchmarks)
        self.rounds = 0

    def claim(self, keys: Iterable[tuple[str, int]]) -> None:
        """Before a put to ``keys`` (its ``(topic, queue id)`` pairs): claim the next round
        when the reput thread is idle and a pull is held on one of them (nothing to do when
        this loop turn claimed it already)."""
        reput = self.reput
        table = self.table
        if not table or reput.claimed or not reput.idle:
            return
        for key in keys:
            if key in table:
                reput.claimed = True
                self.loop.call_soon(self.run)
                return

    def run(self) -> None:
        """The claimed round, on the loop: the claim cleared first, then ``reput_here``; the
        reput thread woken when that declines (a round runs there, or more than a light round
        is pending, or dispatch failed)."""
        reput = self.reput
        reput.claimed = False
        self.rounds += 1
        done = False
        try:
            done = reput.reput_here()
        finally:
            if not done:
                reput.wakeup()
