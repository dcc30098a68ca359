"""Fixtures for the Spark connector tests: one SparkSession (local[2], UI off) and one
cluster (NameServer + broker with SQL92 filtering) per test session; every test of this
package runs in the same xdist worker (group ``spark``) so only one JVM starts.

No test may leave a process behind (a Spark driver left running takes a core from every
later test): ``no_leaked_processes`` kills whatever a test started and did not stop (the
session's own JVM and its Python workers excepted) and fails the test that leaked it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from ariane.client import Message, MessageQueue, SyncAdmin, SyncProducer
from ariane.spark.session import spark_session
from tests.support import rpc
from tests.support.cluster import Cluster
from tests.support.polling import wait_until
from tests.support.proctree import descendants, kill_tree


def _session_jvm() -> subprocess.Popen[bytes] | None:
    """This process's SparkContext JVM (``spark-submit``), if one runs."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    proc = getattr(getattr(sc, "_gateway", None), "proc", None) if sc is not None else None
    return proc if isinstance(proc, subprocess.Popen) else None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    before = descendants(os.getpid())
    yield
    jvm = _session_jvm()
    ours = {jvm.pid, *descendants(jvm.pid)} if jvm is not None else set()
    leaked = descendants(os.getpid()) - before - ours
    if leaked:
        names = {p: _cmdline(p) for p in leaked}
        for p in leaked:
            kill_tree(p)
        pytest.fail(f"the test left processes running (now killed): {names}")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session(
        "local[2]",
        "ariane-tests",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.sql.streaming.minBatchesToRetain": "100",
            # a Python worker on a busy machine may take longer than 15 s to connect back
            "spark.python.authenticate.socketTimeout": "120s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    jvm = _session_jvm()
    try:
        yield session
    finally:
        session.stop()
        if jvm is not None:  # and its Python workers, even if stop() could not reach it
            kill_tree(jvm.pid, proc=jvm)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield c.start(enablePropertyFilter="true")
    finally:
        c.stop()


@pytest.fixture(scope="session")
def admin(spark_cluster: Cluster) -> Iterator[SyncAdmin]:
    with SyncAdmin(namesrv_addr=spark_cluster.namesrv_addr) as a:
        yield a


@pytest.fixture(scope="session")
def producer(spark_cluster: Cluster) -> Iterator[SyncProducer]:
    with SyncProducer("spark_test_producer", namesrv_addr=spark_cluster.namesrv_addr) as p:
        yield p


def create_topic(admin: SyncAdmin, topic: str, queues: int = 4) -> None:
    """Create ``topic`` and wait until the NameServer routes it."""
    admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    deadline = time.monotonic() + 20
    while True:
        try:
            route = admin.topic_route(topic)
            if route.queue_datas:
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def send_to_queues(
    producer: SyncProducer, topic: str, count: int, queues: int = 4, *, start: int = 0, **extra: Any
) -> list[Message]:
    """Send ``count`` messages round robin over queues 0..queues-1 of broker-a; message i
    has body ``m<i>``, key ``k<i>``, tag A (odd) or B (even) and property ``i``."""
    sent = []
    last: dict[MessageQueue, int] = {}
    for i in range(start, start + count):
        msg = Message(
            topic,
            f"m{i}".encode(),
            tags="A" if i % 2 else "B",
            keys=f"k{i}",
            properties={"i": str(i), **extra},
        )
        result = producer.send(msg, queue=MessageQueue(topic, "broker-a", i % queues))
        last[result.message_queue] = result.queue_offset
        sent.append(msg)
    wait_dispatched(producer, last)
    return sent


def wait_dispatched(producer: SyncProducer, last: dict[MessageQueue, int]) -> None:
    """Wait until each queue's max offset passes ``last[queue]`` (the broker indexes sent
    messages into consume queues a moment after answering the send)."""
    admin = SyncAdmin(namesrv_addr=producer.producer.client_config.namesrv_addr)
    with admin:
        deadline = time.monotonic() + 20
        for mq, offset in last.items():
            while admin.max_offset(mq) <= offset:
                assert time.monotonic() < deadline, f"{mq} never reached offset {offset}"
                time.sleep(0.01)


def read(spark: SparkSession, ns: str, **options: str) -> Sequence[Any]:
    """Collect a batch read with ``options``."""
    reader = spark.read.format("ariane").option("nameserver", ns)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load().collect()


def read_written(spark: SparkSession, cluster: Cluster, **options: str) -> Sequence[Any]:
    """``read`` once the broker has dispatched everything written: a writer's messages (Spark's
    sink, a replay) are acknowledged before the reput thread puts them in their queues, and a
    batch read stops at the queues' ends as they are when it is planned."""
    addr = cluster.broker_addr()
    wait_until(lambda: rpc.dispatched(addr), what="the broker to dispatch every write")
    return read(spark, cluster.namesrv_addr, **options)
