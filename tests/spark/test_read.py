"""Batch reads against a live cluster: exact rows, offset ranges, timestamps, filters,
partition splitting, and lost data."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from ariane.client import Message, MessageQueue, SyncAdmin, SyncProducer
from ariane.errors import BrokerResponseError, DataLossError
from ariane.remoting.protocol.codes import ResponseCode
from ariane.spark import _cluster as cluster_module
from ariane.spark import _direct as direct_module
from ariane.spark import source as source_module
from ariane.spark._arrow import ARROW_SCHEMA
from ariane.spark._cluster import QueueReader
from ariane.spark._columns import records_to_batch
from ariane.spark.options import SourceOptions
from ariane.spark.planning import QueueRange
from tests.spark.conftest import create_topic, read, send_to_queues, wait_dispatched
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


def _pruned(spark: SparkSession, ns: str, schema: str, **options: str) -> Any:
    reader = spark.read.format("ariane").schema(schema).option("nameserver", ns)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_a_subset_schema_reads_those_columns(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    ns = spark_cluster.namesrv_addr
    frame = _pruned(spark, ns, "body BINARY, queueOffset BIGINT", topic=TOPIC)
    assert frame.columns == ["body", "queueOffset"]
    got = sorted((bytes(r.body), r.queueOffset) for r in frame.collect())
    assert got == sorted((f"m{i}".encode(), i // 4) for i in range(N))
    # names as Spark matches them (case-insensitively), in the user's spelling and order
    odd = _pruned(spark, ns, "PROPERTIES MAP<STRING, STRING>, tags STRING, QueueId INT",
                  topic=TOPIC, subExpression="A")  # fmt: skip
    assert odd.columns == ["PROPERTIES", "tags", "QueueId"]
    rows = odd.collect()
    assert sorted((r.PROPERTIES["i"], r.tags, r.QueueId) for r in rows) == sorted(
        (str(i), "A", i % 4) for i in range(1, N, 2)
    )
    ids = _pruned(spark, ns, "msgId STRING, storeHost STRING, reconsumeTimes INT", topic=TOPIC)
    assert sorted(r.msgId for r in ids.collect()) == sorted(
        m.properties["UNIQ_KEY"]  # type: ignore[attr-defined]
        for m in topic.values()
    )
    assert {(r.storeHost, r.reconsumeTimes) for r in ids.collect()} == {
        (spark_cluster.broker_addr(), 0)
    }
    assert _pruned(spark, ns, "body BINARY", topic=TOPIC).count() == N


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("body BINARY, nope STRING", "unknown column 'nope'"),
        ("queueOffset INT", "column 'queueOffset' has type int in the schema, not bigint"),
        ("body STRING", "column 'body' has type string in the schema, not binary"),
        ("body BINARY, BODY BINARY", "column 'BODY' is named twice"),
    ],
)
def test_a_wrong_schema_names_the_columns(
    spark: SparkSession, spark_cluster: Cluster, schema: str, message: str
) -> None:
    with pytest.raises(Exception, match=message) as info:
        _pruned(spark, spark_cluster.namesrv_addr, schema, topic=TOPIC).collect()
    assert "queueOffset BIGINT" in str(info.value)  # the allowed columns and types


def test_pushed_filters_narrow_the_planned_ranges(
    spark: SparkSession, spark_cluster: Cluster, topic: dict[str, object]
) -> None:
    ns = spark_cluster.namesrv_addr
    conf = "spark.sql.python.filterPushdown.enabled"
    with pytest.raises(Exception, match=conf):  # Spark refuses the reader without it
        _pruned(spark, ns, "queueId INT", topic=TOPIC, pushFilters="true").collect()
    spark.conf.set(conf, "true")
    try:
        frame = (
            _pruned(spark, ns, "queueId INT, queueOffset BIGINT, body BINARY, tags STRING",
                    topic=TOPIC, pushFilters="true")
            .where("queueId IN (1, 2) AND queueOffset >= 3 AND queueOffset < 8 AND tags = 'A'")
        )  # fmt: skip
        assert frame.rdd.getNumPartitions() == 2  # queues 1 and 2 only
        got = sorted((r.queueId, r.queueOffset, bytes(r.body)) for r in frame.collect())
        want = [(i % 4, i // 4, f"m{i}".encode()) for i in range(N)]
        assert got == sorted(w for w in want if w[0] == 1 and 3 <= w[1] < 8)  # odd i: tag A
        assert len(got) == 5
        nothing = _pruned(spark, ns, "queueId INT", topic=TOPIC, pushFilters="true")
        assert nothing.where("queueId = 9").collect() == []
    finally:
        spark.conf.unset(conf)


BULK_TOPIC = "SparkBulkRead"


def _count_direct_pulls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The offsets of the bulk pulls sent on a task's own connection from now on."""
    sent: list[int] = []
    real = direct_module.DirectPulls.submit

    def counted(self: Any, header: Any) -> Any:
        sent.append(header.queue_offset)
        return real(self, header)

    monkeypatch.setattr(direct_module.DirectPulls, "submit", counted)
    return sent


def test_bulk_pulls_read_what_plain_pulls_read(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default raw read (bulk pulls, hundreds of records per answer, on the task's own
    connection) gives exactly the rows of bulk pulls through the SDK's client and of plain
    32-record pulls, for batches (runs) and interleaved single sends (gaps), in the DataFrame
    and in each range's Arrow batches."""
    create_topic(admin, BULK_TOPIC, queues=2)
    for k in range(6):
        mq = MessageQueue(BULK_TOPIC, "broker-a", k % 2)
        batch = [Message(BULK_TOPIC, b"b%d-%d" % (k, i), keys=f"k{i}") for i in range(100)]
        producer.send_batch(batch, queue=mq)
    send_to_queues(producer, BULK_TOPIC, 10, queues=2)
    ns = spark_cluster.namesrv_addr
    options = {"nameserver": ns, "topic": BULK_TOPIC}
    modes = {
        "socket": {"bulkPull": "true"},  # the default: bulk pulls on the task's own connection
        "client": {"bulkPull": "true", "bulkPullSocket": "false"},
        "plain": {"bulkPull": "false"},
    }
    own = _count_direct_pulls(monkeypatch)
    for queue in (0, 1):
        rng = QueueRange(BULK_TOPIC, "broker-a", queue, 3, 305)
        got = {}
        for mode, extra in modes.items():
            opts = SourceOptions.parse({**options, **extra})
            before = len(own)
            bodies = list(QueueReader(opts).read_raw(rng))
            assert (len(own) > before) == (mode == "socket")
            got[mode] = (len(bodies), records_to_batch(bodies, "broker-a", opts.properties, 3, 305))
        assert got["socket"][1].equals(got["plain"][1])
        assert got["client"][1].equals(got["plain"][1])
        assert got["socket"][1].column("queueOffset").to_pylist() == list(range(3, 305))
        assert got["socket"][0] == got["client"][0] < got["plain"][0]
    frames = {
        bulk: sorted(tuple(r) for r in read(spark, ns, topic=BULK_TOPIC, bulkPull=bulk))
        for bulk in ("true", "false")
    }
    assert len(frames["true"]) == 610
    assert frames["true"] == frames["false"]


def test_bulk_pull_falls_back_to_plain_pulls(
    spark_cluster: Cluster, topic: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker answering REQUEST_CODE_NOT_SUPPORTED to the bulk pull (an older Ariane,
    Apache RocketMQ) is read with plain pulls, from then on without asking again (bulk
    pulls through the SDK's client here; on the task's own connection: the next test)."""
    options = SourceOptions.parse(
        {"nameserver": spark_cluster.namesrv_addr, "topic": TOPIC, "bulkPullSocket": "false"}
    )
    reader = QueueReader(options)
    api_type = type(reader.admin.api)
    real = api_type.pull_message_raw
    asked: list[bool] = []

    async def old_broker(
        self: Any, addr: str, header: Any, timeout_ms: int, bulk: bool = False
    ) -> Any:
        asked.append(bulk)
        if bulk:
            raise BrokerResponseError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "not supported")
        return await real(self, addr, header, timeout_ms, bulk)

    monkeypatch.setattr(api_type, "pull_message_raw", old_broker)
    monkeypatch.setattr(cluster_module, "_no_bulk", set())
    rng = QueueRange(TOPIC, "broker-a", 1, 0, N // 4)
    for _ in range(2):
        bodies = list(reader.read_raw(rng))
        batch = records_to_batch(bodies, "broker-a", options.properties, 0, N // 4)
        assert batch.column("queueOffset").to_pylist() == list(range(N // 4))
        assert batch.column("body").to_pylist() == [b"m%d" % (4 * i + 1) for i in range(N // 4)]
    assert asked[0] is True
    assert asked.count(True) == 1


def test_bulk_pull_on_its_own_connection_falls_back_to_plain_pulls(
    spark_cluster: Cluster, topic: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the task's own connection too, a broker answering REQUEST_CODE_NOT_SUPPORTED to the
    bulk pull (here: a request code it does not know) is read with plain pulls, remembered;
    and an ACL account keeps bulk pulls on the SDK's client (signed requests)."""
    options = SourceOptions.parse({"nameserver": spark_cluster.namesrv_addr, "topic": TOPIC})
    monkeypatch.setattr(direct_module, "BULK_CODE", 64_999)
    monkeypatch.setattr(cluster_module, "_no_bulk", set())
    own = _count_direct_pulls(monkeypatch)
    rng = QueueRange(TOPIC, "broker-a", 1, 0, N // 4)
    for _ in range(2):
        bodies = list(QueueReader(options).read_raw(rng))
        batch = records_to_batch(bodies, "broker-a", options.properties, 0, N // 4)
        assert batch.column("queueOffset").to_pylist() == list(range(N // 4))
        assert batch.column("body").to_pylist() == [b"m%d" % (4 * i + 1) for i in range(N // 4)]
    assert own == [0]
    assert cluster_module._no_bulk == {spark_cluster.broker_addr()}
    monkeypatch.setattr(cluster_module, "_no_bulk", set())
    monkeypatch.setattr(direct_module, "BULK_CODE", ResponseCode.SUCCESS)  # never sent
    signed = SourceOptions.parse(
        {"nameserver": spark_cluster.namesrv_addr, "topic": TOPIC, "accessKey": "a"}
        | {"secretKey": "s"}
    )
    bodies = list(QueueReader(signed).read_raw(rng))
    batch = records_to_batch(bodies, "broker-a", signed.properties, 0, N // 4)
    assert batch.column("queueOffset").to_pylist() == list(range(N // 4))
    assert own == [0]
    assert cluster_module._no_bulk == set()


RECYCLE_TOPIC = "SparkRecycledBodies"


def test_answers_are_read_into_recycled_bodies(
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A range read as Arrow batches (``read_range``) hands each decoded answer's body back to
    its reader and later answers are read into those bodies, shrunk or grown to their size;
    the batches hold exactly the rows a read through the SDK's client (whose bodies are
    ``bytes``, never reused) gives, and the range's bodies in order."""
    create_topic(admin, RECYCLE_TOPIC, queues=1)
    mq = MessageQueue(RECYCLE_TOPIC, "broker-a", 0)
    sent: list[bytes] = []
    for k in range(6):
        batch = [b"r%d-%d-" % (k, i) + b"x" * (7 * k + i % 5) for i in range(40)]
        producer.send_batch([Message(RECYCLE_TOPIC, b) for b in batch], queue=mq)
        sent += batch
    wait_dispatched(producer, {mq: len(sent) - 1})  # the range below ends inside the queue
    # answers of at most 16 records, each decoded into a batch of its own
    monkeypatch.setattr(cluster_module, "BULK_PULL_MESSAGES", 16)
    monkeypatch.setattr(source_module, "BATCH_BYTES", 1)
    taken: list[int] = []
    real = direct_module.take_buffer

    def spy(spare: list[bytearray], size: int) -> bytearray:
        taken.append(len(spare))
        return real(spare, size)

    monkeypatch.setattr(direct_module, "take_buffer", spy)
    options = {"nameserver": spark_cluster.namesrv_addr, "topic": RECYCLE_TOPIC}
    rng = QueueRange(RECYCLE_TOPIC, "broker-a", 0, 5, 230)
    got = {}
    for mode, extra in {"socket": {}, "client": {"bulkPullSocket": "false"}}.items():
        opts = SourceOptions.parse({**options, **extra})
        got[mode] = pa.Table.from_batches(list(source_module.read_range(opts, rng)), ARROW_SCHEMA)
    assert got["socket"].equals(got["client"])
    assert got["socket"].column("body").to_pylist() == sent[5:230]
    assert got["socket"].column("queueOffset").to_pylist() == list(range(5, 230))
    assert len(taken) >= 14
    assert sum(1 for n in taken if n) >= len(taken) - 4  # all but the first window's reads
