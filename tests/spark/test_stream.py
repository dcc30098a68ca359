"""Streaming reads: admission control, AvailableNow, new queues, data loss, and a query
restarted from its checkpoint that neither loses nor duplicates."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from ariane.client import SyncAdmin, SyncProducer
from ariane.errors import DataLossError
from ariane.spark.options import SourceOptions, offsets_from_nested, offsets_to_nested
from ariane.spark.source import ArianeStreamReader
from tests.spark.conftest import create_topic, send_to_queues
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]


def _reader(ns: str, topic: str, **extra: str) -> ArianeStreamReader:
    return ArianeStreamReader(SourceOptions.parse({"nameserver": ns, "topic": topic, **extra}))


def _total(start: dict[str, object], end: dict[str, object]) -> int:
    a, b = offsets_from_nested(start), offsets_from_nested(end)
    return sum(v - a.get(k, 0) for k, v in b.items())


def test_offsets_limits_and_available_now(
    spark_cluster: Cluster, admin: SyncAdmin, producer: SyncProducer
) -> None:
    ns = spark_cluster.namesrv_addr
    create_topic(admin, "SparkStreamUnit", queues=2)
    send_to_queues(producer, "SparkStreamUnit", 30, queues=2)
    reader = _reader(ns, "SparkStreamUnit", startingOffsets="earliest", maxOffsetsPerTrigger="7")
    start = reader.initialOffset()
    assert start == {"SparkStreamUnit": {"broker-a": {"0": 0, "1": 0}}}
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(7)
    end = reader.latestOffset(start, limit)
    assert _total(start, end) == 7
    assert reader.reportLatestOffset() == {"SparkStreamUnit": {"broker-a": {"0": 15, "1": 15}}}
    ranges = [p.value for p in reader.partitions(start, end)]
    assert sum(r.size for r in ranges) == 7
    assert reader.partitions(end, end) == []
    # AvailableNow: messages sent after the target are not read
    reader.prepareForTriggerAvailableNow()
    send_to_queues(producer, "SparkStreamUnit", 4, queues=2, start=30)
    final = reader.latestOffset(end, ReadAllAvailable())
    assert final == {"SparkStreamUnit": {"broker-a": {"0": 15, "1": 15}}}
    assert reader.latestOffset(final, ReadAllAvailable()) == final
    # a new queue is picked up from its earliest offset
    admin.create_topic("SparkStreamUnit", read_queue_nums=3, write_queue_nums=3)
    deadline = time.monotonic() + 20
    while admin.topic_route("SparkStreamUnit").queue_datas[0].read_queue_nums != 3:
        assert time.monotonic() < deadline, "the route never showed the third queue"
        time.sleep(0.05)
    fresh = _reader(ns, "SparkStreamUnit")
    grown = fresh.latestOffset(final, ReadAllAvailable())
    assert "2" in grown["SparkStreamUnit"]["broker-a"]  # type: ignore[index]
    planned = {
        (p.value.queue_id, p.value.start, p.value.end) for p in fresh.partitions(final, grown)
    }
    assert planned == {(0, 15, 17), (1, 15, 17)}  # queue 2 is still empty
    # a checkpoint past a queue's end is lost data
    beyond = offsets_to_nested({("SparkStreamUnit", "broker-a", 0): 1000})
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        fresh.latestOffset(beyond, ReadAllAvailable())


def test_restart_from_checkpoint_is_exactly_once(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, topic = spark_cluster.namesrv_addr, "SparkStreamE2E"
    create_topic(admin, topic)
    send_to_queues(producer, topic, 40)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run() -> list[int]:
        query = (
            spark.readStream.format("ariane")
            .option("nameserver", ns)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "15")
            .option("commitOffsetsToGroup", "spark_e2e_group")
            .load()
            .select("queueId", "queueOffset", "body")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return [int(p["numInputRows"]) for p in query.recentProgress]

    first = run()
    assert sum(first) == 40
    assert max(first) <= 15
    assert len([n for n in first if n]) == 3
    # crash after the sink wrote the last batch but before Spark committed it: the batch is
    # planned again from the same offsets and the file sink recognises it
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    (ckpt / "commits" / str(last)).unlink()
    (ckpt / "commits" / f".{last}.crc").unlink(missing_ok=True)
    send_to_queues(producer, topic, 20, start=40)
    second = run()
    assert max(second) <= 15
    rows = spark.read.parquet(str(out)).collect()
    bodies = sorted(int(r.body[1:]) for r in rows)
    assert bodies == list(range(60))
    stats = admin.consume_stats("spark_e2e_group", topic)
    committed = {mq.queue_id: w.consumer_offset for mq, w in stats.offset_table.items()}
    # Spark commits a batch's offsets to the source when it plans the next batch, so the
    # group trails the query by at most the last micro-batch
    assert set(committed) == {0, 1, 2, 3}
    assert all(v <= 15 for v in committed.values())
    assert sum(committed.values()) >= 60 - second[-1] - 15


def test_a_subset_schema_streams_those_columns(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, topic = spark_cluster.namesrv_addr, "SparkStreamPruned"
    create_topic(admin, topic, queues=2)
    send_to_queues(producer, topic, 10, queues=2)
    query = (
        spark.readStream.format("ariane")
        .schema("queueOffset BIGINT, body BINARY, queueId INT")
        .option("nameserver", ns)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "6")
        .load()
        .writeStream.format("memory")
        .queryName("ariane_pruned_stream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    frame = spark.sql("SELECT * FROM ariane_pruned_stream")
    assert frame.columns == ["queueOffset", "body", "queueId"]
    got = sorted((r.queueOffset, bytes(r.body), r.queueId) for r in frame.collect())
    assert got == sorted((i // 2, f"m{i}".encode(), i % 2) for i in range(10))
    assert [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]] == [6, 4]
