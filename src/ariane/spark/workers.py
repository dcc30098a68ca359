"""Can Spark's Python workers import Ariane? One readable error instead of a Java stack trace.

How it works: Spark runs the ``ariane`` data source's code (planning on the driver, reads and
writes on the executors) in Python worker processes started from the interpreter named by
``PYSPARK_PYTHON`` when the SparkContext started (``spark.pyspark.python`` with
``spark-submit``), ``python3`` from the PATH otherwise. A script run with a venv's
interpreter but without the venv activated therefore gets workers without the package, and
the first read fails deep in a Java stack trace with ``No module named 'ariane'``.

``check_workers`` runs one tiny Spark job (``defaultParallelism`` tasks, at most 64) whose
task imports ``ariane.spark.source`` and the modules its tasks use (the package and every
dependency the data source needs)
and reports the worker's interpreter and Python version. The task function is a closure, so
cloudpickle ships it by value and unpickling it needs no Ariane on the worker. The job is a
SQL Python UDF (pickled rows, no Arrow, so a worker without pyarrow still reports), not an
RDD map: Spark keys its Python daemons by their environment, and SQL tasks get one the RDD's
lack (``SPARK_SIMPLIFIED_TRACEBACK``), so only a SQL job leaves its idle workers, with the
package already imported, to the data source's first read or write tasks (reused workers,
``spark.python.worker.reuse``, for the minute Spark keeps idle workers) instead of starting
a second daemon and workers that import everything again. Three
failures become one :class:`~ariane.errors.WorkerPythonError` naming ``PYSPARK_PYTHON`` /
``spark.pyspark.python`` and the fix: the import fails, the workers run another Python minor
version than the driver (PySpark refuses that before the task runs: the job fails), or the
interpreter cannot be started. A passing check is remembered per application, interpreter
and shipped files, so calling ``register`` again costs nothing.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ariane.errors import WorkerPythonError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = ["check_workers"]

log = logging.getLogger(__name__)

_MAX_TASKS = 64
_passed: set[tuple[str, str, tuple[str, ...]]] = set()

# (executable, (major, minor), import error or None)
Report = tuple[str, tuple[int, int], str | None]

_FIX = (
    "start Spark with PYSPARK_PYTHON set to a Python that has ariane[spark] installed "
    "(export PYSPARK_PYTHON={python} before the SparkSession is created, "
    "or --conf spark.pyspark.python={python} with spark-submit), activate that venv "
    "before running the script, or ship the package to the executors "
    "(--py-files with the package as a .zip, spark.archives with a packed venv); "
    "see docs/spark.md"
)


def check_workers(spark: SparkSession) -> None:
    """Raise :class:`WorkerPythonError` unless Spark's Python workers can import Ariane with
    the driver's Python minor version (see the module docstring). Waits for executors like
    any job does."""
    sc = spark.sparkContext
    key = (sc.applicationId, sc.pythonExec, tuple(sorted(sc._python_includes or ())))
    if key in _passed:
        return
    reports = _run_probe(spark)
    problem = _problem(reports, sc.pythonExec)
    if problem is not None:
        raise WorkerPythonError("PYSPARK_PYTHON", problem)
    _passed.add(key)
    log.debug("Spark's Python workers import ariane: %s", sorted(set(reports)))


#: the modules the data source's tasks import (``ariane.spark.source`` imports the others only
#: where they are used, so the planner's short-lived workers skip them)
_TASK_MODULES = (
    "ariane.spark.source",
    "ariane.spark._cluster",
    "ariane.spark._columns",
    "ariane.spark._sender",
    "ariane.spark._trace",
)
#: what the probe UDF returns per task
_REPORT_DDL = "executable STRING, major INT, minor INT, error STRING"


def _run_probe(spark: SparkSession) -> list[Report]:
    """The probe job's reports; a failed job becomes ``WorkerPythonError``."""
    from pyspark.sql.functions import udf

    # a closure, so that cloudpickle ships it by value: the worker needs no ariane to load it
    def probe(_: object) -> tuple[str, int, int, str | None]:
        import importlib
        import sys

        error = None
        try:  # the data source and what its tasks import when they run (client, numpy...)
            for name in _TASK_MODULES:
                importlib.import_module(name)
        except Exception as exc:  # any import failure is what we report
            error = repr(exc)
        return (sys.executable, sys.version_info[0], sys.version_info[1], error)

    sc = spark.sparkContext
    tasks = max(1, min(sc.defaultParallelism, _MAX_TASKS))
    report = udf(probe, _REPORT_DDL, useArrow=False)
    try:
        with _quiet(sc):
            rows = spark.range(tasks, numPartitions=tasks).select(report("id").alias("r")).collect()
    except Exception as exc:  # Py4JJavaError / PythonException: a job that could not run
        raise WorkerPythonError("PYSPARK_PYTHON", _job_failure(str(exc), sc.pythonExec)) from None
    return [(r.executable, (r.major, r.minor), r.error) for r in (row["r"] for row in rows)]


# the loggers that print a failed task's Java and Python stack traces (driver side; on a
# cluster the executors log into the workers' files)
_NOISY_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
)


@contextlib.contextmanager
def _quiet(sc: SparkContext) -> Iterator[None]:
    """Silence the loggers that would print a failed probe task's stack traces, which the one
    readable error replaces; afterwards each is as it was (a logger we added is removed, so
    it follows the root level again)."""
    try:
        log4j = sc._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
        context = log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        before = {
            name: config.getLoggers().get(name).getLevel()
            if config.getLoggers().containsKey(name)
            else None
            for name in _NOISY_LOGGERS
        }
        for name in _NOISY_LOGGERS:
            log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    except Exception:  # another logging backend: leave it alone
        yield
        return
    try:
        yield
    finally:
        for name, level in before.items():
            if level is None:
                config.removeLogger(name)
            else:
                log4j.core.config.Configurator.setLevel(name, level)
        context.updateLoggers()


def _driver() -> tuple[int, int]:
    return (sys.version_info[0], sys.version_info[1])


def _fix() -> str:
    return _FIX.format(python=sys.executable)


def _problem(reports: list[Report], python_exec: str) -> str | None:
    """What is wrong with the workers' reports, as one sentence, or None."""
    driver = _driver()
    for executable, version, error in sorted(set(reports), key=lambda r: (r[2] is None, r)):
        where = f"Spark's Python workers ({python_exec!r}, running {executable}, Python {version[0]}.{version[1]})"
        if error is not None:
            return f"{where} cannot import ariane ({error}): {_fix()}"
        if tuple(version) != driver:
            return (
                f"{where} run another Python than the driver ({driver[0]}.{driver[1]}); "
                f"Spark needs the same minor version: {_fix()}"
            )
    return None


_VERSION_MISMATCH = re.compile(r"version:? (\d+\.\d+) than that in driver:? (\d+\.\d+)")
_CANNOT_RUN = re.compile(r"Cannot run program \"([^\"]*)\"[^\n]*?(error=\d+, [^\n)]*)")


def _job_failure(message: str, python_exec: str) -> str:
    """One sentence for a probe job that failed (Spark's message is a long stack trace)."""
    mismatch = _VERSION_MISMATCH.search(message)
    if mismatch is not None:
        return (
            f"Spark's Python workers ({python_exec!r}) run Python {mismatch.group(1)}, the "
            f"driver {mismatch.group(2)}; Spark needs the same minor version: {_fix()}"
        )
    cannot_run = _CANNOT_RUN.search(message)
    if cannot_run is not None:
        return (
            f"Spark cannot start the Python workers' interpreter {cannot_run.group(1)!r} "
            f"({cannot_run.group(2)}): {_fix()}"
        )
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    cause = next((line for line in lines if "Error" in line or "Exception" in line), "?")
    return (
        f"Spark's Python workers ({python_exec!r}) failed to run a task ({cause[:300]}): {_fix()}"
    )
