"""``--trace off|on|both`` of the producer and consumer benchmarks (message trace cost).

How it works: ``both`` runs the same workload untraced and traced, alternating for
``--trace-rounds`` rounds (off, on, off, on...) in one process against one cluster, so the
ratio of the two throughputs is measured under the same machine load; the summary gives
each run, the median of each mode and ``trace_throughput_ratio`` = median on / median off.
A traced run also reports its dispatcher's counters (``trace_sent_records``,
``trace_discarded``, ``trace_lost_records``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

import click

from ariane.client.trace import TraceStats
from ariane.common.cli_bounds import COUNT

__all__ = ["TRACE_OPTIONS", "echo_results", "run_trace_modes", "trace_fields"]

TRACE_OPTIONS = (
    click.option(
        "--trace",
        type=click.Choice(["off", "on", "both"]),
        default="off",
        show_default=True,
        help="Message trace: off, on, or both (alternating runs, with the throughput ratio).",
    ),
    click.option(
        "--trace-rounds", type=COUNT, default=1, show_default=True, help="Rounds of --trace both."
    ),
    click.option("--trace-topic", default=None, help="Trace topic (RMQ_SYS_TRACE_TOPIC)."),
)


def trace_fields(stats: TraceStats | None) -> dict[str, Any]:
    """The dispatcher's counters for a result (empty when tracing was off)."""
    if stats is None:
        return {"trace": False}
    return {
        "trace": True,
        "trace_sent_records": stats.sent_records,
        "trace_sent_messages": stats.sent_messages,
        "trace_discarded": stats.discarded,
        "trace_lost_records": stats.lost_records,
    }


def run_trace_modes(
    mode: str, rounds: int, run_one: Callable[[bool, int], dict[str, Any]], as_json: bool
) -> dict[str, Any]:
    """``run_one(traced, index)`` for each run ``mode`` asks for; one result, or for
    ``both`` the runs, the medians and the ratio."""
    if mode != "both":
        return run_one(mode == "on", 0)
    runs: list[dict[str, Any]] = []
    for i in range(rounds * 2):
        traced = i % 2 == 1
        click.echo(f"run {i + 1}/{rounds * 2}: trace {'on' if traced else 'off'}", err=as_json)
        runs.append(run_one(traced, i))
    off = statistics.median(r["msgs_per_s"] for r in runs if not r["trace"])
    on = statistics.median(r["msgs_per_s"] for r in runs if r["trace"])
    return {
        "runs": runs,
        "msgs_per_s_trace_off": off,
        "msgs_per_s_trace_on": on,
        "trace_throughput_ratio": round(on / off, 3) if off else 0.0,
    }


def echo_results(result: dict[str, Any], as_json: bool, width: int) -> None:
    """Print a result (one JSON line with ``as_json``)."""
    if as_json:
        click.echo(json.dumps(result))
        return
    runs = result.get("runs")
    if runs is None:
        for key, value in result.items():
            click.echo(f"{key:>{width}}: {value}")
        return
    for i, run in enumerate(runs):
        click.echo(f"-- run {i + 1} (trace {'on' if run['trace'] else 'off'})")
        for key, value in run.items():
            click.echo(f"{key:>{width}}: {value}")
    for key in ("msgs_per_s_trace_off", "msgs_per_s_trace_on", "trace_throughput_ratio"):
        click.echo(f"{key}: {result[key]}")
