"""Spark's Python workers without Ariane get one readable error naming PYSPARK_PYTHON and the
fix, from ``register()`` and from ``ariane pipeline``, instead of a Java stack trace."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ariane.errors import WorkerPythonError
from ariane.spark import register
from tests.support.proctree import spawned

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

_FIX = "start Spark with PYSPARK_PYTHON set to a Python that has ariane[spark] installed"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv without Ariane (nor pyspark, pyarrow...), same Python as the driver."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    assert subprocess.run([python, "-c", "import ariane"], capture_output=True).returncode == 1
    return python


@pytest.fixture
def workers_python(spark: SparkSession) -> Iterator[object]:
    """Set the interpreter the session's next Python workers start from (what
    PYSPARK_PYTHON decides when a SparkContext starts); restored afterwards."""
    sc = spark.sparkContext
    before = sc.pythonExec

    def use(python: str) -> None:
        sc.pythonExec = python

    yield use
    sc.pythonExec = before


def test_register_refuses_workers_without_ariane(
    spark: SparkSession, workers_python: object, bare_python: Path
) -> None:
    register(spark)  # the session's own workers pass
    workers_python(str(bare_python))  # type: ignore[operator]
    with pytest.raises(WorkerPythonError) as raised:
        register(spark)
    message = str(raised.value)
    assert raised.value.key == "PYSPARK_PYTHON"
    assert message.startswith(
        f"PYSPARK_PYTHON: Spark's Python workers ('{bare_python}', running {bare_python}, "
        f"Python {sys.version_info[0]}.{sys.version_info[1]}) cannot import ariane "
        "(ModuleNotFoundError(\"No module named 'ariane'\")): " + _FIX
    )
    assert f"export PYSPARK_PYTHON={sys.executable} " in message
    assert "\n" not in message


def test_register_refuses_an_interpreter_that_does_not_exist(
    spark: SparkSession, workers_python: object, tmp_path: Path
) -> None:
    missing = tmp_path / "no" / "python"
    workers_python(str(missing))  # type: ignore[operator]
    with pytest.raises(WorkerPythonError) as raised:
        register(spark)
    assert str(raised.value).startswith(
        f"PYSPARK_PYTHON: Spark cannot start the Python workers' interpreter '{missing}' "
        "(error=2, No such file or directory): " + _FIX
    )


def _run(command: list[str], env: dict[str, str], tmp_path: Path) -> tuple[int, str]:
    """Run a driver (its JVM and Python workers die with it); exit code and stdout+stderr."""
    out = tmp_path / "out.txt"
    with (
        out.open("wb") as sink,
        spawned(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp_path) as proc,
    ):
        code = proc.wait(timeout=240)
    return code, out.read_text(errors="replace")


def _assert_one_readable_line(output: str, bare_python: Path) -> None:
    assert "Traceback" not in output, output
    assert "\tat " not in output, output
    assert "Py4JJavaError" not in output, output
    errors = [line for line in output.splitlines() if "PYSPARK_PYTHON:" in line]
    assert len(errors) == 1, output
    assert "No module named 'ariane'" in errors[0], output
    assert _FIX in errors[0], output
    assert str(bare_python) in errors[0]


@pytest.mark.timeout(400)
def test_pipeline_cli_prints_one_line(bare_python: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": str(bare_python)}
    # the check runs when the session starts, before any NameServer is asked
    code, output = _run(
        [sys.executable, "-m", "ariane", "pipeline", "lag-report", "-n", "127.0.0.1:1",
         "--topic", "T", "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.memory=512m",
         "--conf", "spark.python.authenticate.socketTimeout=120s"],
        env, tmp_path,
    )  # fmt: skip
    assert code == 1, output
    line = next(line for line in output.splitlines() if "PYSPARK_PYTHON:" in line)
    assert line.startswith("Error: PYSPARK_PYTHON: Spark's Python workers"), output
    _assert_one_readable_line(output, bare_python)
