"""``ariane bench producer`` runs against a real cluster and ends with its JSON summary."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.cluster import Cluster
from tests.support.processes import ariane_command

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "args",
    [
        ["--messages", "300", "--concurrency", "8"],
        ["--messages", "300", "--async", "--concurrency", "32", "--keys", "--tags", "T"],
        ["--messages", "650", "--batch", "64", "--async", "--concurrency", "2"],
        ["--messages", "100", "--batch", "10", "--delay-level", "0", "--latency-fault"],
    ],
)
def test_bench_producer_prints_a_json_summary_last(cluster: Cluster, args: list[str]) -> None:
    out = subprocess.run(
        ariane_command(
            "bench", "producer", "-n", cluster.namesrv_addr, "--topic", "BenchCli",
            "--size", "256", "--report-interval", "0.2", "--json", *args,
        ),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    messages = int(args[args.index("--messages") + 1])
    assert summary["sent"] == messages
    assert summary["failed"] == 0
    for key in ("msgs_per_s", "mb_per_s", "avg_rt_ms", "max_rt_ms", "p99_rt_ms"):
        assert summary[key] > 0
    assert summary["max_rt_ms"] >= summary["p99_rt_ms"] >= summary["p50_rt_ms"]


def test_bench_producer_duration_mode_reports_every_interval(cluster: Cluster) -> None:
    out = subprocess.run(
        ariane_command(
            "bench", "producer", "-n", cluster.namesrv_addr, "--topic", "BenchCliTime",
            "--duration", "1.2", "--report-interval", "0.5", "--async", "--concurrency", "16",
        ),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert out.stdout.count("Send TPS:") >= 2
    assert "msgs_per_s" in out.stdout


def test_bench_producer_trace_both_reports_both_modes_and_their_ratio(cluster: Cluster) -> None:
    """``--trace both`` (issue 15's benchmark): an untraced then a traced run of the same
    workload, the traced one with its dispatcher's counters, and the throughput ratio."""
    out = subprocess.run(
        ariane_command(
            "bench", "producer", "-n", cluster.namesrv_addr, "--topic", "BenchCliTrace",
            "--size", "128", "--messages", "200", "--async", "--concurrency", "16",
            "--trace", "both", "--json",
        ),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    off, on = summary["runs"]
    assert (off["trace"], on["trace"]) == (False, True)
    assert off["sent"] == on["sent"] == 200
    assert off["failed"] == on["failed"] == 0
    assert "trace_sent_records" not in off
    # every answered send of the traced run (the warm-up send too) left one Pub record
    assert (on["trace_sent_records"], on["trace_discarded"], on["trace_lost_records"]) == (
        201,
        0,
        0,
    )
    assert (summary["msgs_per_s_trace_off"], summary["msgs_per_s_trace_on"]) == (
        off["msgs_per_s"],
        on["msgs_per_s"],
    )
    ratio = on["msgs_per_s"] / off["msgs_per_s"]
    assert summary["trace_throughput_ratio"] == pytest.approx(ratio, abs=0.001)
