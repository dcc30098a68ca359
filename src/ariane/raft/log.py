"""What the core knows of its log: bounds and the term of every entry, never the payloads.

How it works: terms only grow along a log and change rarely, so the log is kept as *term
runs*, a sorted list of ``(first index, term)``; the term of entry ``i`` is the run found by
bisection. ``begin``/``end`` are the first and last index held (``end = begin - 1`` when the
log is empty; a fresh log has ``begin = 0, end = -1``), ``base_term`` is the term of entry
``begin - 1`` when it is known (-1 otherwise, e.g. for a fresh log). ``persisted`` is the
last index the shell reported durable; ``committed`` the last index known committed.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["RaftLog", "runs_of"]


def runs_of(first_index: int, terms: Sequence[int]) -> list[tuple[int, int]]:
    """The term runs of consecutive entries starting at ``first_index``."""
    runs: list[tuple[int, int]] = []
    last = None
    for offset, term in enumerate(terms):
        if term != last:
            runs.append((first_index + offset, term))
            last = term
    return runs


class RaftLog:
    """Bounds, term runs, persisted and committed index of a node's log.

    Args:
        begin: first index held.
        runs: term runs of the entries held (empty for an empty log).
        end: last index held.
        base_term: term of entry ``begin - 1`` (-1 if unknown).
        committed: last index known committed (clamped to ``[begin - 1, end]``).
    """

    __slots__ = ("_starts", "base_term", "begin", "committed", "end", "persisted", "runs")

    def __init__(
        self,
        begin: int = 0,
        runs: Sequence[tuple[int, int]] = (),
        end: int = -1,
        base_term: int = -1,
        committed: int = -1,
    ) -> None:
        if end < begin - 1:
            raise ValueError(f"log end {end} before begin {begin}")
        if end >= begin and (not runs or runs[0][0] > begin):
            raise ValueError("term runs do not cover the log")
        self.begin = begin
        self.end = end
        self.base_term = base_term
        self.runs: list[tuple[int, int]] = [r for r in runs if r[0] <= end]
        self._starts = [r[0] for r in self.runs]
        self.persisted = end
        self.committed = max(begin - 1, min(committed, end))

    def __repr__(self) -> str:
        return (
            f"RaftLog(begin={self.begin}, end={self.end}, runs={self.runs}, "
            f"persisted={self.persisted}, committed={self.committed})"
        )

    @property
    def last_term(self) -> int:
        """Term of the last entry (``base_term`` when empty)."""
        return self.runs[-1][1] if self.end >= self.begin else self.base_term

    def term_at(self, index: int) -> int | None:
        """Term of entry ``index``; ``base_term`` for ``begin - 1``; None when unknown."""
        if index > self.end or index < self.begin - 1:
            return None
        if index == self.begin - 1:
            return self.base_term
        runs = self.runs
        if index >= runs[-1][0]:
            return runs[-1][1]
        return runs[bisect.bisect_right(self._starts, index) - 1][1]

    def terms(self, first: int, last: int) -> tuple[int, ...]:
        """Terms of entries ``first .. last`` (all held)."""
        out: list[int] = []
        runs = self.runs
        pos = bisect.bisect_right(self._starts, first) - 1
        index = first
        while index <= last:
            stop = runs[pos + 1][0] - 1 if pos + 1 < len(runs) else self.end
            upto = min(stop, last)
            out.extend([runs[pos][1]] * (upto - index + 1))
            index = upto + 1
            pos += 1
        return tuple(out)

    def run_start(self, index: int) -> int:
        """First index of the term run holding entry ``index`` (clamped to ``begin``)."""
        pos = bisect.bisect_right(self._starts, index) - 1
        return max(self.begin, self.runs[pos][0]) if pos >= 0 else self.begin

    def last_index_of_term(self, term: int) -> int | None:
        """Last index of an entry of ``term``, None when the log holds none."""
        runs = self.runs
        for pos in range(len(runs) - 1, -1, -1):
            if runs[pos][1] == term:
                return runs[pos + 1][0] - 1 if pos + 1 < len(runs) else self.end
            if runs[pos][1] < term:
                return None
        return None

    def append(self, first_index: int, terms: Sequence[int]) -> None:
        """Add entries ``first_index ..`` (must follow ``end``) with ``terms``."""
        if first_index != self.end + 1:
            raise ValueError(f"append at {first_index}, log ends at {self.end}")
        if not terms:
            return
        if len(terms) == 1 or terms[0] == terms[-1]:
            new = [(first_index, terms[0])]
        else:
            new = runs_of(first_index, terms)
        if self.runs and self.end >= self.begin and self.runs[-1][1] == new[0][1]:
            new = new[1:]
        self.runs.extend(new)
        self._starts.extend(r[0] for r in new)
        self.end += len(terms)

    def append_term(self, count: int, term: int) -> int:
        """Add ``count`` entries of ``term``; returns the first new index."""
        first = self.end + 1
        if count <= 0:
            return first
        if not self.runs or self.end < self.begin or self.runs[-1][1] != term:
            self.runs.append((first, term))
            self._starts.append(first)
        self.end += count
        return first

    def truncate_after(self, index: int) -> None:
        """Drop every entry after ``index`` (``index >= begin - 1``)."""
        if index >= self.end:
            return
        if index < self.begin - 1:
            raise ValueError(f"truncate at {index} below the log begin {self.begin}")
        cut = bisect.bisect_right(self._starts, index)
        del self.runs[cut:]
        del self._starts[cut:]
        self.end = index
        self.persisted = min(self.persisted, index)
        self.committed = min(self.committed, index)

    def reset(self, begin: int, base_term: int) -> None:
        """Empty the log; the next entry will be ``begin``, following one of ``base_term``."""
        self.runs.clear()
        self._starts.clear()
        self.begin = begin
        self.end = begin - 1
        self.base_term = base_term
        self.persisted = begin - 1
        self.committed = begin - 1

    def discard_before(self, begin: int) -> None:
        """Forget entries below ``begin`` (files cleaned up; they are all committed)."""
        if begin <= self.begin:
            return
        begin = min(begin, self.end + 1)
        base = self.term_at(begin - 1)
        self.base_term = -1 if base is None else base
        keep = bisect.bisect_right(self._starts, begin) - 1
        if keep > 0:
            del self.runs[:keep]
            del self._starts[:keep]
        self.begin = begin
        self.committed = max(self.committed, begin - 1)
        self.persisted = max(self.persisted, begin - 1)
