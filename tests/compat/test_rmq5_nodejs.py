"""The real npm ``rocketmq-client-nodejs`` 1.0.8 (gRPC, the machine's Node.js) against
``ariane broker`` with ``grpcServerPort``. Its producer never finishes starting unless the
settings reply carries an exponential backoff, so a passing start is itself a check of the
Telemetry exchange; what it sends is read back through the remoting protocol byte for byte."""

from __future__ import annotations

import hashlib

import pytest

from ariane.common import properties as p
from tests.compat.conftest import ScriptClient
from tests.support.cluster import Cluster
from tests.support.grpc5 import body_of, create_topic, pull_all

pytestmark = [pytest.mark.compat, pytest.mark.integration]


def _endpoint(cluster: Cluster) -> str:
    return cluster.brokers["broker-a"].ready["grpc"]


def test_node_producer_normal_and_fifo(grpc_cluster: Cluster, nodejs: ScriptClient) -> None:
    broker = grpc_cluster.broker_addr()
    create_topic(broker, "NodeNormal", "NORMAL")
    create_topic(broker, "NodeFifo", "FIFO")
    sizes = [3, 5000, 1024 * 1024]
    run = nodejs.run(
        "producer.js",
        ["--endpoint", _endpoint(grpc_cluster), "--topic", "NodeNormal", "--count", "90",
         "--sizes", ",".join(map(str, sizes))],
    )  # fmt: skip
    sent = {e["i"]: e["id"] for e in run.of("sent")}
    got = pull_all(broker, "NodeNormal", 4)
    assert len(got) == 90
    for msg in got:
        i = int(msg.properties["i"])
        assert msg.body == body_of(i, sizes[i % len(sizes)])
        assert msg.msg_id == sent[i]
        assert msg.tags == f"Tag{i % 3}"
        assert msg.keys == [f"key-{i}"]
        assert msg.properties["utf"] == "h\u00e9"
    nodejs.run(
        "producer.js",
        ["--endpoint", _endpoint(grpc_cluster), "--topic", "NodeFifo", "--count", "30",
         "--mode", "fifo"],
    )  # fmt: skip
    queues: dict[str, set[int]] = {}
    order: dict[str, list[int]] = {}
    for msg in sorted(pull_all(broker, "NodeFifo", 4), key=lambda m: m.queue_offset):
        group = msg.properties[p.SHARDING_KEY]
        queues.setdefault(group, set()).add(msg.queue_id)
        order.setdefault(group, []).append(int(msg.properties["i"]))
    assert {g: len(q) for g, q in queues.items()} == {"g0": 1, "g1": 1, "g2": 1}
    assert all(seq == sorted(seq) and len(seq) == 10 for seq in order.values())


def test_node_transactions_commit_and_check_back(
    grpc_cluster: Cluster, nodejs: ScriptClient
) -> None:
    broker = grpc_cluster.broker_addr()
    create_topic(broker, "NodeTx", "TRANSACTION")
    endpoint = _endpoint(grpc_cluster)
    nodejs.run("producer.js", ["--endpoint", endpoint, "--topic", "NodeTx", "--count", "3",
                               "--mode", "commit"])  # fmt: skip
    checks = nodejs.run(
        "producer.js",
        ["--endpoint", endpoint, "--topic", "NodeTx", "--count", "4", "--mode", "check",
         "--linger", "60"],
        timeout_s=120,
    )  # fmt: skip
    assert {e["i"] for e in checks.of("checked")} == {0, 1, 2, 3}
    ids = {e["i"]: e["id"] for e in checks.of("sent")}
    visible = {m.msg_id for m in pull_all(broker, "NodeTx", 4)}
    assert len(visible) == 3 + 2
    assert {ids[0], ids[2]} <= visible
    assert not {ids[1], ids[3]} & visible


def test_node_simple_and_push_consumers(grpc_cluster: Cluster, nodejs: ScriptClient) -> None:
    broker = grpc_cluster.broker_addr()
    create_topic(broker, "NodeConsume", "NORMAL")
    endpoint = _endpoint(grpc_cluster)
    sizes = [20, 4000, 1024 * 1024]
    sent = nodejs.run(
        "producer.js",
        ["--endpoint", endpoint, "--topic", "NodeConsume", "--count", "30",
         "--sizes", ",".join(map(str, sizes))],
    )  # fmt: skip
    ids = {e["id"]: e["i"] for e in sent.of("sent")}
    for kind, group in (("simple", "CG_NODE_SIMPLE"), ("push", "CG_NODE_PUSH")):
        run = nodejs.run(
            "consumer.js",
            ["--endpoint", endpoint, "--group", group, "--topic", "NodeConsume", "--kind", kind,
             "--expect", "30", "--fail-times", "1", "--timeout", "60"],
            timeout_s=120,
        )  # fmt: skip
        attempts: dict[str, list[int]] = {}
        for e in run.of("msg"):
            attempts.setdefault(e["id"], []).append(e["attempt"])
            i = ids[e["id"]]
            assert e["sha"] == hashlib.sha256(body_of(i, sizes[i % 3])).hexdigest()
            assert e["tag"] == f"Tag{i % 3}"
            assert e["props"]["i"] == str(i)
            assert not e["corrupted"]
        assert sorted(attempts) == sorted(ids), kind
        assert all(a == [1, 2] for a in attempts.values()), (kind, attempts)
