"""Spark sink writes only, with the CPU of each process per row (issue 19 item 3): a
``local[2]`` application caches ROWS rows of 1 KiB (8 partitions), then writes them ROUNDS
times into a fresh 8-queue topic with ``df.write.format("ariane")``, printing rows/s and the
CPU µs per row of the Spark JVM, its Python processes and the broker process BROKER_PID
(from ``/proc/<pid>/stat``). Python processes are the JVM's descendants, sampled every 50 ms
during a round so that the planner's short-lived daemons and workers (which exit with their
CPU) count too: a process's CPU in a round is its last sample minus its CPU at the round's
start (0 for one started during it). Round 0 includes the Python workers' start-up; later
rounds show the steady cost.

    PYTHONPATH=src .venv/bin/python tools/spark_write_cpu.py NAMESRV ROWS BROKER_PID [ROUNDS]
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from pyspark.sql import functions as F

from ariane.client import SyncAdmin
from ariane.spark.session import spark_session

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_parts(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid`` so far (0, 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


def _cpu(pid: int) -> float:
    return sum(cpu_parts(pid))


def _processes() -> dict[str, list[int]]:
    out = subprocess.run(["ps", "-eo", "pid,ppid,comm,args"], capture_output=True, text=True)
    found: dict[str, list[int]] = {"jvm": [], "py": []}
    for line in out.stdout.splitlines()[1:]:
        parts = line.split(None, 3)
        pid, ppid, comm, args = int(parts[0]), int(parts[1]), parts[2], " ".join(parts[3:])
        if comm == "java" and ppid == os.getpid():
            found["jvm"].append(pid)
        elif "pyspark" in args and ("daemon" in args or "worker" in args):
            found["py"].append(pid)
    return found


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class PythonCpu:
    """CPU seconds of the JVM's descendant processes, sampled in a thread (see the module
    docstring): ``start()`` at a round's start, ``stop()`` gives the round's CPU seconds."""

    def __init__(self, jvm: int) -> None:
        self.jvm = jvm
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        for pid in _descendants(self.jvm):
            cpu = _cpu(pid)
            if cpu:
                self._last[pid] = cpu

    def _run(self) -> None:
        while not self._done.wait(0.05):
            self._sample()

    def start(self) -> None:
        self._last = {}
        self._sample()
        self._base = dict(self._last)
        self._done.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return sum(cpu - self._base.get(pid, 0.0) for pid, cpu in self._last.items())


def _snapshot(broker_pid: int) -> dict[str, float]:
    cpu = {"jvm": sum(map(_cpu, _processes()["jvm"]))}
    return {**cpu, "broker": _cpu(broker_pid)}


def main(namesrv: str, rows: int, broker_pid: int, rounds: int) -> None:
    topic = f"SparkWriteCpu{int(time.time())}"
    with SyncAdmin(namesrv_addr=namesrv) as admin:
        admin.create_topic(topic, read_queue_nums=8, write_queue_nums=8)
    time.sleep(1)
    spark = spark_session("local[2]", "spark-write-cpu", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    body = F.expr("cast(rpad(cast(id as string), 1024, 'x') as binary)").alias("body")
    source = spark.range(rows, numPartitions=8).select(body).cache()
    source.count()
    python = PythonCpu(_processes()["jvm"][0])
    for r in range(rounds):
        before = _snapshot(broker_pid)
        python.start()
        started = time.perf_counter()
        source.write.format("ariane").option("nameserver", namesrv).option("topic", topic).mode(
            "append"
        ).save()
        elapsed = time.perf_counter() - started
        after = _snapshot(broker_pid)
        after["py"], before["py"] = python.stop(), 0.0
        per_row = " ".join(f"{k}={(after[k] - before[k]) / rows * 1e6:.1f}" for k in after)
        per_row += f" total={sum(after[k] - before[k] for k in after):.1f}s"
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        print(
            f"round {r}: {rows / elapsed:,.0f} rows/s {elapsed:.1f}s cpu us/row {per_row} load {load}"
        )
    spark.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], int(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else 3)
