"""``ariane bench spark``: rows/s of the ``ariane`` Spark data source next to Parquet.

Against a running cluster (``ariane standalone``): writes ``--rows`` messages of ``--size``
bytes into a fresh topic with a batch ``df.write.format("ariane")``, reads them back with
``spark.read.format("ariane")`` (count and sum of body lengths) twice (the first read of an
application also starts Spark's Python planner workers, which import the package: a few
seconds that do not depend on the rows; the second read shows the per-row speed), once more
with the schema ``body BINARY`` (the one column the query needs, as Parquet reads only it:
the source then builds only that column), reads them again as a backlog with a streaming query (``Trigger.AvailableNow`` into the ``noop``
sink), then writes and reads the same rows as Parquet on local disk. Prints rows/s and MB/s
(body bytes) for the steps and how many times faster Parquet reads than the ariane reads
(``--json``: one line with ``write_rows_per_s``, ``read_rows_per_s``, ``warm_read_rows_per_s``,
``pruned_read_rows_per_s``, ``stream_read_rows_per_s``, ``parquet_write_rows_per_s``,
``parquet_read_rows_per_s``, ``parquet_read_over_read``, ``parquet_read_over_warm_read``,
``parquet_read_over_pruned_read`` and ``parquet_read_over_stream_read``). ``--master standalone`` first starts a Spark standalone
master and one worker on this machine (``ariane.spark.standalone``, ``--worker-cores``/
``--worker-memory``) and runs the steps on it, so the numbers include executors in their own
JVM, as on a real cluster; both are stopped at the end.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import click

from ariane.common.cli_bounds import BODY_BYTES, COUNT, QUEUES, THREADS

__all__ = ["spark_bench"]

#: JSON key prefix of each step
_KEYS = {
    "ariane write": "write",
    "ariane read": "read",
    "ariane read 2": "warm_read",
    "ariane pruned": "pruned_read",
    "ariane stream": "stream_read",
    "parquet write": "parquet_write",
    "parquet read": "parquet_read",
}


@click.command("spark")
@click.option("--nameserver", "-n", default="127.0.0.1:9876", show_default=True)
@click.option(
    "--rows", type=COUNT, default=1_000_000, show_default=True, help="Messages to write and read."
)
@click.option(
    "--size", type=BODY_BYTES, default=1024, show_default=True, help="Body bytes per message."
)
@click.option(
    "--queues", type=QUEUES, default=8, show_default=True, help="Queues of the benchmark topic."
)
@click.option(
    "--partitions",
    type=click.IntRange(1, 100_000),
    default=8,
    show_default=True,
    help="Spark partitions of the write.",
)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master URL, or 'standalone': start a master and a worker here.",
)
@click.option(
    "--worker-cores", type=THREADS, default=2, show_default=True, help="With --master standalone."
)
@click.option("--worker-memory", default="2g", show_default=True, help="With --master standalone.")
@click.option("--topic", default=None, help="Topic name [default: BenchSpark<time>].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line at the end.")
def spark_bench(
    nameserver: str,
    rows: int,
    size: int,
    queues: int,
    partitions: int,
    master: str,
    worker_cores: int,
    worker_memory: str,
    topic: str | None,
    as_json: bool,
) -> None:
    """Batch write and read throughput of the ariane data source vs Parquet."""
    if master != "standalone":
        _run(nameserver, rows, size, queues, partitions, master, {}, topic, as_json)
        return
    from ariane.spark.standalone import start_standalone

    with tempfile.TemporaryDirectory(prefix="ariane-bench-spark-") as tmp:
        cluster = start_standalone(Path(tmp), cores=worker_cores, memory=worker_memory)
        try:
            conf = {"spark.executor.memory": worker_memory, "spark.cores.max": str(worker_cores)}
            _run(nameserver, rows, size, queues, partitions, cluster.master_url, conf, topic,
                 as_json)  # fmt: skip
        finally:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:  # the application first, so the worker stops quietly
                active.stop()
            cluster.stop()


def _run(
    nameserver: str,
    rows: int,
    size: int,
    queues: int,
    partitions: int,
    master: str,
    conf: dict[str, str],
    topic: str | None,
    as_json: bool,
) -> None:
    from pyspark.sql import functions as F

    from ariane.client import SyncAdmin
    from ariane.spark.session import spark_session

    topic = topic or f"BenchSpark{int(time.time())}"
    with SyncAdmin(namesrv_addr=nameserver) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        deadline = time.monotonic() + 30
        while True:
            try:
                if admin.topic_route(topic).queue_datas:
                    break
            except Exception:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)
    spark = spark_session(master, "ariane-bench-spark", {"spark.ui.enabled": "false", **conf})
    spark.sparkContext.setLogLevel("ERROR")
    # bodies: the row number padded to ``size`` bytes (distinct, incompressible enough)
    source = (
        spark.range(rows, numPartitions=partitions)
        .select(F.expr(f"cast(rpad(cast(id as string), {size}, 'x') as binary)").alias("body"))
        .cache()
    )
    source.count()
    mb = rows * size / 1e6
    results: dict[str, float] = {}

    def timed(name: str, action: object) -> None:
        started = time.perf_counter()
        action()  # type: ignore[operator]
        elapsed = time.perf_counter() - started
        results[f"{_KEYS[name]}_rows_per_s"] = rows / elapsed
        click.echo(
            f"{name:14s} {rows / elapsed:12,.0f} rows/s {mb / elapsed:8.1f} MB/s {elapsed:8.1f} s"
        )

    timed(
        "ariane write",
        lambda: (
            source.write.format("ariane")
            .option("nameserver", nameserver)
            .option("topic", topic)
            .mode("append")
            .save()
        ),
    )

    def read_ariane(schema: str | None = None) -> None:
        reader = spark.read.format("ariane")
        if schema is not None:
            reader = reader.schema(schema)
        df = reader.option("nameserver", nameserver).option("topic", topic).load()
        got = df.agg(F.count("*").alias("n"), F.sum(F.length("body")).alias("b")).collect()[0]
        if got["n"] != rows:
            raise click.ClickException(f"read {got['n']} rows, expected {rows}")

    timed("ariane read", read_ariane)
    timed("ariane read 2", read_ariane)
    # the columns the query needs, as Parquet reads only those
    timed("ariane pruned", lambda: read_ariane("body BINARY"))

    def stream_ariane(checkpoint: str) -> None:
        query = (
            spark.readStream.format("ariane")
            .option("nameserver", nameserver)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        got = sum(int(p["numInputRows"]) for p in query.recentProgress)
        if got != rows:
            raise click.ClickException(f"streamed {got} rows, expected {rows}")

    with tempfile.TemporaryDirectory() as tmp:
        timed("ariane stream", lambda: stream_ariane(str(Path(tmp) / "checkpoint")))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.parquet")
        timed("parquet write", lambda: source.write.parquet(path))
        timed(
            "parquet read",
            lambda: spark.read.parquet(path).agg(F.count("*"), F.sum(F.length("body"))).collect(),
        )
    read, parquet = results["read_rows_per_s"], results["parquet_read_rows_per_s"]
    ratios = {
        # how many times faster Parquet reads the same rows (the goal is <= 2)
        "parquet_read_over_read": parquet / read,
        "parquet_read_over_warm_read": parquet / results["warm_read_rows_per_s"],
        "parquet_read_over_pruned_read": parquet / results["pruned_read_rows_per_s"],
        "parquet_read_over_stream_read": parquet / results["stream_read_rows_per_s"],
    }
    click.echo(
        f"Parquet read / ariane read {ratios['parquet_read_over_read']:.2f}x "
        f"(second read {ratios['parquet_read_over_warm_read']:.2f}x, "
        f"schema 'body BINARY' {ratios['parquet_read_over_pruned_read']:.2f}x), "
        f"/ ariane stream {ratios['parquet_read_over_stream_read']:.2f}x"
    )
    if as_json:
        click.echo(json.dumps({"rows": rows, "size": size, "master": master, **results, **ratios}))
