"""``mqadmin`` group and offset commands against a live cluster with a running consumer:
updateSubGroup, deleteSubGroup, consumerConnection, producerConnection, consumerStatus,
consumerProgress, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset and
queryMsgById's direct consumption."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from ariane.client import Message, SyncProducer
from tests.integration.admin.conftest import Result
from tests.integration.admin.mini_consumer import MiniConsumer
from tests.support.cluster import Cluster
from tests.support.polling import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("admin-consumer")]

Cli = Callable[..., Result]
TOPIC = "CliConsumed"
GROUP = "cli_group"


def progress(cli: Cli, group: str) -> dict[int, dict[str, int]]:
    r = cli("consumerProgress", "-g", group, "--json")
    if r.exit_code != 0:
        return {}
    return {q["queueId"]: q for q in r.json()["queues"] if q["topic"] == TOPIC}


@pytest.fixture(scope="module")
def producer(cluster: Cluster) -> Iterator[SyncProducer]:
    with SyncProducer("cli_producer", namesrv_addr=cluster.namesrv_addr) as p:
        yield p


def test_groups_progress_and_offsets(cli: Cli, cluster: Cluster, producer: SyncProducer) -> None:
    assert (
        cli("updateTopic", "-t", TOPIC, "-c", "DefaultCluster", "-r", "2", "-w", "2").exit_code == 0
    )
    wait_for(lambda: cli("topicRoute", "-t", TOPIC), lambda x: x.exit_code == 0)
    r = cli(
        "updateSubGroup", "-g", GROUP, "-c", "DefaultCluster", "-r", "5", "-o", "true", "--json"
    )
    config = r.json()["config"]
    assert (config["retryMaxTimes"], config["consumeMessageOrderly"]) == (5, True)

    results = []
    for i in range(10):
        results.append(producer.send(Message(TOPIC, f"m{i}".encode(), keys=f"k{i}")))
        time.sleep(0.005)

    consumer = MiniConsumer(cluster.namesrv_addr, GROUP, TOPIC)
    consumer.start()
    try:
        wait_for(consumer.bodies, lambda b: len(b) >= 10)
        assert sorted(consumer.bodies()) == sorted(f"m{i}".encode() for i in range(10))

        # consumerProgress: the diff goes to 0 once the consumer committed
        queues = wait_for(
            lambda: progress(cli, GROUP),
            lambda q: len(q) == 2 and all(v["diff"] == 0 for v in q.values()),
        )
        assert sum(q["brokerOffset"] for q in queues.values()) == 10
        assert all(q["diff"] == 0 and q["lastTimestamp"] > 0 for q in queues.values())
        text = cli("consumerProgress", "-g", GROUP).stdout
        assert "Consume Diff Total: 0" in text
        assert TOPIC in text
        # without -g the groups come from the NameServer's %RETRY% topics; the broker made
        # this group's at the consumer's heartbeat and registers it in the background
        summary = wait_for(
            lambda: cli("consumerProgress", "--json").json()["groups"],
            lambda groups: any(g["group"] == GROUP for g in groups),
        )
        (mine,) = [g for g in summary if g["group"] == GROUP]
        assert (mine["count"], mine["diffTotal"], mine["messageModel"]) == (1, 0, "CLUSTERING")

        # connections and the consumer's own report
        conn = cli("consumerConnection", "-g", GROUP, "--json").json()
        (client,) = conn["connections"]
        assert conn["subscriptions"][TOPIC]["subString"] == "*"
        assert conn["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
        status = cli("consumerStatus", "-g", GROUP, "--json").json()
        assert status["clients"][client["clientId"]]["properties"]["consumerGroup"] == GROUP
        assert (
            "consumerGroup" in cli("consumerStatus", "-g", GROUP, "-i", client["clientId"]).stdout
        )
        # the producer's first heartbeat to the broker goes in the background once its route
        # names the broker: until then the group is "not online"
        producers = wait_for(
            lambda: cli("producerConnection", "-g", "cli_producer", "-t", TOPIC, "--json"),
            lambda r: r.exit_code == 0,
        ).json()
        assert len(producers["connections"]) == 1

        # queryMsgById -g -d: the broker relays the message to that client
        direct = cli(
            "queryMsgById",
            "-i",
            results[3].offset_msg_id,
            "-g",
            GROUP,
            "-d",
            client["clientId"],
            "--json",
        ).json()
        assert direct["consumeResult"]["consumeResult"] == "CR_SUCCESS"

        # resetOffsetByTime: the running consumer re-reads what was stored since then
        before = len(consumer.bodies())
        since_ms = wait_for(
            lambda: cli("queryMsgByUniqueKey", "-t", TOPIC, "-i", results[6].msg_id, "--json"),
            lambda x: x.exit_code == 0,
        ).json()["messages"][0]["storeTimestamp"]
        reset = cli(
            "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(since_ms), "--json"
        ).json()
        assert reset["mode"] == "broker"
        # the broker's RESET_CONSUMER_CLIENT_OFFSET is one-way: it may land after the answer
        assert wait_for(lambda: list(consumer.resets), bool), "the consumer was not notified"
        reread = wait_for(lambda: consumer.bodies()[before:], lambda b: len(b) >= 4)
        expected = {f"m{i}".encode() for i in range(6, 10)}
        assert set(reread) == expected
        wait_for(lambda: progress(cli, GROUP), lambda q: all(v["diff"] == 0 for v in q.values()))

        # skipAccumulatedMessage: lag disappears without consuming
        consumer.pause()
        for i in range(10, 15):
            producer.send(Message(TOPIC, f"m{i}".encode()))
        lagging = wait_for(
            lambda: progress(cli, GROUP), lambda q: sum(v["diff"] for v in q.values()) == 5
        )
        assert sum(v["diff"] for v in lagging.values()) == 5
        skipped = cli("skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC, "--json").json()
        assert sum(o["offset"] for o in skipped["offsets"]) == 15
        assert all(v["diff"] == 0 for v in progress(cli, GROUP).values())
        # the consumer learns its new offsets by the broker's one-way
        # RESET_CONSUMER_CLIENT_OFFSET: resumed before that, it would pull from its old ones
        resets = wait_for(lambda: list(consumer.resets), lambda r: len(r) == 2)
        assert sum(resets[-1].values()) == 15
        seen = len(consumer.bodies())
        consumer.paused.clear()
    finally:
        consumer.stop()
    assert len(consumer.bodies()) == seen  # nothing skipped was delivered

    # cloneGroupOffset copies the committed offsets to another group
    assert cli("updateSubGroup", "-g", "cli_clone", "-c", "DefaultCluster").exit_code == 0
    cloned = cli("cloneGroupOffset", "-s", GROUP, "-d", "cli_clone", "-t", TOPIC, "--json").json()
    assert cloned["brokers"] == [cluster.broker_addr()]
    copy = progress(cli, "cli_clone")
    assert {q: v["consumerOffset"] for q, v in copy.items()} == {
        q: v["consumerOffset"] for q, v in progress(cli, GROUP).items()
    }

    # a group without online consumers: the broker resets it (server-side reset offset), or
    # without that the CLI commits the offsets itself (RocketMQ's resetOffsetByTimeOld)
    offline = cli("resetOffsetByTime", "-g", "cli_clone", "-t", TOPIC, "-s", "0", "--json").json()
    assert offline["mode"] == "broker"
    assert all(v["consumerOffset"] == 0 for v in progress(cli, "cli_clone").values())
    addr = cluster.broker_addr()
    off = cli("updateBrokerConfig", "-b", addr, "-k", "useServerSideResetOffset", "-v", "false")
    assert off.exit_code == 0, off.stderr
    try:
        direct = cli("resetOffsetByTime", "-g", "cli_clone", "-t", TOPIC, "-s", "now", "--json")
        assert direct.json()["mode"] == "direct"
        assert all(v["diff"] == 0 for v in progress(cli, "cli_clone").values())
    finally:
        cli("updateBrokerConfig", "-b", addr, "-k", "useServerSideResetOffset", "-v", "true")

    deleted = cli("deleteSubGroup", "-g", "cli_clone", "-b", cluster.broker_addr(), "--json").json()
    assert deleted["brokers"] == [cluster.broker_addr()]
