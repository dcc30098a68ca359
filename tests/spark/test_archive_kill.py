"""A streaming archive killed with SIGKILL in the middle of its run, then restarted from its
checkpoint, holds every message of the topic exactly once."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ariane.client import SyncAdmin, SyncProducer
from ariane.spark.pipelines import archive
from tests.spark.conftest import create_topic, send_to_queues
from tests.support.cluster import Cluster
from tests.support.proctree import kill_tree, spawned

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

_SPARK_CONF = [
    "--conf", "spark.ui.enabled=false",
    "--conf", "spark.sql.shuffle.partitions=2",
    "--conf", "spark.driver.memory=512m",
]  # fmt: skip


def _archive(ns: str, topic: str, out: Path, *mode: str) -> list[str]:
    """``ariane pipeline archive`` (run with ``spawned``: its JVM and Python workers die with
    it, whatever ends the test)."""
    return [sys.executable, "-m", "ariane", "pipeline", "archive", "-n", ns, "--topic", topic,
            "--to", str(out), "--master", "local[2]", *_SPARK_CONF, *mode]  # fmt: skip


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return 0
    return len([p for p in commits.iterdir() if p.name.isdigit()])


@pytest.mark.timeout(600)  # the session's JVM and cluster may start in its setup, then a driver
def test_archive_killed_mid_stream_resumes_exactly_once(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, topic = spark_cluster.namesrv_addr, "SparkArchiveKill"
    create_topic(admin, topic)
    send_to_queues(producer, topic, 400)
    out = tmp_path / "archive"
    # small micro-batches, one every 0.2 s: the kill lands while batches are being written
    command = _archive(
        ns, topic, out, "--continuous", "--trigger-seconds", "0.2",
        "--max-offsets-per-trigger", "40",
    )  # fmt: skip
    # output to files, not pipes: a full pipe nobody reads would stall the driver
    log = tmp_path / "archive.log"
    with log.open("wb") as sink, spawned(command, stdout=sink, stderr=subprocess.STDOUT) as running:
        deadline = time.monotonic() + 300
        while _committed_batches(out / "_checkpoint") < 3:
            if running.poll() is not None:
                output = log.read_text(errors="replace")
                pytest.fail(f"archive exited early ({running.returncode}): {output[-2000:]}")
            assert time.monotonic() < deadline, "the archive never committed 3 batches"
            time.sleep(0.05)
        kill_tree(running.pid, proc=running)  # the crash: driver, JVM and workers at once
    killed_after = _committed_batches(out / "_checkpoint")
    assert killed_after < 10, "the whole topic was archived before the kill"
    send_to_queues(producer, topic, 50, start=400)  # more arrives while it is down
    # the restart runs in the test's own session (one JVM start less): a new query on the
    # same checkpoint, as a rerun of the command would be
    assert archive(spark, ns, topic, out, available_now=True) == 450 - 40 * killed_after
    bodies = Counter(r.body for r in spark.read.parquet(str(out)).select("body").collect())
    expected = {f"m{i}".encode() for i in range(450)}
    duplicated = sorted(b for b, n in bodies.items() if n > 1)
    assert not duplicated, f"archived more than once: {duplicated[:10]}"
    assert set(bodies) == expected, f"missing: {sorted(expected - set(bodies))[:10]}"
