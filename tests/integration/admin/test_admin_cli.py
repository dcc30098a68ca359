"""``mqadmin`` against a live NameServer and broker: topics, messages, brokers, NameServer
settings, statistics, write permissions, errors and the console script."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ariane.admin.cli import COMMANDS
from ariane.client import SyncAdmin
from tests.integration.admin.conftest import Result, mqadmin_process
from tests.support.cluster import Cluster
from tests.support.polling import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("admin-cli")]

Cli = Callable[..., Result]


def one_error_line(result: Result, *needles: str) -> str:
    assert result.exit_code != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def route_perm(cli: Cli, topic: str) -> int:
    return int(cli("topicRoute", "-t", topic, "--json").json()["queueDatas"][0]["perm"])


def test_topic_commands(cli: Cli, cluster: Cluster) -> None:
    r = cli("updateTopic", "-t", "CliTopic", "-c", "DefaultCluster", "-r", "3", "-w", "3")
    assert r.exit_code == 0, r.stderr
    assert "create topic CliTopic" in r.stdout
    route = wait_for(
        lambda: cli("topicRoute", "-t", "CliTopic", "--json"), lambda x: x.exit_code == 0
    )
    data = route.json()
    assert [
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"])
        for q in data["queueDatas"]
    ] == [("broker-a", 3, 3, 6)]
    assert data["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.broker_addr()}
    table = cli("topicRoute", "-t", "CliTopic").stdout
    assert "broker-a" in table
    assert "6 (RW-)" in table

    assert "CliTopic" in cli("topicList", "--json").json()["topics"]
    rows = cli("topicList", "-c", "--json").json()["topics"]
    assert {"topic": "CliTopic", "cluster": "DefaultCluster", "consumerGroups": []} in rows
    status = cli("topicStatus", "-t", "CliTopic", "--json").json()
    assert [q["queueId"] for q in status["queues"]] == [0, 1, 2]
    assert cli("topicClusterList", "-t", "CliTopic", "--json").json()["clusters"] == [
        "DefaultCluster"
    ]

    r = cli("updateTopicPerm", "-t", "CliTopic", "-c", "DefaultCluster", "-p", "4")
    assert r.exit_code == 0, r.stderr
    assert wait_for(lambda: route_perm(cli, "CliTopic"), lambda p: p == 4) == 4
    # queues are kept
    assert cli("topicStatus", "-t", "CliTopic", "--json").json()["queues"][2]["queueId"] == 2

    r = cli(
        "updateTopic",
        "-t",
        "CliOrdered",
        "-b",
        cluster.broker_addr(),
        "-w",
        "2",
        "-r",
        "2",
        "-o",
        "true",
    )
    assert r.exit_code == 0, r.stderr
    with SyncAdmin(namesrv_addr=cluster.namesrv_addr) as admin:
        assert admin.get_kv_config("ORDER_TOPIC_CONFIG", "CliOrdered") == "broker-a:2"

    assert cli("deleteTopic", "-t", "CliTopic", "-c", "DefaultCluster").exit_code == 0
    gone = wait_for(lambda: cli("topicRoute", "-t", "CliTopic"), lambda x: x.exit_code != 0)
    one_error_line(gone, "CliTopic", "does not exist")


def test_messages(cli: Cli) -> None:
    assert (
        cli("updateTopic", "-t", "CliMsgs", "-c", "DefaultCluster", "-r", "2", "-w", "2").exit_code
        == 0
    )
    wait_for(lambda: cli("topicRoute", "-t", "CliMsgs"), lambda x: x.exit_code == 0)
    sent = []
    for i in range(4):
        tag = "TagA" if i % 2 == 0 else "TagB"
        r = cli(
            "sendMessage", "-t", "CliMsgs", "-p", f"body-{i}", "-k", f"key-{i}", "-c", tag, "--json"
        )
        sent.append(r.json())
        assert sent[-1]["sendStatus"] == "SEND_OK"
        time.sleep(0.01)
    middle_ms = sent[2]  # sent at or after this time: the last two
    pinned = cli(
        "sendMessage", "-t", "CliMsgs", "-p", "pinned", "-b", "broker-a", "-i", "1", "--json"
    ).json()
    assert (pinned["brokerName"], pinned["queueId"]) == ("broker-a", 1)
    # the broker's reput thread writes the queues and the index after the acks, in order: once
    # the last message is found by its unique key, every message before it is visible too
    found = wait_for(
        lambda: cli("queryMsgByUniqueKey", "-t", "CliMsgs", "-i", pinned["msgId"], "--json"),
        lambda r: r.exit_code == 0 and pinned["msgId"] in r.stdout,
    )
    assert found.exit_code == 0, found.stdout

    by_key = cli("queryMsgByKey", "-t", "CliMsgs", "-k", "key-1", "--json").json()["messages"]
    assert [m["msgId"] for m in by_key] == [sent[1]["msgId"]]
    assert "key-1" in cli("queryMsgByKey", "-t", "CliMsgs", "-k", "key-1").stdout

    uniq = cli("queryMsgByUniqueKey", "-t", "CliMsgs", "-i", sent[2]["msgId"], "--json").json()
    assert uniq["messages"][0]["body"] == "body-2"
    assert uniq["messages"][0]["tags"] == "TagA"
    by_id = cli("queryMsgById", "-i", sent[3]["offsetMsgId"], "--json").json()["messages"][0]
    assert (by_id["body"], by_id["keys"]) == ("body-3", ["key-3"])
    assert "Message Body" in cli("queryMsgById", "-i", sent[3]["offsetMsgId"]).stdout
    one_error_line(cli("queryMsgById", "-i", "nonsense"), "not an offset message id")

    at = cli(
        "queryMsgByOffset",
        "-t",
        "CliMsgs",
        "-b",
        "broker-a",
        "-i",
        "1",
        "-o",
        str(pinned["queueOffset"]),
        "--json",
    )
    assert at.json()["message"]["body"] == "pinned"
    one_error_line(
        cli("queryMsgByOffset", "-t", "CliMsgs", "-b", "broker-a", "-i", "1", "-o", "999"),
        "no message at offset 999",
    )

    everything = cli("printMsg", "-t", "CliMsgs", "--json").json()["messages"]
    assert sorted(m["body"] for m in everything) == [
        "body-0",
        "body-1",
        "body-2",
        "body-3",
        "pinned",
    ]
    tagged = cli("printMsg", "-t", "CliMsgs", "-s", "TagB", "--json").json()["messages"]
    assert sorted(m["body"] for m in tagged) == ["body-1", "body-3"]
    stored = {m["body"]: m["storeTimestamp"] for m in everything}
    since = cli(
        "printMsg", "-t", "CliMsgs", "-b", str(stored["body-2"]), "-d", "false", "--json"
    ).json()["messages"]
    assert sorted(m["msgId"] for m in since) == sorted(
        [middle_ms["msgId"], sent[3]["msgId"], pinned["msgId"]]
    )
    assert all("body" not in m for m in since)

    pulled = cli("consumeMessage", "-t", "CliMsgs", "-c", "3", "--json").json()["messages"]
    assert len(pulled) == 3
    one_queue = cli(
        "consumeMessage",
        "-t",
        "CliMsgs",
        "-b",
        "broker-a",
        "-i",
        "1",
        "-o",
        str(pinned["queueOffset"]),
        "--json",
    ).json()
    assert [m["body"] for m in one_queue["messages"]] == ["pinned"]


def test_cluster_and_broker_commands(cli: Cli, cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    listing = cli("clusterList", "--json").json()
    assert listing["clusters"] == {"DefaultCluster": ["broker-a"]}
    (row,) = listing["brokers"]
    assert (row["brokerName"], row["addr"], row["brokerId"], row["reachable"]) == (
        "broker-a",
        addr,
        0,
        True,
    )
    for key in ("inTps", "outTps", "version", "hoursOfData", "commitLogDiskRatio", "inTotalToday"):
        assert key in row
    table = cli("clusterList").stdout
    assert "InTPS(LOAD)" in table
    assert "OutTPS(LOAD)" in table
    assert "broker-a" in table
    assert "InTotalToday" in cli("clusterList", "-m").stdout

    status = cli("brokerStatus", "-b", addr, "--json").json()["brokers"][addr]
    assert status["brokerName"] == "broker-a"
    assert "putTps" in status
    assert cli("brokerStatus", "-c", "DefaultCluster", "--json").json()["brokers"].keys() == {addr}
    config = cli("getBrokerConfig", "-c", "DefaultCluster", "--json").json()["brokers"][addr]
    assert config["brokerName"] == "broker-a"
    one_error_line(cli("getBrokerConfig", "-c", "NoSuchCluster"), "NoSuchCluster")
    one_error_line(cli("updateBrokerConfig", "-b", addr, "-k", "noSuchKey", "-v", "1"), "noSuchKey")

    for command in ("cleanExpiredCQ", "deleteExpiredCommitLog"):
        r = cli(command, "-b", addr, "--json")
        assert r.json()["brokers"] == [addr]
        assert f"{command} success on {addr}" in cli(command).stdout


def test_namesrv_commands(cli: Cli, cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    configs = cli("getNamesrvConfig", "--json").json()["namesrvs"]
    assert configs[ns]["orderMessageEnable"] in ("true", "false")
    assert cli("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true").exit_code == 0
    assert cli("getNamesrvConfig", "--json").json()["namesrvs"][ns]["orderMessageEnable"] == "true"
    one_error_line(cli("updateNamesrvConfig", "-k", "bogusKey", "-v", "1"), "bogusKey")

    assert cli("updateKvConfig", "-s", "CLI_NS", "-k", "k1", "-v", "v1").exit_code == 0
    with SyncAdmin(namesrv_addr=ns) as admin:
        assert admin.get_kv_config("CLI_NS", "k1") == "v1"
        assert cli("deleteKvConfig", "-s", "CLI_NS", "-k", "k1").exit_code == 0
        assert admin.get_kv_config("CLI_NS", "k1") is None


def test_stats_commands(cli: Cli, cluster: Cluster) -> None:
    assert (
        cli("updateTopic", "-t", "CliStats", "-c", "DefaultCluster", "-r", "1", "-w", "1").exit_code
        == 0
    )
    wait_for(lambda: cli("topicRoute", "-t", "CliStats"), lambda x: x.exit_code == 0)
    for i in range(3):
        assert cli("sendMessage", "-t", "CliStats", "-p", f"s{i}").exit_code == 0
    rows = wait_for(
        lambda: cli("statsAll", "-t", "CliStats", "--json").json()["rows"],
        lambda rs: rs[0]["inMsg24Hour"] == 3,
    )
    assert rows == [
        {
            "topic": "CliStats",
            "group": None,
            "accumulation": 0,
            "inTps": rows[0]["inTps"],
            "outTps": 0.0,
            "inMsg24Hour": 3,
            "outMsg24Hour": 0,
        }
    ]
    assert "NO_CONSUMER" in cli("statsAll", "-a").stdout
    assert "CliStats" in {r["topic"] for r in cli("statsAll", "-a", "--json").json()["rows"]}
    stats = cli("brokerConsumeStats", "-b", cluster.broker_addr(), "--json").json()
    assert stats["brokerAddr"] == cluster.broker_addr()
    assert isinstance(stats["queues"], list)


def test_write_permission(cli: Cli, cluster: Cluster) -> None:
    assert (
        cli("updateTopic", "-t", "CliPerm", "-c", "DefaultCluster", "-r", "1", "-w", "1").exit_code
        == 0
    )
    wait_for(lambda: cli("topicRoute", "-t", "CliPerm"), lambda x: x.exit_code == 0)
    assert cli("sendMessage", "-t", "CliPerm", "-p", "before").exit_code == 0

    wiped = cli("wipeWritePerm", "-b", "broker-a", "--json").json()
    assert wiped["brokerName"] == "broker-a"
    assert wiped["topicCounts"][cluster.namesrv_addr] >= 1
    assert route_perm(cli, "CliPerm") == 4
    one_error_line(cli("sendMessage", "-t", "CliPerm", "-p", "during"))
    assert (
        cli("addWritePerm", "-b", "broker-a", "--json").json()["topicCounts"][cluster.namesrv_addr]
        >= 1
    )
    assert route_perm(cli, "CliPerm") == 6
    assert cli("sendMessage", "-t", "CliPerm", "-p", "after").exit_code == 0
    one_error_line(cli("wipeWritePerm", "-b", "no-such-broker"), "no-such-broker")

    # the broker itself refuses writes while brokerPermission is read-only
    addr = cluster.broker_addr()
    assert cli("updateBrokerConfig", "-b", addr, "-k", "brokerPermission", "-v", "4").exit_code == 0
    try:
        refused = cli("sendMessage", "-t", "CliPerm", "-p", "x", "-b", "broker-a", "-i", "0")
        # the broker refuses it, or, once its read-only registration reached the NameServer
        # and the tool's route, the tool itself: either way one line naming the permission
        line = one_error_line(refused)
        assert "NO_PERMISSION" in line or "not writable" in line, line
        assert wait_for(lambda: route_perm(cli, "CliPerm"), lambda p: p == 4) == 4
    finally:
        assert (
            cli("updateBrokerConfig", "-b", addr, "-k", "brokerPermission", "-v", "6").exit_code
            == 0
        )
    assert wait_for(lambda: route_perm(cli, "CliPerm"), lambda p: p == 6) == 6


def test_errors_and_help(cli: Cli) -> None:
    one_error_line(cli("topicRoute", "-t", "NoSuchTopic"), "NoSuchTopic", "does not exist")
    one_error_line(cli("topicStatus", "-t", "NoSuchTopic"), "does not exist")
    one_error_line(cli("consumerProgress", "-g", "NoSuchGroup"), "NoSuchGroup")
    one_error_line(cli("consumerConnection", "-g", "NoSuchGroup"), "not online")
    bad = cli("updateTopic", "-t", "X", "-c", "DefaultCluster", "-p", "3")
    assert bad.exit_code == 2
    one_error_line(bad, "-p")
    one_error_line(cli("updateTopic", "-t", "X"), "-b or -c")
    one_error_line(
        cli("resetOffsetByTime", "-g", "g", "-t", "t", "-s", "yesterday"), "yyyy-MM-dd#HH:mm:ss:SSS"
    )
    one_error_line(cli("topicRoute"), "--topic")
    one_error_line(cli("noSuchCommand"), "noSuchCommand")
    one_error_line(cli("topicRoute", "-t", "x", "-n", "not-an-address", namesrv=False), "host:port")
    # names match case-insensitively, as in mqadmin
    assert cli("TOPICLIST", "--json").exit_code == 0
    for name in COMMANDS:
        r = cli(name, "--help", namesrv=False)
        assert r.exit_code == 0, name
        assert "--namesrvAddr" in r.stdout, name
        assert "--json" in r.stdout, name


def test_console_script(cluster: Cluster) -> None:
    ok = mqadmin_process("clusterList", "--json", env={"NAMESRV_ADDR": cluster.namesrv_addr})
    assert ok.json()["brokers"][0]["brokerName"] == "broker-a"
    missing = mqadmin_process("topicRoute", "-t", "NoSuchTopic", "-n", cluster.namesrv_addr)
    assert missing.exit_code == 1
    one_error_line(missing, "mqadmin topicRoute:", "NoSuchTopic")
    down = mqadmin_process("topicList", "-n", "127.0.0.1:1")
    assert down.exit_code == 1
    one_error_line(down, "127.0.0.1:1")
    usage = mqadmin_process("updateTopic", "-t", "X", "-r", "many", "-c", "c")
    assert usage.exit_code == 2
    one_error_line(usage, "-r")
    assert "updateTopic" in mqadmin_process("--help").stdout


def test_update_broker_config_survives_restart(cli: Cli, cluster: Cluster) -> None:
    addr = cluster.broker_addr()
    r = cli(
        "updateBrokerConfig",
        "-b",
        addr,
        "-k",
        "flushConsumerOffsetInterval",
        "-v",
        "4321",
        "--json",
    )
    assert r.json()["changes"][0]["newValue"] == "4321"
    assert (
        cli(
            "updateBrokerConfig", "-c", "DefaultCluster", "-k", "brokerPermission", "-v", "4"
        ).exit_code
        == 0
    )
    cluster.restart_broker()
    config = wait_for(
        lambda: cli("getBrokerConfig", "-b", addr, "--json"), lambda x: x.exit_code == 0
    ).json()["brokers"][addr]
    assert (config["flushConsumerOffsetInterval"], config["brokerPermission"]) == ("4321", "4")
    assert cli("updateBrokerConfig", "-b", addr, "-k", "brokerPermission", "-v", "6").exit_code == 0
