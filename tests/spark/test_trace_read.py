"""``option("decode", "trace")``: a trace topic read as decoded trace records, and the SQL a
team runs on it (per-group consume latency and failure rate)."""

from __future__ import annotations

import asyncio
import time

import pytest
from pyspark.sql import SparkSession

from ariane.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SyncAdmin,
)
from ariane.spark._trace import TRACE_ARROW_SCHEMA
from tests.spark.conftest import create_topic
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]

TRACE = "SparkTraceTopic"
TOPIC = "SparkTraced"
N = 6


async def _produce_and_consume(namesrv: str) -> tuple[list[str], int]:
    """N traced sends, consumed by a traced group that fails m0 (no retries: it goes to the
    dead-letter queue); the msg ids and the number of trace messages written."""
    seen: list[str] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        seen.extend(m.msg_id for m in msgs)
        if msgs[0].body == b"m0":
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "spark_trace_cg",
        namesrv_addr=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_trace=True,
        trace_topic=TRACE,
        max_reconsume_times=0,
    )
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    producer = Producer(
        "spark_trace_pg", namesrv_addr=namesrv, enable_trace=True, trace_topic=TRACE
    )
    async with producer, consumer:
        ids = [(await producer.send(Message(TOPIC, f"m{i}".encode()))).msg_id for i in range(N)]
        deadline = time.monotonic() + 30
        while set(seen) < set(ids):
            assert time.monotonic() < deadline, "messages not consumed"
            await asyncio.sleep(0.05)
    sent = 0
    for d in (producer.trace_dispatcher, consumer.tracer.dispatcher if consumer.tracer else None):
        assert d is not None
        assert (d.stats.discarded, d.stats.lost_records) == (0, 0)
        sent += d.stats.sent_messages
    return ids, sent


def test_trace_topic_as_records(
    spark: SparkSession, spark_cluster: Cluster, admin: SyncAdmin
) -> None:
    create_topic(admin, TOPIC, queues=2)
    create_topic(admin, TRACE, queues=1)
    ids, trace_messages = asyncio.run(_produce_and_consume(spark_cluster.namesrv_addr))
    deadline = time.monotonic() + 20
    while True:  # the broker indexes stored trace messages a moment after answering
        try:
            stats = admin.topic_stats(TRACE)
            if sum(o.max_offset for o in stats.offset_table.values()) >= trace_messages:
                break
        except Exception:
            pass
        assert time.monotonic() < deadline, "trace messages not readable"
        time.sleep(0.05)

    frame = (
        spark.read.format("ariane")
        .option("nameserver", spark_cluster.namesrv_addr)
        .option("decode", "trace")
        .option("topic", TRACE)
        .load()
        .cache()
    )
    assert frame.columns == TRACE_ARROW_SCHEMA.names
    frame.createOrReplaceTempView("traces")
    counts = {
        (r.traceType, r.groupName): r.n
        for r in spark.sql(
            "SELECT traceType, groupName, count(*) AS n FROM traces GROUP BY 1, 2"
        ).collect()
    }
    assert counts == {
        ("Pub", "spark_trace_pg"): N,
        ("SubBefore", "spark_trace_cg"): N,
        ("SubAfter", "spark_trace_cg"): N,
    }
    (row,) = spark.sql(
        "SELECT groupName, avg(costMs) AS avgCost, "
        "avg(CAST(NOT success AS DOUBLE)) AS failureRate "
        "FROM traces WHERE traceType = 'SubAfter' GROUP BY groupName"
    ).collect()
    assert row.groupName == "spark_trace_cg"
    assert row.failureRate == pytest.approx(1 / N)
    assert 0 <= row.avgCost < 10_000
    pubs = spark.sql("SELECT msgId, topic, decodeError FROM traces WHERE traceType = 'Pub'")
    assert sorted((r.msgId, r.topic, r.decodeError) for r in pubs.collect()) == sorted(
        (i, TOPIC, None) for i in ids
    )
    pruned = (
        spark.read.format("ariane")
        .schema("traceType STRING, msgId STRING")
        .option("nameserver", spark_cluster.namesrv_addr)
        .option("decode", "trace")
        .option("topic", TRACE)
        .load()
    )
    assert pruned.columns == ["traceType", "msgId"]
    got = sorted((r.traceType, r.msgId) for r in pruned.collect())
    assert got == sorted((t, i) for t in ("Pub", "SubBefore", "SubAfter") for i in ids)
