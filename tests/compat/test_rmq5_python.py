"""The real PyPI ``rocketmq-python-client`` 5.1.2 (gRPC) against ``ariane broker`` with
``grpcServerPort``; what it sends is read back through the 4.x remoting protocol, byte for
byte (both protocols, one store)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ariane.common import properties as p
from tests.compat.conftest import ScriptClient
from tests.support.cluster import Cluster
from tests.support.grpc5 import body_of, create_topic, pull_all

pytestmark = [pytest.mark.compat, pytest.mark.integration]


def _endpoint(cluster: Cluster) -> str:
    return cluster.brokers["broker-a"].ready["grpc"]


def test_python_producer_messages_reach_remoting_consumers_byte_for_byte(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "Rmq5Normal"
    create_topic(grpc_cluster.broker_addr(), topic, "NORMAL")
    sizes = [1, 100, 4096, 70_000]
    count = 2000
    run = rmq5.run(
        "producer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--topic", topic, "--count", str(count),
         "--sizes", ",".join(map(str, sizes)), "--big-every", "100"],
        timeout_s=240,
    )  # fmt: skip
    sent = {e["i"]: e["id"] for e in run.of("sent")}
    assert sorted(sent) == list(range(count))
    got = pull_all(grpc_cluster.broker_addr(), topic, 4)
    assert len(got) == count
    for msg in got:
        i = int(msg.properties["i"])
        size = 1024 * 1024 if i % 100 == 99 else sizes[i % len(sizes)]
        assert msg.body == body_of(i, size)
        assert msg.msg_id == sent[i]
        assert msg.tags == f"Tag{i % 3}"
        assert msg.keys == [f"key-{i}"]
        assert msg.properties["utf"] == "h\u00e9"
    # every queue was used (round robin), and offsets are dense per queue
    per_queue: dict[int, list[int]] = {}
    for msg in got:
        per_queue.setdefault(msg.queue_id, []).append(msg.queue_offset)
    assert sorted(per_queue) == [0, 1, 2, 3]
    assert all(offsets == list(range(len(offsets))) for offsets in per_queue.values())


def test_python_fifo_producer_keeps_each_group_in_one_queue_in_order(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "Rmq5Fifo"
    create_topic(grpc_cluster.broker_addr(), topic, "FIFO")
    run = rmq5.run(
        "producer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--topic", topic, "--count", "60",
         "--mode", "fifo", "--groups", "3"],
    )  # fmt: skip
    assert len(run.of("sent")) == 60
    got = pull_all(grpc_cluster.broker_addr(), topic, 4)
    by_group: dict[str, list[tuple[int, int, int]]] = {}
    for msg in got:
        group = msg.properties[p.SHARDING_KEY]
        by_group.setdefault(group, []).append(
            (msg.queue_id, msg.queue_offset, int(msg.properties["i"]))
        )
    assert sorted(by_group) == ["g0", "g1", "g2"]
    for group, entries in by_group.items():
        assert len({q for q, _, _ in entries}) == 1, group
        in_offset_order = [i for _, _, i in sorted(entries)]
        assert in_offset_order == sorted(in_offset_order)
        assert len(entries) == 20


def test_python_producer_send_of_the_wrong_type_is_refused(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "Rmq5Typed"
    create_topic(grpc_cluster.broker_addr(), topic, "NORMAL")
    refused = rmq5.spawn(
        "producer.py",
        ["--endpoint", _endpoint(grpc_cluster), "--topic", topic, "--count", "1",
         "--mode", "fifo"],
    )  # fmt: skip
    refused.wait(120)
    assert refused.proc.returncode != 0
    # the client checks the route's accept_message_types before sending
    assert "current message type not match with queue accept message types" in refused.tail()
    assert pull_all(grpc_cluster.broker_addr(), topic, 4) == []


def test_python_transactions_commit_rollback_and_check_back(
    grpc_cluster: Cluster, rmq5: ScriptClient
) -> None:
    topic = "Rmq5Tx"
    create_topic(grpc_cluster.broker_addr(), topic, "TRANSACTION")
    endpoint = _endpoint(grpc_cluster)
    rmq5.run("producer.py", ["--endpoint", endpoint, "--topic", topic, "--count", "4",
                             "--mode", "commit"])  # fmt: skip
    rmq5.run("producer.py", ["--endpoint", endpoint, "--topic", topic, "--count", "3",
                             "--mode", "rollback"])  # fmt: skip
    checks = rmq5.run(
        "producer.py",
        ["--endpoint", endpoint, "--topic", topic, "--count", "4", "--mode", "check",
         "--linger", "60"],
        timeout_s=120,
    )  # fmt: skip
    checked = {e["i"] for e in checks.of("checked")}
    assert checked == {0, 1, 2, 3}
    check_ids = {e["i"]: e["id"] for e in checks.of("sent")}
    visible = pull_all(grpc_cluster.broker_addr(), topic, 4)
    ids = sorted(m.msg_id for m in visible)
    committed_by_check = {check_ids[0], check_ids[2]}
    # 4 committed by the producer, 0 rolled back, 2 of 4 committed by the check-back
    assert len(ids) == 6
    assert committed_by_check <= set(ids)
    assert not {check_ids[1], check_ids[3]} & set(ids)


ACL_RULES = """
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: grpcadmin
    secretKey: grpc-admin-secret
    admin: true
  - accessKey: grpcuser1
    secretKey: grpc-user-secret
    defaultTopicPerm: DENY
    topicPerms: [AclGrpcOk=PUB, AclGrpcDenied=DENY]
  - accessKey: grpcreader1
    secretKey: grpc-reader-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclGrpcOk=SUB]
    groupPerms: [CG_ACL_READ=SUB, CG_ACL_NODE=SUB]
"""


def test_python_clients_under_acl(tmp_path: Path, rmq5: ScriptClient, nodejs: ScriptClient) -> None:
    """5.x clients sign with MQv2-HMAC-SHA1; the broker's plain ACL decides per topic."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL_RULES, encoding="utf-8")
    cluster = Cluster(tmp_path / "cluster")
    try:
        cluster.start(grpcServerPort=0, aclEnable="true", rocketmqHome=home)
        broker = cluster.broker_addr()
        for topic in ("AclGrpcOk", "AclGrpcDenied"):
            create_topic(broker, topic, "NORMAL", signed_by=("grpcadmin", "grpc-admin-secret"))
        endpoint = cluster.brokers["broker-a"].ready["grpc"]
        user = ["--ak", "grpcuser1", "--sk", "grpc-user-secret"]
        ok = rmq5.run("producer.py", ["--endpoint", endpoint, "--topic", "AclGrpcOk",
                                      "--count", "3", *user])  # fmt: skip
        assert len(ok.of("sent")) == 3
        for topic, creds, reason in (
            (
                "AclGrpcDenied",
                user,
                "40100, org.apache.rocketmq.acl.common.AclException: No "
                "permission for topic:AclGrpcDenied",
            ),
            # the route is refused (UNAUTHORIZED): the client reports no route
            ("AclGrpcOk", ["--ak", "grpcuser1", "--sk", "wrong-secret"], "failed to fetch topic"),
            ("AclGrpcOk", [], "40100, org.apache.rocketmq.acl.common.AclException: No accessKey"),
        ):
            refused = rmq5.spawn("producer.py", ["--endpoint", endpoint, "--topic", topic,
                                                 "--count", "1", *creds])  # fmt: skip
            refused.wait(120)
            assert refused.proc.returncode != 0, refused.tail()
            assert reason in refused.tail()
        got = pull_all(broker, "AclGrpcOk", 4, signed_by=("grpcadmin", "grpc-admin-secret"))
        assert len(got) == 3
        _consume_under_acl(rmq5, endpoint, {m.msg_id: m.body for m in got})
        _node_consume_under_acl(nodejs, endpoint, {m.msg_id: m.body for m in got})
    finally:
        cluster.stop()


def _node_consume_under_acl(nodejs: ScriptClient, endpoint: str, sent: dict[str, bytes]) -> None:
    """The Node.js SimpleConsumer signs too: its own group receives and acks every message;
    without SUB on the topic it starts but its receive is refused with the broker's reason."""
    args = ["--endpoint", endpoint, "--topic", "AclGrpcOk", "--timeout", "60"]
    # without SUB: the settings are answered all the same (the Node.js client waits for them
    # with no time limit), so it starts and its receive is refused with the broker's reason
    refused = nodejs.spawn(
        "consumer.js",
        [*args, "--group", "CG_ACL_NODE", "--ak", "grpcuser1", "--sk", "grpc-user-secret"],
    )
    refused.wait(120)
    assert refused.proc.returncode != 0, refused.tail()
    assert "No permission for topic:AclGrpcOk" in refused.tail()
    run = nodejs.run(
        "consumer.js",
        [*args, "--group", "CG_ACL_NODE", "--expect", str(len(sent)), "--ak", "grpcreader1",
         "--sk", "grpc-reader-secret"],
        timeout_s=120,
    )  # fmt: skip
    got = {e["id"]: e["sha"] for e in run.of("msg")}
    assert got == {i: hashlib.sha256(b).hexdigest() for i, b in sent.items()}
    assert run.of("done") == [{"event": "done", "acked": len(sent)}]


def _consume_under_acl(rmq5: ScriptClient, endpoint: str, sent: dict[str, bytes]) -> None:
    """ReceiveMessage, ChangeInvisibleDuration and AckMessage are authorized through the
    broker's POP requests signed with the caller's account: the reader receives every message
    (the first delivery given back, the second acked through the POP retry topic); an account
    without SUB on the topic, or on the group, receives nothing and is told why."""
    reader = ["--ak", "grpcreader1", "--sk", "grpc-reader-secret"]
    for group, creds, reason in (
        ("CG_ACL_READ", ["--ak", "grpcuser1", "--sk", "grpc-user-secret"],
         "No permission for topic:AclGrpcOk"),
        ("CG_ACL_OTHER", reader, "No default permission for group:CG_ACL_OTHER"),
    ):  # fmt: skip
        refused = rmq5.run(
            "consumer.py",
            ["--endpoint", endpoint, "--group", group, "--topic", "AclGrpcOk", "--expect", "1",
             "--timeout", "3", "--linger", "0", *creds],
            timeout_s=120,
        )  # fmt: skip
        assert refused.of("msg") == []
        assert any(reason in e["error"] for e in refused.of("error")), refused.tail()
    run = rmq5.run(
        "consumer.py",
        ["--endpoint", endpoint, "--group", "CG_ACL_READ", "--topic", "AclGrpcOk", "--expect",
         str(len(sent)), "--fail-times", "1", "--nack", "--timeout", "60", "--linger", "0",
         *reader],
        timeout_s=120,
    )  # fmt: skip
    assert run.of("error") == []
    attempts: dict[str, list[int]] = {}
    for e in run.of("msg"):
        attempts.setdefault(e["id"], []).append(e["attempt"])
        assert e["sha"] == hashlib.sha256(sent[e["id"]]).hexdigest()
    assert attempts == {i: [1, 2] for i in sent}
    assert run.of("done") == [{"event": "done", "acked": len(sent)}]
