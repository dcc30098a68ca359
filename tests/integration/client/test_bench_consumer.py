"""``ariane bench consumer`` runs against a real cluster and ends with its JSON summary."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.cluster import Cluster
from tests.support.processes import ariane_command

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("extra", [[], ["--threads", "--batch-max", "3"]])
def test_bench_consumer_backlog_mode(cluster: Cluster, extra: list[str]) -> None:
    topic = "BenchConsumeCli" + ("T" if extra else "")
    out = subprocess.run(
        ariane_command(
            "bench", "consumer", "-n", cluster.namesrv_addr, "--topic", topic,
            "--size", "256", "--preload", "500", "--messages", "500", "--duration", "60",
            "--report-interval", "0.2", "--json", *extra,
        ),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["mode"] == "backlog"
    assert summary["listener"] == ("thread" if extra else "coroutine")
    assert summary["consumed"] == 500
    assert summary["failed"] == 0
    assert summary["rt"] == "store->callback"
    for key in ("msgs_per_s", "mb_per_s", "avg_rt_ms", "max_rt_ms", "p99_rt_ms"):
        assert summary[key] > 0
    assert summary["max_rt_ms"] >= summary["p99_rt_ms"] >= summary["p50_rt_ms"]


def test_bench_consumer_fixed_rate_measures_born_to_callback(cluster: Cluster) -> None:
    out = subprocess.run(
        ariane_command(
            "bench", "consumer", "-n", cluster.namesrv_addr, "--topic", "BenchConsumeRate",
            "--produce-rate", "400", "--messages", "200", "--duration", "60",
            "--report-interval", "0.2", "--json",
        ),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["mode"] == "fixed-rate"
    assert summary["consumed"] == 200
    assert summary["rt"] == "born->callback"
    assert 0 < summary["p50_rt_ms"] <= summary["max_rt_ms"]
    assert "Consume TPS:" in out.stderr


def test_bench_consumer_trace_both_reports_both_modes_and_their_ratio(cluster: Cluster) -> None:
    """``--trace both``: an untraced and a traced drain of a backlog (each its own group),
    the traced one with a SubBefore and a SubAfter record per delivery."""
    out = subprocess.run(
        ariane_command(
            "bench", "consumer", "-n", cluster.namesrv_addr, "--topic", "BenchConsumeTrace",
            "--size", "128", "--preload", "300", "--messages", "300", "--duration", "60",
            "--trace", "both", "--json",
        ),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    off, on = summary["runs"]
    assert (off["trace"], on["trace"]) == (False, True)
    assert off["consumed"] == on["consumed"] == 300
    assert off["failed"] == on["failed"] == 0
    # deliveries past the 300th (in flight when the run stopped) are traced too
    assert on["trace_sent_records"] >= 600
    assert on["trace_sent_records"] % 2 == 0
    assert (on["trace_discarded"], on["trace_lost_records"]) == (0, 0)
    ratio = on["msgs_per_s"] / off["msgs_per_s"]
    assert summary["trace_throughput_ratio"] == pytest.approx(ratio, abs=0.001)
