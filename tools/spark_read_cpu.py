"""Spark source reads only, with the CPU of each process per row (issue 19 item 3): a
``local[2]`` application writes ROWS rows of 1 KiB (8 partitions) once into a fresh 8-queue
topic with ``df.write.format("ariane")`` and as Parquet, then ROUNDS times reads the topic
with ``spark.read.format("ariane")`` (count and sum of body lengths, as ``ariane bench
spark``) and the Parquet copy the same way, printing rows/s of both, their ratio and the CPU
µs per row of the Spark JVM, its Python workers (those alive at both ends of a round) and the
broker process BROKER_PID (from ``/proc/<pid>/stat``) during the ariane read. Round 0
includes the Python planner workers' start-up; later rounds show the steady cost.
OPTIONS ``k=v,...;k=v,...`` adds reader options (e.g. ``pullsInFlight=8``), the sets taken
in turn round by round (A/B within one application). With ``SPARK_READ_TOPIC`` set, that
existing topic (holding exactly ROWS rows) is read instead of writing a fresh one.

    PYTHONPATH=src:tools .venv/bin/python tools/spark_read_cpu.py NAMESRV ROWS BROKER_PID \
        [ROUNDS] [OPTIONS]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F
from spark_write_cpu import _TICK, _processes, cpu_parts

from ariane.client import SyncAdmin
from ariane.spark.session import spark_session


def _snapshot(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far: user and system of the JVM, the Python workers, the broker."""
    out: dict[str, float] = {}
    groups = {**_processes(), "broker": [broker_pid]}
    for name, pids in groups.items():
        times = [cpu_parts(p) for p in pids]
        out[name] = sum(u + s for u, s in times)
        out[f"{name}_sys"] = sum(s for _, s in times)
    with open("/proc/stat") as f:  # the whole machine: softirq time is no process's
        cpu = [int(v) / _TICK for v in f.readline().split()[1:9]]
    out["all_user"], out["all_sys"], out["all_idle"] = cpu[0] + cpu[1], cpu[2], cpu[3]
    out["all_softirq"], out["all_steal"] = cpu[6], cpu[7]
    return out


def _load() -> list[str]:
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main(
    namesrv: str, rows: int, broker_pid: int, rounds: int, extra: list[dict[str, str]]
) -> None:
    topic = os.environ.get("SPARK_READ_TOPIC") or f"SparkReadCpu{int(time.time())}"
    if not os.environ.get("SPARK_READ_TOPIC"):
        with SyncAdmin(namesrv_addr=namesrv) as admin:
            admin.create_topic(topic, read_queue_nums=8, write_queue_nums=8)
        time.sleep(1)
    spark = spark_session("local[2]", "spark-read-cpu", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    body = F.expr("cast(rpad(cast(id as string), 1024, 'x') as binary)").alias("body")
    source = spark.range(rows, numPartitions=8).select(body)
    if not os.environ.get("SPARK_READ_TOPIC"):
        source.write.format("ariane").option("nameserver", namesrv).option("topic", topic).mode(
            "append"
        ).save()
        print(f"wrote {rows} rows to {topic}", flush=True)
    agg = (F.count("*").alias("n"), F.sum(F.length("body")).alias("b"))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "rows.parquet")
        source.write.parquet(path)
        for r in range(rounds):
            reader = spark.read.format("ariane").option("nameserver", namesrv)
            chosen = extra[r % len(extra)] if extra else {}
            for k, v in chosen.items():
                reader = reader.option(k, v)
            before = _snapshot(broker_pid)
            started = time.perf_counter()
            got = reader.option("topic", topic).load().agg(*agg).collect()[0]
            elapsed = time.perf_counter() - started
            after = _snapshot(broker_pid)
            if got["n"] != rows:
                raise SystemExit(f"read {got['n']} rows, expected {rows}")
            started = time.perf_counter()
            spark.read.parquet(path).agg(*agg).collect()
            parquet = time.perf_counter() - started
            per_row = " ".join(f"{k}={(after[k] - before[k]) / rows * 1e6:.1f}" for k in after)
            print(
                f"round {r}: ariane {rows / elapsed:,.0f} rows/s parquet {rows / parquet:,.0f} "
                f"rows/s ratio {elapsed / parquet:.2f} {chosen} cpu us/row {per_row} load {_load()}",
                flush=True,
            )
    spark.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    sets = args[4].split(";") if len(args) > 4 else []
    options = [dict(kv.split("=", 1) for kv in s.split(",") if kv) for s in sets]
    main(args[0], int(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else 3, options)
