"""Batch reads against a live cluster: exact rows, offset ranges, timestamps, filters,
partition splitting, and lost data."""

from __future__ import annotations

import orjson
import pytest
from pyspark.sql import SparkSession

from ariane.client import SyncAdmin, SyncProducer
from ariane.errors import DataLossError
from ariane.spark._arrow import ARROW_SCHEMA
from ariane.spark._cluster import QueueReader
from ariane.spark.options import SourceOptions
from ariane.spark.planning import QueueRange
from tests.spark.conftest import create_topic, read, send_to_queues
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

TOPIC = "SparkRead"
N = 40


@pytest.fixture(scope="module")
def topic(admin: SyncAdmin, producer: SyncProducer) -> dict[str, object]:
    create_topic(admin, TOPIC)
    sent = send_to_queues(producer, TOPIC, N)
    return {m.body.decode(): m for m in sent}


def test_reads_exactly_the_topic(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    df = spark.read.format("ariane").option("nameserver", spark_cluster.namesrv_addr)
    frame = df.option("topic", TOPIC).load()
    assert frame.columns == ARROW_SCHEMA.names
    rows = frame.collect()
    assert len(rows) == N
    for r in rows:
        i = int(r.body.decode()[1:])
        assert (r.topic, r.brokerName, r.queueId, r.queueOffset) == (
            TOPIC,
            "broker-a",
            i % 4,
            i // 4,
        )
        assert (r.keys, r.tags, r.properties) == (f"k{i}", "A" if i % 2 else "B", {"i": str(i)})
        assert r.msgId == topic[r.body.decode()].properties["UNIQ_KEY"]  # type: ignore[attr-defined]
        assert r.storeTimestamp >= r.bornTimestamp.replace(microsecond=0)
        assert r.storeHost == spark_cluster.broker_addr()
        assert r.reconsumeTimes == 0
    bare = read(spark, spark_cluster.namesrv_addr, topic=TOPIC, includeProperties="false")
    assert {r.properties for r in bare} == {None}


def test_offset_ranges_select_exactly(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    rows = read(
        spark,
        spark_cluster.namesrv_addr,
        assign=orjson.dumps({TOPIC: {"broker-a": [0, 1]}}).decode(),
        startingOffsets=orjson.dumps({TOPIC: {"broker-a": {"0": 2, "1": -2}}}).decode(),
        endingOffsets=orjson.dumps({TOPIC: {"broker-a": {"0": 5, "1": 3}}}).decode(),
    )
    got = sorted((r.queueId, r.queueOffset) for r in rows)
    assert got == [(0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2)]
    latest = read(spark, spark_cluster.namesrv_addr, topic=TOPIC, startingOffsets="latest")
    assert latest == []


def test_timestamps_select_exactly(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    ns = spark_cluster.namesrv_addr
    everything = read(spark, ns, topic=TOPIC)
    stamps = sorted({int(r.storeTimestamp.timestamp() * 1000) for r in everything})
    assert len(stamps) > 4
    low, high = stamps[len(stamps) // 4], stamps[3 * len(stamps) // 4]
    expected = sorted(
        r.body for r in everything if low <= int(r.storeTimestamp.timestamp() * 1000) < high
    )
    rows = read(spark, ns, topic=TOPIC, startingTimestamp=str(low), endingTimestamp=str(high))
    assert sorted(r.body for r in rows) == expected
    assert 0 < len(expected) < N


def test_tag_and_sql_filters(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    ns = spark_cluster.namesrv_addr
    odd = read(spark, ns, topic=TOPIC, subExpression="A")
    assert sorted(int(r.body[1:]) for r in odd) == list(range(1, N, 2))
    both = read(spark, ns, topic=TOPIC, subExpression="A || B")
    assert len(both) == N
    sql = read(spark, ns, topic=TOPIC, filter="i BETWEEN 10 AND 14 AND TAGS = 'B'")
    assert sorted(int(r.body[1:]) for r in sql) == [10, 12, 14]


def test_min_partitions_split_ranges(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    df = (
        spark.read.format("ariane")
        .option("nameserver", spark_cluster.namesrv_addr)
        .option("topic", TOPIC)
        .option("minPartitions", "10")
        .load()
    )
    assert df.rdd.getNumPartitions() == 10
    rows = df.select("queueId", "queueOffset").collect()
    assert sorted((r.queueId, r.queueOffset) for r in rows) == sorted(
        (i % 4, i // 4) for i in range(N)
    )


def test_lost_data_fails_or_is_skipped(spark_cluster: Cluster, topic: dict[str, object]) -> None:
    options = {"nameserver": spark_cluster.namesrv_addr, "topic": TOPIC}
    past_end = QueueRange(TOPIC, "broker-a", 0, 7, N // 4 + 5)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        list(QueueReader(SourceOptions.parse(options)).read(past_end))
    lenient = SourceOptions.parse({**options, "failOnDataLoss": "false"})
    got = [m.queue_offset for batch in QueueReader(lenient).read(past_end) for m in batch]
    assert got == [7, 8, 9]


def test_bad_options_fail_at_planning(spark: SparkSession, spark_cluster: Cluster) -> None:
    with pytest.raises(Exception, match="exactly one of the options topic and assign"):
        read(spark, spark_cluster.namesrv_addr)
    with pytest.raises(Exception, match=r"SUBSCRIPTION_PARSE_FAILED|parse"):
        read(spark, spark_cluster.namesrv_addr, topic=TOPIC, filter="i >>> 3")
