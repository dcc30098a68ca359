"""A real ``ariane broker`` process with a real NameServer: persistence across restarts and
crashes, routes following the broker's life, long polling, and hostile or vanishing peers."""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ariane.common.record import decode_records
from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import KVTable, TopicConfig
from ariane.remoting.protocol.codec import encode
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.route import TopicRouteData
from tests.support.cluster import Cluster
from tests.support.polling import wait_until
from tests.support.rpc import pull, pull_request, request, send_message

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster")
    try:
        yield c.start()
    finally:
        c.stop()


def route(cluster: Cluster, topic: str) -> TopicRouteData | None:
    r = request(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return TopicRouteData.decode(r.body) if r.code == ResponseCode.SUCCESS else None


def runtime_info(addr: str) -> dict[str, str]:
    r = request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert r.body is not None
    return KVTable.decode(r.body).table


def max_offset(addr: str, topic: str, queue_id: int) -> int:
    r = request(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    return int(r.ext_fields.get("offset", "-1"))


def bodies(response: RemotingCommand) -> list[bytes]:
    return [m.body for m in decode_records(response.body or b"")]


def test_restart_keeps_topics_groups_offsets_and_messages(cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    create = h.CreateTopicRequestHeader(
        topic="Kept", default_topic="TBW102", read_queue_nums=2, write_queue_nums=2, perm=6,
        topic_filter_type="SINGLE_TAG",
    )  # fmt: skip
    assert request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext_fields()).code == 0
    for i in range(20):
        assert send_message(addr, "Kept", f"m{i}".encode(), queue_id=i % 2).code == 0
    update = {"consumerGroup": "CG", "topic": "Kept", "queueId": "1", "commitOffset": "7"}
    assert request(addr, RequestCode.UPDATE_CONSUMER_OFFSET, update).code == 0
    store = cluster.root / "broker-a" / "store"
    cluster.restart_broker()
    addr = cluster.broker_addr()
    r = request(addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Kept"})
    assert r.code == ResponseCode.SUCCESS
    assert TopicConfig.from_json(json.loads(r.body or b"")).read_queue_nums == 2
    query = {"consumerGroup": "CG", "topic": "Kept", "queueId": "1"}
    assert request(addr, RequestCode.QUERY_CONSUMER_OFFSET, query).ext_fields["offset"] == "7"
    assert bodies(pull(addr, "Kept", "CG", queue_id=1)) == [
        f"m{i}".encode() for i in range(1, 20, 2)
    ]
    r = request(addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "CG"})
    assert r.code == ResponseCode.SUCCESS
    old = cluster.brokers["broker-a"]
    assert old.stop() == 0
    assert not (store / "abort").exists(), "a graceful stop removes the abort file"
    assert (store / "config" / "consumerOffset.json").exists()


def pull_all(addr: str, topic: str, group: str, queue_id: int = 0) -> list[bytes]:
    """Every message of one queue, pulled from offset 0 to the end."""
    got: list[bytes] = []
    while True:
        r = pull(addr, topic, group, queue_id=queue_id, offset=len(got), max_nums=32)
        if r.code != ResponseCode.SUCCESS:
            assert r.code == ResponseCode.PULL_NOT_FOUND, r
            return got
        got += bodies(r)


def test_crash_restart_recovers_messages_and_topics(cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    for i in range(50):
        r = send_message(addr, "Crashy", f"c{i}".encode())
        assert r.code == 0
        assert r.ext_fields["queueOffset"] == str(i)
    # killed at once: the auto-created topic may not be in topics.json yet, the broker
    # restores the configuration of topics that have messages
    cluster.restart_broker(crash=True)
    addr = cluster.broker_addr()
    assert pull_all(addr, "Crashy", "CG") == [f"c{i}".encode() for i in range(50)]
    assert request(addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Crashy"}).code == 0
    r = send_message(addr, "Crashy", b"after")
    assert r.code == 0
    assert r.ext_fields["queueOffset"] == "50"


def test_routes_follow_the_broker(cluster: Cluster) -> None:
    tbw = route(cluster, "TBW102")
    assert tbw is not None
    assert tbw.broker_datas[0].broker_addrs[0] == cluster.broker_addr()
    assert send_message(cluster.broker_addr(), "Routed", b"x").code == 0
    assert wait_until(lambda: route(cluster, "Routed") is not None, 10)
    cluster.brokers["broker-a"].kill()
    assert wait_until(lambda: route(cluster, "Routed") is None, 10), "dead broker still routed"
    assert route(cluster, "TBW102") is None
    cluster.start_broker("broker-a")
    assert wait_until(lambda: route(cluster, "Routed") is not None, 10)
    assert cluster.brokers["broker-a"].stop() == 0
    assert route(cluster, "Routed") is None, "a stopped broker unregisters"


def test_broker_permission_update_reaches_the_routes(cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    assert send_message(addr, "Perm", b"x").code == 0
    r = request(addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
    assert r.code == ResponseCode.SUCCESS

    def read_only() -> bool:
        rd = route(cluster, "Perm")
        return rd is not None and rd.queue_datas[0].perm == 4

    assert wait_until(read_only, 10)
    assert send_message(addr, "Perm", b"y").code == ResponseCode.NO_PERMISSION
    cluster.restart_broker()
    assert send_message(cluster.broker_addr(), "Perm", b"z").code == ResponseCode.NO_PERMISSION


def test_long_poll_is_answered_soon_after_a_message_arrives(cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    assert send_message(addr, "LP", b"first").code == 0
    # the consume queue is built asynchronously: a pull of offset 1 before "first" is
    # dispatched is "offset moved" (answered at once), not a long poll
    assert wait_until(lambda: max_offset(addr, "LP", 0) == 1, 10)
    answers: list[tuple[float, RemotingCommand]] = []

    def waiter() -> None:
        with BlockingRemotingClient() as client:
            req = pull_request("LP", "CG", offset=1, suspend_ms=15_000)
            response = client.invoke(addr, req, 20_000)
            answers.append((time.monotonic(), response))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert wait_until(lambda: runtime_info(addr)["pullHoldRequests"] == "1", 10)
    sent_at = time.monotonic()
    assert send_message(addr, "LP", b"second").code == 0
    thread.join(20)
    ((answered_at, response),) = answers
    latency_ms = (answered_at - sent_at) * 1000
    print(f"long-poll wake latency: {latency_ms:.1f} ms")
    assert response.code == ResponseCode.SUCCESS
    assert bodies(response) == [b"second"]
    assert latency_ms < 5_000, "answered at its timeout instead of on arrival"


def test_hostile_and_vanishing_peers_do_not_hurt_others(cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    host, port = addr.rsplit(":", 1)
    for i in range(10):
        assert send_message(addr, "Robust", f"r{i}".encode()).code == 0
    rng = random.Random(7)
    for _ in range(20):  # random bytes
        with socket.create_connection((host, int(port))) as s:
            s.sendall(rng.randbytes(rng.randint(1, 4096)))
    with socket.create_connection((host, int(port))) as s:  # oversized frame
        s.sendall(struct.pack(">ii", 0x7FFFFFF0, 20) + b"x" * 64)
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "Robust"}, b"x")
    frame = encode(req)
    with socket.create_connection((host, int(port))) as s:  # half a frame, then gone
        s.sendall(frame[: len(frame) // 2])
    with socket.create_connection((host, int(port))) as s:  # a full request, answer unread
        header = h.SendMessageRequestHeaderV2(
            producer_group="P", topic="Robust", default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
        )  # fmt: skip
        s.sendall(encode(RemotingCommand.request(310, header.to_ext_fields(), b"unread")))
    for _ in range(5):  # suspended pulls, then the client vanishes
        with socket.create_connection((host, int(port))) as s:
            s.sendall(encode(pull_request("Robust", "CG", offset=11, suspend_ms=60_000)))
            time.sleep(0.05)
    assert wait_until(lambda: runtime_info(addr)["pullHoldRequests"] == "0", 10)
    expected = [f"r{i}".encode() for i in range(10)] + [b"unread"]
    assert wait_until(lambda: bodies(pull(addr, "Robust", "CG", max_nums=64)) == expected, 10)
    assert cluster.brokers["broker-a"].proc.poll() is None


def test_a_thousand_idle_connections(cluster: Cluster) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip(f"open file limit {hard} is too low")
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    addr = cluster.broker_addr()
    host, port = addr.rsplit(":", 1)
    with contextlib.ExitStack() as stack:
        socks = [
            stack.enter_context(socket.create_connection((host, int(port)))) for _ in range(1000)
        ]
        assert wait_until(lambda: int(runtime_info(addr)["clientConnections"]) >= 1000, 15)
        started = time.monotonic()
        assert send_message(addr, "Idle", b"still served").code == 0
        print(f"send with 1000 idle connections: {(time.monotonic() - started) * 1000:.1f} ms")
        assert wait_until(lambda: bodies(pull(addr, "Idle", "CG")) == [b"still served"], 10)
        assert len(socks) == 1000
    assert cluster.brokers["broker-a"].proc.poll() is None
    assert wait_until(lambda: int(runtime_info(addr)["clientConnections"]) < 10, 15)


def test_registers_with_every_name_server(tmp_path: Path) -> None:
    from tests.support.cluster import start_broker, start_namesrv

    ns1 = start_namesrv(tmp_path / "ns1")
    ns2 = start_namesrv(tmp_path / "ns2")
    broker = None
    try:
        addrs = f"{ns1.ready['namesrv']};{ns2.ready['namesrv']}"
        broker = start_broker(tmp_path / "b", addrs, {"brokerName": "multi"})
        for ns in (ns1, ns2):
            r = request(
                ns.ready["namesrv"], RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
            )
            assert r.code == ResponseCode.SUCCESS
            assert TopicRouteData.decode(r.body).broker_datas[0].broker_name == "multi"
        assert ns2.stop() == 0
        assert send_message(broker.ready["broker"], "StillUp", b"x").code == 0
    finally:
        if broker is not None:
            assert broker.stop() == 0  # unregistering from a dead NameServer is no failure
        ns1.stop()
        ns2.stop()
    assert os.path.exists(tmp_path / "b" / "store" / "config" / "topics.json")
