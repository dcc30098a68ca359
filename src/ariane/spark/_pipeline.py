"""Several pulls of one queue range in flight at once (no Spark, no I/O).

How it works: a task reading ``[start, end)`` of a queue would otherwise wait a broker round
trip per pull (the broker answers at most ``maxTransferCountOnMessageInMemory`` messages, 32
by default). ``PullWindow`` keeps up to ``depth`` pulls of successive offset chunks in flight,
in offset order, and the caller consumes their answers in that order:

* the first pull asks ``batch`` messages alone; its answer shows how many the broker gives
  per pull (``step``: fewer than asked means the broker's cap), and later chunks are
  ``step`` offsets wide;
* an answer that ends before its chunk does (``next`` below the chunk's end: the byte cap,
  or a smaller cap) puts a pull of the rest of the gap first in line;
* an answer that ends after the next chunks start (a tag filter skips entries) drops the
  pulls that start before ``next``; their answers are never used, so every offset is
  yielded by exactly one answer, in order;
* ``restart`` drops everything and pulls at the current offset alone (after an empty
  answer the caller retries);
* with ``refill_at`` below ``depth - 1`` the window tops up only once no more than
  ``refill_at`` pulls are left in flight, so new pulls leave in bursts: a caller that sends
  a burst's requests together (one write) gets the broker's answers together too (one
  write, one wake-up of each side per burst instead of per pull).

``T`` is whatever ``submit(offset, max_nums)`` returns (a future); the window only orders
them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PullWindow"]

T = TypeVar("T")


class PullWindow(Generic[T]):
    """The pulls of ``[start, end)`` in flight (see the module docstring).

    Args:
        start: first offset of the range.
        end: end of the range (exclusive).
        batch: messages asked by a pull (``pullBatchSize``).
        depth: pulls in flight at most (1: one at a time).
        submit: starts the pull of ``max_nums`` messages from ``offset``.
        refill_at: top up to ``depth`` only when at most this many pulls are in flight
            (default ``depth - 1``: whenever one answered).
    """

    __slots__ = (
        "_flight",
        "_learned",
        "depth",
        "end",
        "frontier",
        "offset",
        "refill_at",
        "step",
        "submit",
    )

    def __init__(
        self,
        start: int,
        end: int,
        batch: int,
        depth: int,
        submit: Callable[[int, int], T],
        refill_at: int | None = None,
    ) -> None:
        self.offset = start
        self.end = end
        self.step = max(1, batch)
        self.depth = max(1, depth)
        top = self.depth - 1
        self.refill_at = top if refill_at is None else max(0, min(refill_at, top))
        self.submit = submit
        #: where the next new chunk starts
        self.frontier = start
        self._flight: deque[tuple[int, int, T]] = deque()
        self._learned = False
        self._fill()

    @property
    def done(self) -> bool:
        """Whether every offset of the range has been answered."""
        return self.offset >= self.end

    def in_flight(self) -> list[tuple[int, int]]:
        """(offset, max_nums) of the pulls in flight, in order."""
        return [(o, n) for o, n, _ in self._flight]

    def head(self) -> tuple[int, int, T]:
        """The oldest pull in flight: (offset, max_nums, handle); it starts at ``offset``."""
        return self._flight[0]

    def advance(self, nxt: int, found: bool) -> None:
        """The head pull answered: the queue goes on at ``nxt`` (``found``: it held
        messages, so ``nxt`` minus its offset tells the broker's cap when below what was
        asked)."""
        start, asked, _ = self._flight.popleft()
        if found and not self._learned:
            self._learned = True
            self.step = max(1, min(self.step, nxt - start))
        elif found and nxt - start < asked:
            self.step = max(1, min(self.step, nxt - start))
        self.offset = nxt
        while self._flight and self._flight[0][0] < nxt:
            self._flight.popleft()  # overlaps what the head answered: never used
        if not self._flight:
            self.frontier = nxt  # nothing in flight covers what follows nxt
        elif self._flight[0][0] > nxt:
            gap = self._flight[0][0] - nxt
            self._flight.appendleft((nxt, gap, self.submit(nxt, gap)))
        self._fill()

    def restart(self) -> None:
        """Drop the pulls in flight and pull at ``offset`` alone."""
        self._flight.clear()
        self.frontier = self.offset
        self._fill(limit=1)

    def _fill(self, limit: int | None = None) -> None:
        if limit is None:
            if self._learned and len(self._flight) > self.refill_at:
                return  # wait until the burst in flight has drained to refill_at
            limit = self.depth if self._learned else 1
        while len(self._flight) < limit and self.frontier < self.end:
            count = min(self.step, self.end - self.frontier)
            self._flight.append((self.frontier, count, self.submit(self.frontier, count)))
            self.frontier += count
