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
