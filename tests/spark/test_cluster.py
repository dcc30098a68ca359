"""The ``ariane`` data source and pipelines on a real Spark standalone cluster: a master and a
worker started from the installed pyspark (``ariane.spark.standalone``) on loopback, executors
on this venv's Python (``PYSPARK_PYTHON``, the "installed environment" way of docs/spark.md).

One driver process (``cluster_job.py``) runs every step against ``spark://127.0.0.1:PORT`` once
per test session (a JVM start costs tens of seconds on a busy machine), then the cluster is
stopped; each test checks one step's exact outcome. The cluster's processes are stopped by
PID, whole trees (tests/support/proctree).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ariane.client import SyncAdmin, SyncProducer
from ariane.spark.standalone import start_standalone
from tests.spark.cluster_common import check_written_rows
from tests.spark.conftest import create_topic, send_to_queues
from tests.support.cluster import Cluster
from tests.support.processes import free_port
from tests.support.proctree import kill_tree, spawned

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

_JOB = Path(__file__).with_name("cluster_job.py")


@pytest.fixture(scope="session")
def cluster_result(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The driver's result, computed once per test run: xdist workers that both get tests of
    this module share it through a file under a lock in the run's common temp directory."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = shared / "spark-standalone-result.json"
    with (shared / "spark-standalone.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.exists():
            cached: dict[str, Any] = json.loads(cache.read_text())
            return cached
        # the broker cluster only where the run happens
        result = _run_on_standalone(
            request.getfixturevalue("spark_cluster"),
            request.getfixturevalue("admin"),
            request.getfixturevalue("producer"),
            tmp_path_factory,
        )
        cache.write_text(json.dumps(result))
        return result


def _run_on_standalone(
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """Start the standalone cluster, run the driver, stop the cluster; the driver's result."""
    work = tmp_path_factory.mktemp("standalone")
    ns = spark_cluster.namesrv_addr
    for topic in ("ClusterBatch", "ClusterReplay"):
        create_topic(admin, topic)
    create_topic(admin, "ClusterStream", queues=2)
    send_to_queues(producer, "ClusterStream", 30, queues=2)
    bare = work / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    standalone = start_standalone(work / "spark", master_port=free_port(), cores=2, memory="512m")
    try:
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "ARIANE_TEST_BARE_PYTHON": str(bare / "bin" / "python"),
        }
        log = work / "driver.log"
        with log.open("wb") as out, spawned(
            [sys.executable, str(_JOB), standalone.master_url, ns, str(work)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        ) as driver:  # fmt: skip
            code = driver.wait(timeout=600)
    finally:
        pids = standalone.pids
        standalone.stop()
        for pid in pids:  # anything the groups' signals missed
            kill_tree(pid)
    result_file = work / "result.json"
    assert result_file.exists(), log.read_text(errors="replace")[-5000:]
    result: dict[str, Any] = json.loads(result_file.read_text())
    result["driver_exit_code"] = code
    result["driver_log"] = log.read_text(errors="replace")[-3000:]
    result["master_url"] = standalone.master_url
    result["bare_python"] = str(bare / "bin" / "python")
    return result


def _step(result: dict[str, Any], name: str) -> dict[str, Any]:
    assert name in result, result.get("driver_log")
    step: dict[str, Any] = result[name]
    assert "error" not in step, step["error"]
    return step


@pytest.mark.timeout(900)
def test_batch_write_and_read_on_the_cluster(cluster_result: dict[str, Any]) -> None:
    assert cluster_result["master"] == cluster_result["master_url"]
    assert cluster_result["driver_exit_code"] == 0, cluster_result["driver_log"]
    rows = _step(cluster_result, "batch")["rows"]
    check_written_rows(rows, "b")


@pytest.mark.timeout(900)
def test_streaming_query_with_checkpoint_on_the_cluster(cluster_result: dict[str, Any]) -> None:
    stream = _step(cluster_result, "stream")
    # the first run took the 30 messages there, the restarted one only the 10 sent after
    assert stream["runs"] == [30, 10]
    expected = sorted([i % 2, i // 2, f"m{i}" if i < 30 else f"s{i}"] for i in range(40))
    assert stream["rows"] == expected


@pytest.mark.timeout(900)
def test_pipelines_on_the_cluster(cluster_result: dict[str, Any]) -> None:
    steps = _step(cluster_result, "pipelines")
    for name in ("archive", "replay", "lag"):
        assert steps[name]["exit_code"] == 0, steps[name]
    assert "archived 40 messages of ClusterBatch" in steps["archive"]["output"]
    assert "replayed 40 messages" in steps["replay"]["output"]
    assert "chart written to" in steps["lag"]["output"]
    assert steps["png"] == b"\x89PNG\r\n\x1a\n".hex()
    original = _step(cluster_result, "batch")["rows"]
    replayed = steps["replayed_rows"]
    # bodies, keys, tags and properties kept (queues and offsets are the replay's own)
    assert sorted(r[2:] for r in replayed) == sorted(r[2:] for r in original)


@pytest.mark.timeout(900)
def test_executors_without_the_dependencies_get_the_readable_error(
    cluster_result: dict[str, Any],
) -> None:
    message = _step(cluster_result, "bare_workers")["message"]
    bare = cluster_result["bare_python"]
    # the package itself arrives in the shipped zip; its dependencies do not
    assert message is not None
    assert message.startswith(
        f"PYSPARK_PYTHON: Spark's Python workers ('{bare}', running {bare}, Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}) cannot import ariane "
        "(ModuleNotFoundError(\"No module named '"
    ), message
    assert "start Spark with PYSPARK_PYTHON set to a Python that has ariane[spark]" in message
