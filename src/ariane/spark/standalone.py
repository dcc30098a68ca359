"""A Spark standalone cluster on this machine, from the installed pyspark: one master and one
worker on loopback, for benchmarks and tests (``ariane bench spark --master standalone``).

How it works: ``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker`` run in the foreground from pyspark's own ``bin/`` (``SPARK_HOME``
is the pyspark package), each in its own session so that stopping it also stops what it
started (the worker's executor JVMs and their Python workers). ``start`` starts both at once
(the worker retries until the master answers) and returns once the master is alive and the
worker has registered (read from their logs), with the master URL to
hand to ``SparkSession.builder.master``; ``stop`` sends SIGTERM to both process groups, then
SIGKILL to whatever is left. Daemon JVMs get ``SPARK_DAEMON_MEMORY`` (256m), the worker
offers ``cores`` and ``memory`` to executors: give the application
``spark.executor.memory`` no bigger than ``memory`` or it never gets an executor.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["StandaloneCluster", "spark_home", "start_standalone"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The installed pyspark package, which is a Spark distribution (``bin/``, ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class StandaloneCluster:
    """A running master and worker (see the module docstring)."""

    master_url: str
    work_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        """The master's and the worker's process ids (each leads its own session)."""
        return [p.pid for p in self.procs]

    def log(self, name: str) -> str:
        """The ``master`` or ``worker`` log so far."""
        return (self.work_dir / f"{name}.log").read_text(errors="replace")

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the worker (and its executors), then the master; SIGKILL after ``timeout_s``."""
        for proc in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # stragglers of the group (executors)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout_s)
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def start_standalone(
    work_dir: Path,
    *,
    host: str = "127.0.0.1",
    master_port: int | None = None,
    cores: int = 2,
    memory: str = "512m",
    timeout_s: float = 300.0,
) -> StandaloneCluster:
    """Start a master and one worker on ``host``; logs and the worker's directory go under
    ``work_dir``. Raises ``RuntimeError`` (with the log's tail) when either is not up within
    ``timeout_s`` or exits."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port = master_port or _free_port(host)
    url = f"spark://{host}:{port}"
    home = spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": host,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_WORKER_DIR": str(work_dir / "worker"),
    }
    spark_class = str(home / "bin" / "spark-class")
    cluster = StandaloneCluster(url, work_dir)
    try:
        cluster.procs.append(
            _start(
                [spark_class, _MASTER, "--host", host, "--port", str(port), "--webui-port", "0"],
                work_dir / "master.log",
                env,
            )
        )
        cluster.procs.append(
            _start(
                [
                    spark_class,
                    _WORKER,
                    "--host",
                    host,
                    "--port",
                    "0",
                    "--webui-port",
                    "0",
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--work-dir",
                    str(work_dir / "worker"),
                    url,
                ],
                work_dir / "worker.log",
                env,
            )
        )
        # both JVMs boot at once (the worker retries until the master answers)
        _wait_log(cluster, 0, "master", "New state: ALIVE", timeout_s)
        _wait_log(cluster, 1, "worker", "Successfully registered with master", timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _wait_log(
    cluster: StandaloneCluster, index: int, name: str, line: str, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while line not in cluster.log(name):
        if cluster.procs[index].poll() is not None or time.monotonic() > deadline:
            tail = "\n".join(cluster.log(name).splitlines()[-20:])
            raise RuntimeError(f"Spark {name} did not start ({line!r} not logged):\n{tail}")
        time.sleep(0.2)
