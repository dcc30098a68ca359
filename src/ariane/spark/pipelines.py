"""Pipelines on the ``ariane`` data source: archive a topic, replay an archive, report lag.

How it works:

* ``archive``: a streaming query from the topic into Parquet files partitioned by the UTC
  date of ``storeTimestamp``, with its checkpoint next to the data (``DIR/_checkpoint``), so
  a rerun continues exactly where the last one stopped; Spark's file sink records which
  micro-batches it wrote, so a batch replayed after a crash is not written twice.
  ``available_now`` runs until the data present at start is archived, then stops.
* ``replay``: a batch read of an archive written back to a topic with its bodies, tags, keys
  and properties; message ids are derived from ``id_namespace`` (default: the archive path
  and target topic), so replaying the same archive twice produces the same ids. ``ordered``
  keeps each original queue's order (one sharding key per original queue).
* ``lag_report``: per consumer group and queue, the backlog (broker max offset - consumer
  offset) from the brokers' consume stats, and the age of the oldest unconsumed message,
  whose store time is read with a Spark batch read of exactly those offsets; as a table and
  a PNG bar chart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ariane.acl.credentials import SessionCredentials
from ariane.client.sync import background_loop
from ariane.spark._cluster import shared_admin
from ariane.spark.options import QueueKey, offsets_to_json

__all__ = ["QueueLag", "archive", "lag_report", "render_lag_png", "replay"]

logger = logging.getLogger(__name__)


def acl_options(credentials: SessionCredentials | None) -> dict[str, str]:
    """The source/sink options that sign every request with an ACL account."""
    if credentials is None:
        return {}
    return {"accessKey": credentials.access_key, "secretKey": credentials.secret_key}


def archive(
    spark: SparkSession,
    nameserver: str,
    topic: str,
    to: Path,
    *,
    checkpoint: Path | None = None,
    available_now: bool = True,
    trigger_s: float = 10.0,
    max_offsets_per_trigger: int | None = None,
    starting_offsets: str = "earliest",
    credentials: SessionCredentials | None = None,
) -> int:
    """Archive ``topic`` into Parquet under ``to`` (``date=YYYY-MM-DD/`` partitions);
    ``credentials`` sign the reads on an ACL-enabled cluster.

    Returns:
        Rows archived by this run (``available_now``); otherwise runs until stopped.
    """
    reader = (
        spark.readStream.format("ariane")
        .option("nameserver", nameserver)
        .option("topic", topic)
        .option("startingOffsets", starting_offsets)
        .options(**acl_options(credentials))
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    df = reader.load().withColumn("date", F.to_date("storeTimestamp"))
    writer = (
        df.writeStream.format("parquet")
        .option("path", str(to))
        .option("checkpointLocation", str(checkpoint or to / "_checkpoint"))
        .partitionBy("date")
        .outputMode("append")
        .queryName(f"ariane-archive-{topic}")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_s} seconds")
    query = writer.start()
    query.awaitTermination()
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def replay(
    spark: SparkSession,
    nameserver: str,
    source: Path,
    topic: str,
    *,
    ordered: bool = False,
    where: str | None = None,
    id_namespace: str | None = None,
    credentials: SessionCredentials | None = None,
) -> int:
    """Write the archive under ``source`` into ``topic``; returns the rows written.
    ``credentials`` sign the sends on an ACL-enabled cluster."""
    df: DataFrame = spark.read.parquet(str(source))
    if where:
        df = df.where(where)
    columns = ["body", "tags", "keys", "properties"]
    if ordered:
        df = (
            df.repartition("brokerName", "queueId")
            .sortWithinPartitions("brokerName", "queueId", "queueOffset")
            .withColumn(
                "shardingKey",
                F.concat_ws("/", F.col("topic"), F.col("brokerName"), F.col("queueId")),
            )
        )
        columns.append("shardingKey")
    else:
        df = df.sortWithinPartitions("topic", "brokerName", "queueId", "queueOffset")
    out = df.select(*columns).cache()
    rows = out.count()
    (
        out.write.format("ariane")
        .option("nameserver", nameserver)
        .option("topic", topic)
        .option("idNamespace", id_namespace or f"replay:{source.resolve()}:{topic}")
        .options(**acl_options(credentials))
        .mode("append")
        .save()
    )
    out.unpersist()
    return rows


@dataclass(frozen=True, slots=True)
class QueueLag:
    """One queue's lag for one consumer group."""

    group: str
    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    backlog: int
    oldest_unconsumed_ms: int | None

    def age_s(self, now_ms: int) -> float | None:
        """Age of the oldest unconsumed message in seconds (``None`` without backlog)."""
        if self.oldest_unconsumed_ms is None:
            return None
        return max(0.0, (now_ms - self.oldest_unconsumed_ms) / 1000)


def _store_times(
    spark: SparkSession,
    nameserver: str,
    wanted: Iterable[tuple[QueueKey, int]],
    credentials: SessionCredentials | None = None,
) -> dict[tuple[QueueKey, int], int]:
    """Store time of the message at each (queue, offset), read with Spark in as few batch
    reads as there are offsets per queue."""
    layers: list[dict[QueueKey, int]] = []
    for key, offset in sorted(set(wanted)):
        for layer in layers:
            if key not in layer:
                layer[key] = offset
                break
        else:
            layers.append({key: offset})
    out: dict[tuple[QueueKey, int], int] = {}
    for layer in layers:
        assign: dict[str, dict[str, list[int]]] = {}
        for topic, broker, qid in layer:
            assign.setdefault(topic, {}).setdefault(broker, []).append(qid)
        rows = (
            spark.read.format("ariane")
            .option("nameserver", nameserver)
            .option("assign", orjson.dumps(assign).decode())
            .option("startingOffsets", offsets_to_json(layer))
            .option("endingOffsets", offsets_to_json({k: v + 1 for k, v in layer.items()}))
            .option("failOnDataLoss", "false")
            .option("includeProperties", "false")
            .options(**acl_options(credentials))
            .load()
            .select("topic", "brokerName", "queueId", "queueOffset", "storeTimestamp")
            .collect()
        )
        for r in rows:
            key = (r["topic"], r["brokerName"], r["queueId"])
            out[(key, r["queueOffset"])] = int(r["storeTimestamp"].timestamp() * 1000)
    return out


def lag_report(
    spark: SparkSession,
    nameserver: str,
    *,
    groups: Sequence[str] = (),
    topics: Sequence[str] = (),
    credentials: SessionCredentials | None = None,
) -> list[QueueLag]:
    """Per group and queue: backlog and the store time of the oldest unconsumed message.

    ``groups`` default to every group with offsets on ``topics``; ``topics`` default to
    every topic of the groups' stats (retry topics included). ``credentials`` sign every
    request on an ACL-enabled cluster.
    """
    admin = shared_admin(nameserver, credentials=credentials)
    chosen = list(groups)
    if not chosen:
        for topic in topics:
            chosen.extend(background_loop().run(admin.topic_consumed_by(topic)))
    chosen = sorted(set(chosen))
    lags: list[QueueLag] = []
    for group in chosen:
        stats = background_loop().run(admin.consume_stats(group))
        for mq, w in sorted(
            stats.offset_table.items(), key=lambda i: (i[0].topic, i[0].broker_name, i[0].queue_id)
        ):
            if topics and mq.topic not in topics:
                continue
            consumer = max(w.consumer_offset, 0)
            lags.append(
                QueueLag(
                    group,
                    mq.topic,
                    mq.broker_name,
                    mq.queue_id,
                    w.broker_offset,
                    consumer,
                    max(0, w.broker_offset - consumer),
                    None,
                )
            )
    wanted = [((q.topic, q.broker, q.queue_id), q.consumer_offset) for q in lags if q.backlog > 0]
    times = _store_times(spark, nameserver, wanted, credentials) if wanted else {}
    return [
        QueueLag(
            q.group,
            q.topic,
            q.broker,
            q.queue_id,
            q.broker_offset,
            q.consumer_offset,
            q.backlog,
            times.get(((q.topic, q.broker, q.queue_id), q.consumer_offset)),
        )
        for q in lags
    ]


def render_lag_png(lags: Sequence[QueueLag], path: Path, now_ms: int | None = None) -> Path:
    """A PNG with two bar charts per queue: backlog (messages) and oldest age (seconds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    now = now_ms if now_ms is not None else int(time.time() * 1000)
    labels = [f"{q.group} {q.topic}/{q.broker}/{q.queue_id}" for q in lags] or ["(no queues)"]
    backlog = [q.backlog for q in lags] or [0]
    ages = [q.age_s(now) or 0.0 for q in lags] or [0.0]
    height = max(3.0, 0.35 * len(labels) + 1.5)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    ax1.barh(labels, backlog, color="#4c72b0")
    ax1.set_xlabel("backlog (messages)")
    ax1.invert_yaxis()
    ax2.barh(labels, ages, color="#dd8452")
    ax2.set_xlabel("age of oldest unconsumed message (s)")
    fig.suptitle("Consumer lag")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path
