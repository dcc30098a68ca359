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
