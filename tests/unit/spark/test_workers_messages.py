"""``ariane.spark.workers``: the one readable sentence for each way the workers' Python fails
(pure: the reports and Spark's failure texts are given, no Spark runs)."""

from __future__ import annotations

import sys

from ariane.spark.workers import _job_failure, _problem

_DRIVER = (sys.version_info[0], sys.version_info[1])
_OTHER = (_DRIVER[0], _DRIVER[1] + 1)

# what PySpark 4.3 puts in the Py4JJavaError of a job whose worker runs another Python
_MISMATCH = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 2.0 failed 1 times
org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):
  File "/v/pyspark.zip/pyspark/worker_util.py", line 93, in check_python_version
    raise PySparkRuntimeError(
pyspark.errors.exceptions.base.PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.12 than that in driver: 3.11, PySpark cannot run with different minor versions.
Please check environment variables PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON are correctly set.
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:651)
"""
_CANNOT_RUN = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 3) (192.0.2.2 executor driver): java.io.IOException: Cannot run program "/nonexistent/python": error=2, No such file or directory
\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)
"""


def test_import_failure_names_the_variable_the_interpreter_and_the_fix() -> None:
    error = "ModuleNotFoundError(\"No module named 'ariane'\")"
    reports = [("/opt/bare/bin/python", _DRIVER, error), ("/opt/bare/bin/python", _DRIVER, None)]
    problem = _problem(reports, "python3")
    assert problem is not None
    assert problem.startswith(
        f"Spark's Python workers ('python3', running /opt/bare/bin/python, Python "
        f"{_DRIVER[0]}.{_DRIVER[1]}) cannot import ariane "
        "(ModuleNotFoundError(\"No module named 'ariane'\")): start Spark with PYSPARK_PYTHON "
        f"set to a Python that has ariane[spark] installed (export PYSPARK_PYTHON={sys.executable} "
    )
    assert f"--conf spark.pyspark.python={sys.executable} with spark-submit" in problem
    assert problem.endswith(
        "(--py-files with the package as a .zip, spark.archives with a packed venv); "
        "see docs/spark.md"
    )
    assert "\n" not in problem


def test_other_minor_version_in_the_reports_is_a_problem() -> None:
    problem = _problem([("/p", _DRIVER, None), ("/q", _OTHER, None)], "/q")
    assert problem is not None
    assert problem.startswith(
        f"Spark's Python workers ('/q', running /q, Python {_OTHER[0]}.{_OTHER[1]}) run another "
        f"Python than the driver ({_DRIVER[0]}.{_DRIVER[1]}); Spark needs the same minor version: "
    )


def test_workers_that_import_ariane_with_the_driver_version_pass() -> None:
    assert _problem([("/p", _DRIVER, None), ("/p", _DRIVER, None)], "/p") is None


def test_version_mismatch_job_failure() -> None:
    message = _job_failure(_MISMATCH, "/usr/bin/python3.12")
    assert message.startswith(
        "Spark's Python workers ('/usr/bin/python3.12') run Python 3.12, the driver 3.11; Spark "
        "needs the same minor version: start Spark with PYSPARK_PYTHON set to "
    )
    assert "\n" not in message


def test_interpreter_that_cannot_start() -> None:
    message = _job_failure(_CANNOT_RUN, "/nonexistent/python")
    assert message.startswith(
        "Spark cannot start the Python workers' interpreter '/nonexistent/python' "
        "(error=2, No such file or directory): start Spark with PYSPARK_PYTHON set to "
    )


def test_any_other_job_failure_keeps_one_line_of_its_cause() -> None:
    message = _job_failure(
        "x\njava.lang.OutOfMemoryError: Java heap space\n\tat a.b(C.java:1)\n", "p"
    )
    assert message.startswith(
        "Spark's Python workers ('p') failed to run a task "
        "(java.lang.OutOfMemoryError: Java heap space): start Spark with"
    )
    assert "\n" not in message
