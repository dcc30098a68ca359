"""Exactly-once from topic A to topic B: a streaming query (tests/spark/eo_driver.py) whose
Python workers and then driver are killed at random moments, restarted from its checkpoint,
leaves every row of A in B exactly once (the broker's idempotence window drops what a
retried task or a replayed micro-batch sends again)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from ariane.client import SyncAdmin, SyncProducer
from tests.spark import eo_driver
from tests.spark.conftest import create_topic, read_written, send_to_queues
from tests.support.cluster import Cluster
from tests.support.proctree import descendants, kill_tree, spawned

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]


def _batches(checkpoint: Path, kind: str) -> list[int]:
    folder = checkpoint / kind
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _task_workers(driver: int) -> list[int]:
    """The Python workers that run tasks (``pyspark.worker``, forked by their daemon) in a
    driver's tree; not the driver-side planning workers, whose death fails the query."""
    tree = descendants(driver)
    workers = {p for p in tree if _cmdline(p).endswith("pyspark.daemon pyspark.worker ")}
    return sorted(p for p in workers if _parent(p) in workers)


def _wait_commits(running: subprocess.Popen[bytes], ckpt: Path, count: int, log: Path) -> None:
    deadline = time.monotonic() + 300
    while len(_batches(ckpt, "commits")) < count:
        if running.poll() is not None:
            pytest.fail(f"the driver exited ({running.returncode}): {log.read_text()[-2000:]}")
        assert time.monotonic() < deadline, f"the query never committed {count} batches"
        time.sleep(0.05)


@pytest.mark.timeout(600)  # the session's JVM and cluster may start in its setup, then a driver
def test_killed_workers_and_driver_leave_every_row_once(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, source, target = spark_cluster.namesrv_addr, "SparkEoSource", "SparkEoTarget"
    create_topic(admin, source)
    create_topic(admin, target)
    send_to_queues(producer, source, 200)
    ckpt = tmp_path / "ckpt"
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    note = f"(seed {seed})"
    command = [sys.executable, eo_driver.__file__, ns, source, target, str(ckpt)]
    log = tmp_path / "driver.log"
    with log.open("wb") as out, spawned(command, stdout=out, stderr=subprocess.STDOUT) as running:
        _wait_commits(running, ckpt, 1, log)
        # an executor dies: a task fails (after sending some of its rows), Spark retries it
        time.sleep(rnd.uniform(0, 0.5))
        workers = _task_workers(running.pid)
        if workers:
            kill_tree(rnd.choice(workers))
        _wait_commits(running, ckpt, 2, log)
        time.sleep(rnd.uniform(0, 0.5))
        kill_tree(running.pid, proc=running)  # the driver crashes: JVM and workers at once
    offsets, commits = _batches(ckpt, "offsets"), _batches(ckpt, "commits")
    assert len(commits) < 7, f"the whole topic was written before the kill {note}"
    if offsets[-1] == commits[-1]:
        # the driver died between batches: make it die after the sink wrote the last batch
        # but before Spark committed it, so the restart replays a written batch
        (ckpt / "commits" / str(commits[-1])).unlink()
        (ckpt / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)
    send_to_queues(producer, source, 40, start=200)  # more arrives while it is down
    # the restart: the same query on the same checkpoint (in the test's own Spark: one JVM
    # start less), up to what is there
    for attempt in range(3):
        try:
            eo_driver.start(spark, ns, source, target, str(ckpt), once=True).awaitTermination()
            break
        except StreamingQueryException:
            # on a loaded machine a Python worker may fail to start: the query stops, and an
            # operator restarts it from the checkpoint again (which must stay exactly-once)
            if attempt == 2:
                raise
    bodies = Counter(r.body for r in read_written(spark, spark_cluster, topic=target))
    expected = {f"t:m{i}".encode() for i in range(240)}
    twice = sorted(b for b, n in bodies.items() if n > 1)
    assert not twice, f"written more than once {note}: {twice[:10]}"
    assert set(bodies) == expected, f"{note} missing {sorted(expected - set(bodies))[:10]}"
