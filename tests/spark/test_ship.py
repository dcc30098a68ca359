"""Shipping the package to a standalone cluster's executors (docs/spark.md, "Three ways to
get the package to a cluster's executors"): way 2, ``--py-files`` / ``spark.submit.pyFiles``
on executors whose Python has Ariane's dependencies but not Ariane, and way 3,
``spark.archives`` with a packed venv.

The workers' Python for way 2 is a fresh venv whose only addition is a ``.pth`` line naming
this venv's site-packages: pyspark, pyarrow, orjson... import, ``ariane`` does not (its
editable install is a ``.pth`` file in that directory, which Python reads only in a site
directory, and the cluster and the jobs run without ``PYTHONPATH``). The shipped file is a
wheel-shaped zip of the package under test, compiled ``_speedups`` included as in a built
wheel: it cannot load from a zip, so the executors must pick the pure-Python twins on their
own. Way 3 ships a ``tar`` of a ``--copies`` venv holding Ariane (dependencies again through a
``.pth`` line, to keep the archive small).

One master and worker serve three applications at once, each a driver process
(``ship_job.py``): ``spark-submit --py-files`` (the driver's Python lacks Ariane too),
``python`` with ``spark.submit.pyFiles`` in the builder's config, and ``spark-submit
--archives``, which ships no ``--py-files``: with its executors switched to the first two's
Python, ``register`` must give its readable error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import ariane
from ariane.client import SyncAdmin
from ariane.spark.standalone import spark_home, start_standalone
from tests.spark.cluster_common import check_written_rows
from tests.spark.conftest import create_topic
from tests.support.cluster import Cluster
from tests.support.processes import free_port
from tests.support.proctree import kill_tree, spawned

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

_JOB = Path(__file__).with_name("ship_job.py")
_ZIP = "ariane.zip"


def _deps_python(venv: Path) -> Path:
    """A venv that sees this venv's site-packages (the dependencies) but not Ariane."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "ariane_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _package(dest: Path) -> Path:
    """The package under test as a wheel-shaped zip (``ariane/...`` at the root), every file
    but bytecode, so the compiled ``_speedups`` is in it when this tree has one."""
    root = Path(ariane.__file__).resolve().parent
    target = dest / _ZIP
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("ariane") / path.relative_to(root))
    return target


def _packed_env(dest: Path, deps_site: str) -> Path:
    """A venv packed for ``spark.archives`` (``tar.gz``, the venv at its root): its own copy of
    the interpreter (``--copies``) and Ariane installed as plain files in its site-packages,
    compiled ``_speedups`` included; the dependencies come from this venv's site-packages
    through a ``.pth`` line (packing pyspark and pyarrow would make it ~1 GB)."""
    venv = dest / "pack"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--copies", str(venv)],
        check=True, timeout=120,
    )  # fmt: skip
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = venv / "lib" / version / "site-packages"
    shutil.copytree(
        Path(ariane.__file__).resolve().parent,
        site / "ariane",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (site / "ariane_deps.pth").write_text(deps_site + "\n")
    target = dest / "ariane-env.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(venv, arcname=".")
    return target


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def _run_job(command: list[str], env: dict[str, str], work: Path) -> dict[str, Any]:
    work.mkdir(exist_ok=True)
    log = work / "driver.log"
    with (
        log.open("wb") as out,
        spawned(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work) as driver,
    ):
        code = driver.wait(timeout=300)
    output = log.read_text(errors="replace")
    done = work / "result.json"
    result: dict[str, Any] = json.loads(done.read_text()) if done.exists() else {}
    result["exit_code"], result["log"] = code, output[-5000:]
    return result


@pytest.fixture(scope="module")
def shipped(
    spark_cluster: Cluster, admin: SyncAdmin, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Each application's result (``ship_job.py``), keyed by how it was started."""
    work = tmp_path_factory.mktemp("ship")
    python = _deps_python(work / "deps-venv")
    probe = subprocess.run(
        [python, "-c", "import pyarrow, orjson, pyspark; import ariane"],
        capture_output=True, text=True, env=_env(),
    )  # fmt: skip
    assert "No module named 'ariane'" in probe.stderr, probe.stderr
    package = _package(work)
    packed = _packed_env(work, sysconfig.get_paths()["purelib"])
    ns = spark_cluster.namesrv_addr
    create_topic(admin, "Shipped")
    create_topic(admin, "ShippedEnv")
    with pytest.MonkeyPatch.context() as mp:  # the executors inherit the worker's environment
        mp.delenv("PYTHONPATH", raising=False)
        # room for the three applications' executors at once (512m, 2 cores each)
        standalone = start_standalone(
            work / "spark", master_port=free_port(), cores=6, memory="1536m"
        )
    try:
        (work / "archives" / "environment").mkdir(parents=True)
        subprocess.run(
            ["tar", "-xzf", str(packed), "-C", str(work / "archives" / "environment")],
            check=True, timeout=120,
        )  # fmt: skip
        master = standalone.master_url
        submit = str(spark_home() / "bin" / "spark-submit")
        driver_path = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
        jobs = {
            "py-files": (
                [submit, "--master", master, "--py-files", str(package), str(_JOB), ns,
                 str(work / "py-files"), "Shipped"],
                _env(PYSPARK_PYTHON=str(python)),
            ),
            "conf": (
                [str(python), str(_JOB), ns, str(work / "conf")],
                _env(PYSPARK_PYTHON=str(python), ARIANE_TEST_MASTER=master,
                     ARIANE_TEST_PY_FILES=str(package)),
            ),
            # docs/spark.md way 3: the executors run the unpacked archive's Python; in client
            # mode so do the driver's own Python workers (data source planning), from a copy
            # unpacked in its working directory. This application ships no --py-files: with
            # the executors switched to `python`, register must give its error
            "archives": (
                [submit, "--master", master, "--archives", f"{packed}#environment", str(_JOB),
                 ns, str(work / "archives"), "ShippedEnv"],
                {**_env(PYSPARK_PYTHON="./environment/bin/python",
                        PYSPARK_DRIVER_PYTHON=sys.executable,
                        ARIANE_TEST_UNSHIPPED_PYTHON=str(python)), **driver_path},
            ),
        }  # fmt: skip
        with ThreadPoolExecutor(len(jobs)) as pool:  # the applications run at once
            futures = {
                name: pool.submit(_run_job, command, env, work / name)
                for name, (command, env) in jobs.items()
            }
            results = {name: future.result() for name, future in futures.items()}
    finally:
        pids = standalone.pids
        standalone.stop()
        for pid in pids:
            kill_tree(pid)
    for result in results.values():
        result["python"] = str(python)
    return results


def _check_shipped(result: dict[str, Any]) -> None:
    """``register`` passed, and the driver and every executor task imported ``ariane`` from
    the shipped zip, running the pure-Python twins (the compiled module, in the zip when this
    tree has one, cannot load from a zip)."""
    assert "register_error" in result, result["log"]
    assert result["register_error"] is None, result["register_error"]
    assert result["exit_code"] == 0, result["log"]
    shipped_init = f"/{_ZIP}/ariane/__init__.py"
    assert result["driver_ariane"].endswith(shipped_init), result["driver_ariane"]
    assert result["executors"], result
    for path, compiled, build in result["executors"]:
        assert path.endswith(shipped_init), path
        assert compiled is False, build
        assert build.startswith("pure ("), build


@pytest.mark.timeout(600)
def test_spark_submit_py_files_ships_the_package(shipped: dict[str, Any]) -> None:
    """``spark-submit --py-files ariane.zip``: the driver's Python lacks Ariane too."""
    result = shipped["py-files"]
    _check_shipped(result)
    check_written_rows(result["rows"], "p")


@pytest.mark.timeout(600)
def test_py_files_conf_ships_the_package(shipped: dict[str, Any]) -> None:
    """``python job.py`` with ``spark.submit.pyFiles`` in the builder's config."""
    _check_shipped(shipped["conf"])


@pytest.mark.timeout(600)
def test_without_py_files_register_gives_the_readable_error(shipped: dict[str, Any]) -> None:
    """The Python of the first two applications, in an application without ``--py-files``."""
    result = shipped["archives"]
    python = result["python"]
    assert "unshipped_error" in result, result["log"]
    error = result["unshipped_error"]
    assert error.startswith(
        f"PYSPARK_PYTHON: Spark's Python workers ('{python}', running {python}, Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}) cannot import ariane "
        "(ModuleNotFoundError(\"No module named 'ariane'\")): start Spark with PYSPARK_PYTHON "
        "set to a Python that has ariane[spark] installed"
    ), error
    assert "\n" not in error


@pytest.mark.timeout(600)
def test_spark_archives_ships_a_packed_venv(shipped: dict[str, Any]) -> None:
    """``spark-submit --archives ariane-env.tar.gz#environment`` with
    ``PYSPARK_PYTHON=./environment/bin/python``."""
    result = shipped["archives"]
    assert "register_error" in result, result["log"]
    assert result["register_error"] is None, result["register_error"]
    assert result["exit_code"] == 0, result["log"]
    compiled_here = any(Path(ariane.__file__).resolve().parent.glob("_speedups*.so"))
    assert result["executors"], result
    for path, compiled, _ in result["executors"]:
        assert "/environment/lib/python" in path, path
        assert path.endswith("/site-packages/ariane/__init__.py"), path
        assert compiled is compiled_here
    check_written_rows(result["rows"], "p")
