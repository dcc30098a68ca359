"""The driver of the package-shipping test (``tests/spark/test_ship.py``), run as its own
process with ``spark-submit`` or ``python``: the executors' Python (``PYSPARK_PYTHON``) has
Ariane's dependencies but not Ariane, so they import it only from what the application ships.

``ship_job.py NAMESERVER WORKDIR [TOPIC]`` builds a plain ``SparkSession`` (master and shipped
files come from ``spark-submit``'s arguments or ``ARIANE_TEST_MASTER`` /
``ARIANE_TEST_PY_FILES``, as a user's job gets them), then writes ``WORKDIR/result.json``:
``register`` either raised (``{"register_error": message}``) or passed, and then the
executors' view of the package (where ``ariane`` came from, which build runs), and with a ``TOPIC``,
40 rows written to it by a batch job and the topic read back (it exists and is empty); with
``ARIANE_TEST_UNSHIPPED_PYTHON``, ``register``'s error when the executors run that Python.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cluster_common import CONF, WRITE_SCHEMA, rows_to_write  # this folder: see its docstring
from pyspark.sql import SparkSession


def executors_view(_: object) -> Iterator[tuple[str, bool, str]]:
    """Where an executor's Python worker imports ``ariane`` from and which build it runs."""
    import ariane
    from ariane.common import native

    yield (ariane.__file__ or "?", native.COMPILED, native.build_name())


def write_and_read(spark: SparkSession, ns: str, topic: str) -> list[list[Any]]:
    """40 rows written by a batch job (2 tasks), then every message of ``topic`` as
    [queueId, queueOffset, body, keys, tags, properties] sorted."""
    data = rows_to_write("p")
    (
        spark.createDataFrame(data, WRITE_SCHEMA)
        .repartition(2)
        .write.format("ariane")
        .option("nameserver", ns)
        .option("topic", topic)
        .option("idNamespace", "ship-test")
        .mode("append")
        .save()
    )
    df = spark.read.format("ariane").option("nameserver", ns).option("topic", topic).load()
    return sorted(
        [r.queueId, r.queueOffset, r.body.decode(), r.keys, r.tags, dict(r.properties or {})]
        for r in df.collect()
    )


def run(spark: SparkSession, ns: str, topic: str) -> dict[str, Any]:
    """``register``, then the executors' view and the write and read (see the module doc)."""
    from ariane.errors import WorkerPythonError
    from ariane.spark import register

    started = time.monotonic()
    try:
        register(spark)
    except WorkerPythonError as exc:
        return {"register_error": str(exc), "seconds": [time.monotonic() - started]}
    seconds = [time.monotonic() - started]
    view = spark.sparkContext.parallelize(range(2), 2).mapPartitions(executors_view).collect()
    seconds.append(time.monotonic() - started)
    rows = write_and_read(spark, ns, topic) if topic else None
    seconds.append(time.monotonic() - started)
    return {
        "register_error": None,
        "driver_ariane": __import__("ariane").__file__,
        "executors": sorted(set(view)),
        "rows": rows,
        "unshipped_error": unshipped(spark, os.environ.get("ARIANE_TEST_UNSHIPPED_PYTHON")),
        "seconds": seconds,  # after register, the view job, the write and read
    }


def unshipped(spark: SparkSession, python: str | None) -> str | None:
    """``register``'s error with the executors switched to ``python`` (as PYSPARK_PYTHON
    would at start), a Python without Ariane, in an application that ships no files."""
    from ariane.errors import WorkerPythonError
    from ariane.spark import register

    if python is None:
        return None
    sc = spark.sparkContext
    before = sc.pythonExec
    sc.pythonExec = python
    try:
        register(spark)
    except WorkerPythonError as exc:
        return str(exc)
    finally:
        sc.pythonExec = before
    return "register passed"


def main() -> None:
    ns, work, topic = sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""
    builder = SparkSession.builder.appName("ariane-ship-test")
    if "ARIANE_TEST_MASTER" in os.environ:  # run with python, not spark-submit
        builder = builder.master(os.environ["ARIANE_TEST_MASTER"])
    if "ARIANE_TEST_PY_FILES" in os.environ:
        builder = builder.config("spark.submit.pyFiles", os.environ["ARIANE_TEST_PY_FILES"])
    for key, value in CONF.items():
        builder = builder.config(key, value)
    started = time.monotonic()
    spark = builder.getOrCreate()
    session_s = time.monotonic() - started
    spark.sparkContext.setLogLevel("ERROR")
    try:
        result = {**run(spark, ns, topic), "session_seconds": session_s}
    finally:
        spark.stop()
    (work / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
