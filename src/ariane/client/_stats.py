"""Counters of one consumer (a small part of RocketMQ's ``ConsumerStatsManager``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumeStats"]


@dataclass(slots=True)
class ConsumeStats:
    """Running totals since start.

    Attributes:
        pulled: messages pulled (after client-side filtering).
        consumed: messages whose listener call succeeded.
        failed: messages whose listener call failed (or returned a retry status).
        consume_calls: listener calls.
        consume_rt_ms_total: summed listener time (ms).
        flow_control_times: pulls delayed by flow control.
    """

    pulled: int = 0
    consumed: int = 0
    failed: int = 0
    consume_calls: int = 0
    consume_rt_ms_total: int = 0
    flow_control_times: int = 0

    def record_consume(self, count: int, rt_ms: int) -> None:
        """One listener call of ``count`` messages took ``rt_ms``."""
        self.consume_calls += 1
        self.consume_rt_ms_total += rt_ms

    def record_result(self, ok: int, failed: int) -> None:
        """Outcome of one listener call."""
        self.consumed += ok
        self.failed += failed
