"""A fixed-bucket histogram cheap enough for hot paths (one ``bisect`` and three additions).

Readers (the Prometheus collector) turn the per-bucket counts into cumulative ``le`` buckets.
Not locked: a writer on another thread may race a reader by one observation, which monitoring
tolerates; under the GIL no count is ever lost or torn.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["Histogram"]


class Histogram:
    """Observations counted into buckets with inclusive upper bounds (Prometheus ``le``).

    Args:
        bounds: increasing upper bounds; a last, implicit ``+Inf`` bucket catches the rest.

    Raises:
        ValueError: the bounds are empty or not strictly increasing.
    """

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        if not bounds or any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)):
            raise ValueError(f"bucket bounds must be strictly increasing, got {bounds!r}")
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Count one observation."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= bound)`` per bucket, ending with ``+Inf``."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s observations (same bounds).

        Raises:
            ValueError: the bounds differ.
        """
        if other.bounds != self.bounds:
            raise ValueError("cannot merge histograms with different buckets")
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.sum += other.sum
        self.count += other.count
