"""The driver of the standalone-cluster tests (``tests/spark/test_cluster.py``), run as its own
process: one SparkContext per process, and the test worker may already hold a local one.

``python cluster_job.py MASTER NAMESERVER WORKDIR`` (env ``ARIANE_TEST_BARE_PYTHON``: a Python
without Ariane's dependencies) writes ``WORKDIR/result.json``: one entry
per step, each either its observations or ``{"error": traceback}``, so that every test
reports its own step. The topics exist and ``ClusterStream`` holds 30 messages (the test
created them); the executors run this interpreter (``PYSPARK_PYTHON``, the installed venv).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from cluster_common import CONF, WRITE_SCHEMA, rows_to_write  # this folder: see its docstring
from pyspark.sql import SparkSession

from ariane.cli import main
from ariane.client import Message, MessageQueue, SyncAdmin, SyncProducer
from ariane.spark.session import spark_session


def rows(spark: SparkSession, ns: str, topic: str) -> list[list[Any]]:
    """Every message of ``topic`` (batch read), as [queueId, queueOffset, body, keys, tags,
    properties] sorted by queue and offset."""
    df = spark.read.format("ariane").option("nameserver", ns).option("topic", topic).load()
    return sorted(
        [r.queueId, r.queueOffset, r.body.decode(), r.keys, r.tags, dict(r.properties or {})]
        for r in df.collect()
    )


def batch(spark: SparkSession, ns: str, work: Path) -> dict[str, Any]:
    """Write 40 rows into ClusterBatch with a batch job, then read the topic back."""
    data = rows_to_write("b")
    df = spark.createDataFrame(data, WRITE_SCHEMA).repartition(2)
    (
        df.write.format("ariane")
        .option("nameserver", ns)
        .option("topic", "ClusterBatch")
        .option("idNamespace", "cluster-test")
        .mode("append")
        .save()
    )
    return {"rows": rows(spark, ns, "ClusterBatch")}


def stream(spark: SparkSession, ns: str, work: Path) -> dict[str, Any]:
    """Two AvailableNow runs of one checkpointed query ClusterStream -> Parquet, 10 messages
    sent between them; the Parquet output as [queueId, queueOffset, body]."""
    out, checkpoint = work / "stream-out", work / "stream-ck"
    runs = []

    def run() -> None:
        query = (
            spark.readStream.format("ariane")
            .option("nameserver", ns)
            .option("topic", "ClusterStream")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "16")
            .load()
            .select("queueId", "queueOffset", "body")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        runs.append(sum(p["numInputRows"] for p in query.recentProgress))

    run()
    with SyncProducer("cluster_job_producer", namesrv_addr=ns) as producer:
        for i in range(30, 40):
            producer.send(
                Message("ClusterStream", f"s{i}".encode()),
                queue=MessageQueue("ClusterStream", "broker-a", i % 2),
            )
    with SyncAdmin(namesrv_addr=ns) as admin:  # indexed a moment after the send's answer
        deadline = time.monotonic() + 60
        for queue_id in (0, 1):
            while admin.max_offset(MessageQueue("ClusterStream", "broker-a", queue_id)) < 20:
                if time.monotonic() > deadline:
                    raise TimeoutError("ClusterStream's sends were never indexed")
                time.sleep(0.05)
    run()
    got = sorted(
        [r.queueId, r.queueOffset, bytes(r.body).decode()]
        for r in spark.read.parquet(str(out)).collect()
    )
    return {"runs": runs, "rows": got}


def pipelines(spark: SparkSession, ns: str, work: Path) -> dict[str, Any]:
    """``ariane pipeline archive``/``replay``/``lag-report`` with ``--master`` this cluster (in
    this process, so they reuse its session)."""
    master = spark.sparkContext.master
    runner = CliRunner()
    common = ["-n", ns, "--master", master]
    out: dict[str, Any] = {}
    archive_dir = work / "archive"
    for name, args in (
        ("archive", ["archive", "--topic", "ClusterBatch", "--to", str(archive_dir)]),
        ("replay", ["replay", "--from", str(archive_dir), "--topic", "ClusterReplay",
                    "--ordered"]),
        ("lag", ["lag-report", "--topic", "ClusterBatch", "--png", str(work / "lag.png")]),
    ):  # fmt: skip
        result = runner.invoke(main, ["pipeline", *args, *common])
        out[name] = {"exit_code": result.exit_code, "output": result.output}
        if result.exception is not None and result.exit_code != 0:
            out[name]["exception"] = "".join(traceback.format_exception(result.exception))
    out["replayed_rows"] = rows(spark, ns, "ClusterReplay")
    out["png"] = (work / "lag.png").read_bytes()[:8].hex() if (work / "lag.png").exists() else ""
    return out


def bare_workers(spark: SparkSession, ns: str, work: Path) -> dict[str, Any]:
    """``register`` with the executors' Python switched to a venv without Ariane's
    dependencies (the package itself still comes in the shipped zip)."""
    from ariane.errors import WorkerPythonError
    from ariane.spark import register

    sc = spark.sparkContext
    before = sc.pythonExec
    sc.pythonExec = os.environ["ARIANE_TEST_BARE_PYTHON"]
    try:
        register(spark)
    except WorkerPythonError as exc:
        return {"message": str(exc)}
    finally:
        sc.pythonExec = before
    return {"message": None}


def main_(master: str, ns: str, work: Path) -> None:
    result: dict[str, Any] = {}
    spark = spark_session(master, "ariane-cluster-test", CONF)
    spark.sparkContext.setLogLevel("ERROR")
    result["master"] = spark.sparkContext.master
    result["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()  # type: ignore[union-attr]
    steps: dict[str, Callable[[SparkSession, str, Path], dict[str, Any]]] = {
        "batch": batch,
        "stream": stream,
        "pipelines": pipelines,
        "bare_workers": bare_workers,
    }
    try:
        for name, step in steps.items():
            try:
                result[name] = step(spark, ns, work)
            except Exception:
                result[name] = {"error": traceback.format_exc()}
            (work / "result.json").write_text(json.dumps(result))
    finally:
        spark.stop()


if __name__ == "__main__":
    main_(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
