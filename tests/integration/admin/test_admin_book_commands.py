"""Issue 20 item 7: the book's remaining mqadmin commands against a live cluster (one per
module): allocateMQ, updateOrderConf, printMsgByQueue, queryCq, checkMsgSendRT, clusterRT,
sendMsgStatus, each in text and --json, with their one-line errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest

from ariane.client import (
    ConsumeConcurrentlyStatus,
    Message,
    MessageQueue,
    SyncAdmin,
    SyncProducer,
    SyncPushConsumer,
)
from ariane.common.hashing import tags_code
from tests.integration.admin.conftest import Result
from tests.support.cluster import Cluster
from tests.support.polling import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("admin-book")]

Cli = Callable[..., Result]
TAGS = ["A", "A", "B", "A", "B"]


def one_error_line(result: Result, *needles: str) -> str:
    assert result.exit_code != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def topics(cluster: Cluster) -> Iterator[dict[str, list[str]]]:
    """BookQ (1 queue) holding five tagged messages; BookRT (2 queues) empty; BookAlloc (4)."""
    with SyncAdmin(namesrv_addr=cluster.namesrv_addr) as admin:
        for topic, queues in (("BookQ", 1), ("BookRT", 2), ("BookAlloc", 4)):
            admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        for topic in ("BookQ", "BookRT", "BookAlloc"):
            assert wait_for(lambda t=topic: _routed(admin, t), bool)  # type: ignore[misc]
    with SyncProducer("book_pg", namesrv_addr=cluster.namesrv_addr) as producer:
        ids = [
            producer.send(Message("BookQ", f"body-{i}".encode(), tags=tag)).msg_id
            for i, tag in enumerate(TAGS)
        ]
    with SyncAdmin(namesrv_addr=cluster.namesrv_addr) as admin:  # dispatched to the queue
        mq = MessageQueue("BookQ", "broker-a", 0)
        assert wait_for(lambda: admin.max_offset(mq), lambda n: n == len(TAGS)) == len(TAGS)
    return {"BookQ": ids}


def _routed(admin: SyncAdmin, topic: str) -> bool:
    try:
        admin.topic_route(topic)
    except Exception:
        return False
    return True


def test_allocate_mq(cli: Cli, topics: object) -> None:
    data = cli("allocateMQ", "-t", "BookAlloc", "-i", "10.0.0.1,10.0.0.2,10.0.0.3", "--json").json()
    got = {ip: [(q["brokerName"], q["queueId"]) for q in qs] for ip, qs in data["result"].items()}
    assert got == {
        "10.0.0.1": [("broker-a", 0), ("broker-a", 1)],
        "10.0.0.2": [("broker-a", 2)],
        "10.0.0.3": [("broker-a", 3)],
    }
    text = cli("allocateMQ", "-t", "BookAlloc", "-i", "10.0.0.1,10.0.0.2").stdout
    assert re.search(r"10\.0\.0\.1\s+broker-a\s+0,1", text), text
    assert re.search(r"10\.0\.0\.2\s+broker-a\s+2,3", text), text
    one_error_line(cli("allocateMQ", "-t", "NoSuchTopic", "-i", "1.1.1.1"), "does not exist")
    one_error_line(cli("allocateMQ", "-t", "BookAlloc", "-i", " , "), "-i names no client")


def test_update_order_conf(cli: Cli, topics: object) -> None:
    r = cli("updateOrderConf", "-t", "BookAlloc", "-m", "put", "-v", "broker-a:4")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == "update orderConf success. topic=[BookAlloc], orderConf=[broker-a:4]"
    got = cli("updateOrderConf", "-t", "BookAlloc", "-m", "get", "--json").json()
    assert got == {"topic": "BookAlloc", "method": "get", "orderConf": "broker-a:4"}
    kv = cli("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "Other", "-v", "broker-a:2")
    assert kv.exit_code == 0, kv.stderr  # the same namespace, as updateTopic -o writes it
    assert (
        cli("updateOrderConf", "-t", "Other", "-m", "get", "--json").json()["orderConf"]
        == "broker-a:2"
    )
    r = cli("updateOrderConf", "-t", "BookAlloc", "-m", "delete")
    assert r.stdout.strip() == "delete orderConf success. topic=[BookAlloc]"
    assert (
        cli("updateOrderConf", "-t", "BookAlloc", "-m", "get", "--json").json()["orderConf"] is None
    )
    assert "has no order conf" in cli("updateOrderConf", "-t", "BookAlloc", "-m", "get").stdout
    line = one_error_line(cli("updateOrderConf", "-t", "BookAlloc", "-m", "put", "-v", "a:x"))
    assert "bad order conf item 'a:x'" in line
    one_error_line(cli("updateOrderConf", "-t", "BookAlloc", "-m", "put"), "please set orderConf")
    one_error_line(cli("updateOrderConf", "-t", "BookAlloc", "-m", "post"), "'post'")


def test_print_msg_by_queue(cli: Cli, topics: dict[str, list[str]]) -> None:
    base = ("printMsgByQueue", "-t", "BookQ", "-a", "broker-a", "-i", "0")
    data = cli(*base, "-p", "true", "-d", "true", "-f", "true", "--json").json()
    assert (data["count"], data["minOffset"], data["maxOffset"]) == (5, 0, 5)
    assert [m["msgId"] for m in data["messages"]] == topics["BookQ"]
    assert [m["body"] for m in data["messages"]] == [f"body-{i}" for i in range(5)]
    assert [m["queueOffset"] for m in data["messages"]] == [0, 1, 2, 3, 4]
    assert data["tagCounts"] == {"A": 3, "B": 2}
    only_b = cli(*base, "-s", "B", "-p", "true", "--json").json()
    assert [m["queueOffset"] for m in only_b["messages"]] == [2, 4]
    assert "body" not in only_b["messages"][0]
    quiet = cli(*base)
    assert quiet.stdout.strip() == "5 message(s) in offsets [0, 5) of BookQ@broker-a:0"
    counted = cli(*base, "-f", "true").stdout
    assert re.search(r"A\s+3", counted), counted
    assert re.search(r"B\s+2", counted), counted
    one_error_line(cli("printMsgByQueue", "-t", "BookQ", "-a", "broker-a", "-i", "7"), "no such")
    one_error_line(cli(*base, "-b", "yesterday"), "timestamp")


def test_query_cq(cli: Cli, cluster: Cluster, topics: object) -> None:
    data = cli("queryCq", "-t", "BookQ", "-q", "0", "-i", "1", "-c", "3", "--json").json()
    assert (data["minQueueIndex"], data["maxQueueIndex"]) == (0, 5)
    assert data["brokerAddr"] == cluster.broker_addr()
    entries = data["entries"]
    assert [e["index"] for e in entries] == [1, 2, 3]
    assert [e["tagsCode"] for e in entries] == [tags_code(t) for t in TAGS[1:4]]
    offsets = [e["physicOffset"] for e in entries]
    assert offsets == sorted(offsets)
    assert all(e["physicSize"] > 0 for e in entries)
    assert offsets[1] == offsets[0] + entries[0]["physicSize"]
    # an online group's filter: which entries it would get
    consumer = SyncPushConsumer("book_cq_group", namesrv_addr=cluster.namesrv_addr)
    consumer.subscribe("BookQ", "A")
    consumer.register_message_listener(lambda m, c: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        seen = cli(
            "queryCq", "-t", "BookQ", "-q", "0", "-i", "0", "-g", "book_cq_group", "--json"
        ).json()
    assert [e["eval"] for e in seen["entries"]] == [t == "A" for t in TAGS]
    assert seen["filterData"] == "TAG: A"
    assert seen["subscriptionData"]["subString"] == "A"
    offline = cli("queryCq", "-t", "BookQ", "-q", "0", "-i", "0", "-g", "nobody", "--json")
    assert offline.json()["filterData"] == "nobody@BookQ is not online!"
    text = cli("queryCq", "-t", "BookQ", "-q", "0", "-i", "4").stdout
    assert "Queue data: max: 5, min: 0" in text
    past = cli("queryCq", "-t", "BookQ", "-q", "0", "-i", "9", "-b", cluster.broker_addr())
    assert past.exit_code == 0
    assert "Index 9 of 0@BookQ is not exist!" in past.stdout
    one_error_line(cli("queryCq", "-t", "BookQ", "-q", "3", "-i", "0"), "3@BookQ is not exist!")
    one_error_line(cli("queryCq", "-t", "BookQ", "-q", "x", "-i", "0"), "'x'")


def test_check_msg_send_rt(cli: Cli, topics: object) -> None:
    data = cli("checkMsgSendRT", "-t", "BookRT", "-a", "4", "-s", "64", "--json").json()
    assert [(s["queueId"], s["ok"]) for s in data["sends"]] == [
        (0, True), (1, True), (0, True), (1, True)
    ]  # fmt: skip
    assert data["failed"] == 0
    assert data["avgRtMs"] > 0

    # stored: two in each queue (visible once the broker dispatched them)
    def max_offsets() -> list[int]:
        status = cli("topicStatus", "-t", "BookRT", "--json").json()
        return [q["maxOffset"] for q in status["queues"]]

    assert wait_for(max_offsets, lambda offsets: offsets == [2, 2]) == [2, 2]
    text = cli("checkMsgSendRT", "-t", "BookRT", "-a", "2").stdout
    assert re.search(r"Avg RT: \d+\.\d\d ms \(0 failed\)", text), text
    one_error_line(cli("checkMsgSendRT", "-t", "BookRT", "-s", "0"), "-s")


def test_cluster_rt(cli: Cli, topics: object) -> None:
    data = cli("clusterRT", "-a", "3", "-s", "32", "--json").json()
    ((row,),) = [[r for r in data["brokers"] if r["brokerName"] == "broker-a"]]
    assert (row["cluster"], row["successCount"], row["failCount"]) == ("DefaultCluster", 3, 0)
    assert row["rtMs"] > 0
    tlog = cli("clusterRT", "-a", "2", "-p", "true", "-m", "room1", "-c", "DefaultCluster")
    assert tlog.exit_code == 0, tlog.stderr
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|DefaultCluster\|broker-a\|\d+", tlog.stdout.strip()
    ), tlog.stdout
    one_error_line(cli("clusterRT", "-c", "Nope", "-a", "1"), "cluster 'Nope' does not exist")


def test_send_msg_status(cli: Cli, topics: object) -> None:
    data = cli("sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "20", "--json").json()
    assert [(s["sendStatus"], s["brokerName"], s["error"]) for s in data["sends"]] == [
        ("SEND_OK", "broker-a", None)
    ] * 3
    offsets = [s["queueOffset"] for s in data["sends"]]
    assert offsets == sorted(offsets)
    assert len(set(offsets)) == 3
    text = cli("sendMsgStatus", "-b", "broker-a", "-c", "1").stdout
    assert "SEND_OK" in text
    assert "Avg RT:" in text
    one_error_line(cli("sendMsgStatus", "-b", "no-such-broker", "-c", "1"), "no-such-broker")
