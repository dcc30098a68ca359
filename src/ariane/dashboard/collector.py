"""The Dashboard page's history (rocketmq-dashboard's ``DashboardCollectTask``): every
``collect_interval_ms`` each broker's put/get TPS and today's totals are sampled into a ring
of ``history_points`` samples kept in memory, which the charts draw.

How it works: ``sample()`` reads the broker list through :class:`ClusterData` (one
GET_BROKER_RUNTIME_INFO per broker, under the deadline, cached briefly) and appends one
``Sample``; ``run()`` repeats it until cancelled. A broker that does not answer has no point
in that sample. Nothing is written to disk: a restarted dashboard starts a new history.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from ariane.dashboard.data import ClusterData
from ariane.errors import ArianeError

__all__ = ["Collector", "Sample"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Sample:
    """One moment: broker name -> (put TPS, get TPS, put today, get today)."""

    at_ms: int
    brokers: dict[str, tuple[float, float, int, int]]


class Collector:
    """Samples the brokers for the charts.

    Args:
        data: the cluster's cached lists.
        interval_s: seconds between samples.
        points: samples kept.
    """

    def __init__(self, data: ClusterData, interval_s: float, points: int) -> None:
        self.data = data
        self.interval_s = interval_s
        self.history: deque[Sample] = deque(maxlen=max(2, points))

    async def sample(self) -> Sample | None:
        """Take one sample now (``None`` when the NameServer did not answer)."""
        try:
            snap = await self.data.brokers()
        except ArianeError as exc:
            logger.debug("dashboard sample skipped: %s", exc)
            return None
        values = {
            f"{r.broker_name}" + ("" if r.broker_id == 0 else f"#{r.broker_id}"): (
                r.in_tps, r.out_tps, r.in_today, r.out_today,
            )
            for r in snap.rows
            if r.reachable
        }  # fmt: skip
        sample = Sample(snap.taken_ms, values)
        if not self.history or self.history[-1].at_ms != sample.at_ms:
            self.history.append(sample)
        return sample

    async def run(self) -> None:
        """Sample forever (cancel to stop)."""
        while True:
            await self.sample()
            await asyncio.sleep(self.interval_s)

    def series(self) -> dict[str, Any]:
        """The charts' data: timestamps and, per broker, put/get TPS and totals."""
        samples = list(self.history)
        names = sorted({n for s in samples for n in s.brokers})
        out: dict[str, Any] = {"times": [s.at_ms for s in samples], "brokers": {}}
        for name in names:
            rows = [s.brokers.get(name) for s in samples]
            out["brokers"][name] = {
                "putTps": [None if r is None else r[0] for r in rows],
                "getTps": [None if r is None else r[1] for r in rows],
                "putToday": [None if r is None else r[2] for r in rows],
                "getToday": [None if r is None else r[3] for r in rows],
            }
        return out
