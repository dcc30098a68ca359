"""Consuming with the real 5.x clients (PyPI ``rocketmq-python-client`` 5.1.2, npm
``rocketmq-client-nodejs`` 1.0.8) through POP: SimpleConsumer receive/ack, change of invisible
duration, redelivery with a higher delivery attempt, the DLQ after the group's max attempts,
PushConsumer with retries, FIFO groups in order; messages sent by a 4.x remoting producer
(our SDK), checked byte for byte."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

from ariane.client import Message, Producer
from ariane.common.message import MessageExt
from ariane.remoting.protocol.codes import RequestCode
from tests.compat.conftest import ScriptClient
from tests.support.cluster import Cluster
from tests.support.grpc5 import body_of, create_group, create_topic, pull_all
from tests.support.rpc import request, wait_for_route

pytestmark = [pytest.mark.compat, pytest.mark.integration]


def _endpoint(cluster: Cluster) -> str:
    return cluster.brokers["broker-a"].ready["grpc"]


def _size(i: int) -> int:
    return 1024 * 1024 if i % 250 == 249 else (10, 700, 5000)[i % 3]


async def _produce(namesrv: str, topic: str, n: int, fifo: bool = False) -> dict[str, int]:
    ids: dict[str, int] = {}
    async with Producer("pg_consume", namesrv_addr=namesrv) as producer:
        for i in range(n):
            props = {"i": str(i)}
            if fifo:  # a 5.x message group, in one queue (4.x ordered send)
                props["__SHARDINGKEY"] = f"g{i % 4}"
            msg = Message(topic, body_of(i, _size(i)), tags=f"Tag{i % 3}", keys=f"key-{i}",
                          properties=props)  # fmt: skip
            key = props.get("__SHARDINGKEY")
            result = await producer.send(msg, sharding_key=key) if key else await producer.send(msg)
            ids[result.msg_id] = i
    return ids


def _setup(cluster: Cluster, topic: str, kind: str | None = None) -> None:
    create_topic(cluster.broker_addr(), topic, kind)
    wait_for_route(cluster.namesrv_addr, topic)


def _dead_letters(broker: str, group: str) -> list[MessageExt]:
    """The group's DLQ (created write-only: made readable first, as an administrator does)."""
    dlq = f"%DLQ%{group}"
    if request(broker, RequestCode.GET_MAX_OFFSET, {"topic": dlq, "queueId": "0"}).code != 0:
        return []
    create_topic(broker, dlq, None, queues=1)
    return pull_all(broker, dlq, 1)


def _check_bodies(events: list[dict[str, Any]], ids: dict[str, int]) -> None:
    for e in events:
        i = ids[e["id"]]
        assert e["sha"] == hashlib.sha256(body_of(i, _size(i))).hexdigest()
        assert e["size"] == _size(i)
        assert e["tag"] == f"Tag{i % 3}"
        assert e["keys"] == [f"key-{i}"]
        assert e["props"]["i"] == str(i)
        assert not e["corrupted"]


def test_simple_consumer_receives_what_a_remoting_producer_sent(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "PopSimple"
    _setup(grpc_cluster, topic)
    ids = asyncio.run(_produce(grpc_cluster.namesrv_addr, topic, 1000))
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--group", "CG_SIMPLE", "--topic", topic,
         "--expect", "1000", "--batch", "32"],
        timeout_s=180,
    )  # fmt: skip
    got = run.of("msg")
    _check_bodies(got, ids)
    if run.of("error"):  # a transient client-side failure: the message comes back, once more
        assert {e["id"] for e in got} == set(ids), run.of("error")
    else:
        assert sorted(e["id"] for e in got) == sorted(ids)  # each exactly once
        assert all(e["attempt"] == 1 for e in got)


def test_nack_redelivery_then_dlq_after_max_attempts(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "PopRetry"
    _setup(grpc_cluster, topic)
    broker = grpc_cluster.broker_addr()
    create_group(broker, "CG_RETRY", retry_max=1)  # 2 attempts, then the DLQ
    ids = asyncio.run(_produce(grpc_cluster.namesrv_addr, topic, 6))
    # every delivery is refused (ChangeInvisibleDuration to 1 s): 2 attempts each, then DLQ
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--group", "CG_RETRY", "--topic", topic,
         "--expect", "7", "--fail-times", "99", "--nack", "--timeout", "8", "--linger", "0"],
        timeout_s=120,
    )  # fmt: skip
    by_id: dict[str, list[int]] = {}
    for e in run.of("msg"):
        by_id.setdefault(e["id"], []).append(e["attempt"])
    assert sorted(by_id) == sorted(ids)
    assert all(attempts == [1, 2] for attempts in by_id.values()), by_id
    dlq = _dead_letters(broker, "CG_RETRY")
    assert sorted(int(m.properties["i"]) for m in dlq) == list(range(6))
    for m in dlq:
        i = int(m.properties["i"])
        assert m.body == body_of(i, _size(i))


def test_unacked_messages_come_back_after_the_invisible_time(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "PopExpire"
    _setup(grpc_cluster, topic)
    ids = asyncio.run(_produce(grpc_cluster.namesrv_addr, topic, 3))
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--group", "CG_EXPIRE", "--topic", topic,
         "--expect", "3", "--fail-times", "1", "--invisible", "10", "--timeout", "40",
         "--linger", "0"],
        timeout_s=90,
    )  # fmt: skip
    attempts: dict[str, list[int]] = {}
    times: dict[str, list[float]] = {}
    for e in run.of("msg"):
        attempts.setdefault(e["id"], []).append(e["attempt"])
        times.setdefault(e["id"], []).append(e["at"])
    assert sorted(attempts) == sorted(ids)
    assert all(a == [1, 2] for a in attempts.values()), attempts
    assert all(t[1] - t[0] >= 9.5 for t in times.values())


def test_push_consumer_retries_and_fifo_order(grpc_cluster: Cluster, rmq5: ScriptClient) -> None:
    broker = grpc_cluster.broker_addr()
    _setup(grpc_cluster, "PopPush")
    ids = asyncio.run(_produce(grpc_cluster.namesrv_addr, "PopPush", 40))
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--group", "CG_PUSH", "--topic", "PopPush",
         "--kind", "push", "--expect", "40", "--fail-times", "1", "--timeout", "60"],
        timeout_s=120,
    )  # fmt: skip
    attempts: dict[str, list[int]] = {}
    for e in run.of("msg"):
        attempts.setdefault(e["id"], []).append(e["attempt"])
    assert sorted(attempts) == sorted(ids)
    assert all(a == [1, 2] for a in attempts.values())
    _setup(grpc_cluster, "PopFifo", "FIFO")
    create_group(broker, "CG_FIFO", orderly=True)
    fifo_ids = asyncio.run(_produce(grpc_cluster.namesrv_addr, "PopFifo", 40, fifo=True))
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--group", "CG_FIFO", "--topic", "PopFifo",
         "--kind", "push", "--expect", "40", "--timeout", "60"],
        timeout_s=120,
    )  # fmt: skip
    order: dict[str, list[int]] = {}
    for e in run.of("msg"):
        order.setdefault(e["group"] or "", []).append(fifo_ids[e["id"]])
    assert sorted(order) == ["g0", "g1", "g2", "g3"]
    for seq in order.values():
        assert seq == sorted(seq)
        assert len(seq) == 10


def test_fifo_order_survives_redelivery(grpc_cluster: Cluster, rmq5: ScriptClient) -> None:
    """A FIFO group's failed message comes again before anything after it in its message
    group: per group the deliveries are exactly m0, m0 again, m4, m4 again... Simple: each
    first delivery is given back (ChangeInvisibleDuration 1 s), so the broker's orderly POP
    holds the queue and redelivers it first (attempt 2); push: the Python client retries a
    FIFO message in place (the broker keeps its lease), so the attempt stays 1."""
    broker = grpc_cluster.broker_addr()
    for kind in ("simple", "push"):
        topic, group = f"PopFifoRetry{kind}", f"CG_FIFO_RETRY_{kind}"
        _setup(grpc_cluster, topic, "FIFO")
        create_group(broker, group, orderly=True)
        fifo_ids = asyncio.run(_produce(grpc_cluster.namesrv_addr, topic, 12, fifo=True))
        run = rmq5.run(
            "consumer.py",
            ["--endpoint", _endpoint(grpc_cluster), "--group", group, "--topic", topic,
             "--kind", kind, "--expect", "12", "--fail-times", "1", "--nack", "--batch", "1",
             "--timeout", "90", "--linger", "0.5"],
            timeout_s=150,
        )  # fmt: skip
        seen: dict[str, list[tuple[int, int]]] = {}
        for e in run.of("msg"):
            seen.setdefault(e["group"] or "", []).append((fifo_ids[e["id"]], e["attempt"]))
        assert sorted(seen) == ["g0", "g1", "g2", "g3"], kind
        again = 2 if kind == "simple" else 1
        for g, events in seen.items():
            first = int(g[1:])
            want = [(i, a) for i in range(first, 12, 4) for a in (1, again)]
            assert events == want, (kind, g, events)


def test_timer_messages_from_python_and_node_arrive_when_due(
    grpc_cluster: Cluster, rmq5: ScriptClient, nodejs: ScriptClient
) -> None:
    """``delivery_timestamp`` (epoch ms in ``Timestamp.seconds`` from the Python 5.1.2
    client, a proper Timestamp from Node.js) becomes a timer message: invisible until due,
    then received with its delivery time."""
    topic = "PopDelay"
    _setup(grpc_cluster, topic, "DELAY")
    endpoint = _endpoint(grpc_cluster)
    py = rmq5.run("producer.py", ["--endpoint", endpoint, "--topic", topic, "--count", "4",
                                  "--mode", "delay", "--delay-ms", "3000", "--text"])  # fmt: skip
    node = nodejs.run("producer.js", ["--endpoint", endpoint, "--topic", topic, "--count", "4",
                                      "--mode", "delay", "--delay-ms", "3000"])  # fmt: skip
    sent_at = {e["id"]: e["at"] for e in py.of("sent") + node.of("sent")}
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", endpoint, "--group", "CG_DELAY", "--topic", topic, "--expect", "8",
         "--timeout", "40", "--linger", "0"],
        timeout_s=90,
    )  # fmt: skip
    got = run.of("msg")
    assert sorted(e["id"] for e in got) == sorted(sent_at)
    for e in got:
        due_ms = e["delivery"]
        assert abs(due_ms / 1000 - (sent_at[e["id"]] + 3.0)) < 1.5  # what the client asked
        assert e["at"] >= due_ms / 1000 - 0.05  # never before it is due
        assert e["at"] - due_ms / 1000 < 10.0
