"""Batch and streaming writes: columns land as tags/keys/properties, ids are derived
deterministically, rows of one sharding key keep their order in one queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ariane.client import SyncAdmin, SyncProducer
from ariane.spark.ids import message_id
from tests.spark.conftest import create_topic, read_written, send_to_queues
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

SCHEMA = "body binary, tags string, keys string, properties map<string,string>, shardingKey string"


def test_batch_write_ids_and_order(
    spark: SparkSession, spark_cluster: Cluster, admin: SyncAdmin
) -> None:
    ns, topic = spark_cluster.namesrv_addr, "SparkWriteBatch"
    create_topic(admin, topic)
    keys = ["alpha", "beta", "gamma"]
    data = [
        (f"{keys[i % 3]}:{i}".encode(), f"t{i % 2}", f"k{i} x{i}", {"seq": str(i)}, keys[i % 3])
        for i in range(90)
    ]
    df = spark.createDataFrame(data, SCHEMA).coalesce(1)
    df.write.format("ariane").option("nameserver", ns).option("topic", topic).option(
        "idNamespace", "job-1"
    ).mode("append").save()
    rows = read_written(spark, spark_cluster, topic=topic)
    assert len(rows) == 90
    for r in rows:
        i = int(r.properties["seq"])
        assert r.body == data[i][0]
        assert (r.tags, r.keys, r.properties) == (f"t{i % 2}", f"k{i} x{i}", {"seq": str(i)})
        assert r.msgId == message_id("job-1", 0, 0, i)
    for key in keys:
        mine = sorted(
            (r.queueId, r.queueOffset, int(r.properties["seq"]))
            for r in rows
            if r.body.startswith(key.encode())
        )
        assert len({q for q, _, _ in mine}) == 1, f"{key} spread over queues"
        seqs = [s for _, _, s in mine]
        assert seqs == sorted(seqs), f"{key} out of order"
    with pytest.raises(Exception, match="append"):
        df.write.format("ariane").option("nameserver", ns).option("topic", topic).mode(
            "overwrite"
        ).save()
    with pytest.raises(Exception, match="body"):
        spark.createDataFrame([("x",)], "payload string").write.format("ariane").option(
            "nameserver", ns
        ).option("topic", topic).mode("append").save()


def test_stream_write_derives_ids_from_query_and_batch(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, src, dst = spark_cluster.namesrv_addr, "SparkWriteSrc", "SparkWriteDst"
    create_topic(admin, src, queues=2)
    create_topic(admin, dst)
    send_to_queues(producer, src, 20, queues=2)
    query = (
        spark.readStream.format("ariane")
        .option("nameserver", ns)
        .option("topic", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load()
        .selectExpr("body", "tags", "keys", "properties")
        .writeStream.format("ariane")
        .option("nameserver", ns)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = read_written(spark, spark_cluster, topic=dst)
    assert sorted(r.body for r in rows) == sorted(f"m{i}".encode() for i in range(20))
    for r in rows:
        i = int(r.body[1:])
        assert (r.tags, r.keys, r.properties) == ("A" if i % 2 else "B", f"k{i}", {"i": str(i)})
    possible = {
        message_id(query.id, b, p, n) for b in range(3) for p in range(2) for n in range(20)
    }
    assert {r.msgId for r in rows} <= possible
    assert len({r.msgId for r in rows}) == 20
