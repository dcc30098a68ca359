"""The dashboard's HTTP endpoints against a real cluster: every page's JSON, every action, bad
input (unknown topic, malformed time range...), forgery checks, login, and brokers or
NameServers that are down. Each change is checked against the broker too."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ariane.client import Admin
from tests.integration.dashboard.support import DashClient, start_dashboard, wait_for, wait_indexed
from tests.support.cluster import Cluster
from tests.support.processes import free_port, start_server
from tests.support.rpc import wait_for_route

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dashboard-api")]
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _admin_call(cluster: Cluster, name: str, *args: Any, **kwargs: Any) -> Any:
    async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
        return await getattr(admin, name)(*args, **kwargs)


def admin(cluster: Cluster, name: str, *args: Any, **kwargs: Any) -> Any:
    return run(_admin_call(cluster, name, *args, **kwargs))


def test_pages_answer_json(client: DashClient, cluster: Cluster) -> None:
    overview = client.api("/dashboard")
    assert overview["totals"]["brokersUp"] == 1
    assert [b["addr"] for b in overview["brokers"]] == [cluster.broker_addr()]
    brokers = client.api("/cluster")["brokers"]
    assert brokers[0]["brokerName"] == "broker-a"
    assert brokers[0]["role"] in ("ASYNC_MASTER", "SYNC_MASTER", "MASTER")
    assert brokers[0]["reachable"] is True
    assert brokers[0]["version"].startswith("V")
    detail = client.api("/cluster/broker", addr=cluster.broker_addr())
    assert detail["config"]["brokerName"] == "broker-a"
    assert "msgPutTotalTodayNow" in detail["runtime"]
    assert client.get("/api/cluster/broker", addr="10.0.0.1:1").status_code == 404
    for page in ("/", "/cluster", "/topic", "/consumer", "/producer", "/message", "/dlqMessage"):
        response = client.get(page)
        assert response.status_code == 200, page
        assert response.headers["x-frame-options"] == "DENY"
        assert "default-src 'self'" in response.headers["content-security-policy"]


def test_topic_create_send_find_and_delete(client: DashClient, cluster: Cluster) -> None:
    created = client.post(
        "/topic/createOrUpdate",
        {"topic": "DashApi", "writeQueueNums": "3", "readQueueNums": "3", "perm": "6",
         "messageType": "FIFO"},
    )  # fmt: skip
    assert created.status_code == 200, created.text
    # the dashboard waits for the new topic's route only up to its 3 s request deadline; the
    # broker registers it in the background, and the admin calls below find it by its route
    wait_for_route(cluster.namesrv_addr, "DashApi")
    config = admin(cluster, "topic_config", "DashApi")
    assert (config.read_queue_nums, config.write_queue_nums, config.order) == (3, 3, True)
    assert config.attributes == {"message.type": "FIFO"}
    wait_for("the new topic in the list", lambda: any(
        r["topic"] == "DashApi" for r in client.api("/topic", q="dashapi")["rows"]
    ))  # fmt: skip
    row = next(r for r in client.api("/topic", q="dashapi")["rows"] if r["topic"] == "DashApi")
    assert (row["type"], row["writeQueueNums"], row["brokers"]) == ("FIFO", 3, ["broker-a"])

    sent = client.post(
        "/topic/sendTopicMessage", {"topic": "DashApi", "body": "héllo", "tags": "T", "keys": "k-1"}
    ).json()
    assert sent["sendStatus"] == "SEND_OK"
    # the key index is built after the answer (RocketMQ's reput): wait until it has the message
    wait_indexed(cluster.namesrv_addr, "DashApi", sent["msgId"])
    stored = admin(cluster, "query_message_by_id", "DashApi", sent["msgId"])
    assert (bytes(stored.body).decode(), stored.tags, stored.keys) == ("héllo", "T", ["k-1"])

    by_key = client.api("/message", mode="key", topic="DashApi", key="k-1")
    assert [m["msgId"] for m in by_key["rows"]] == [sent["msgId"]]
    by_id = client.api("/message", mode="id", topic="DashApi", msgId=sent["msgId"])
    assert [m["queueOffset"] for m in by_id["rows"]] == [sent["queueOffset"]]
    by_offset_id = client.api("/message/detail", msgId=sent["offsetMsgId"])
    assert by_offset_id["message"]["msgId"] == sent["msgId"]
    detail = client.api("/message/detail", topic="DashApi", msgId=sent["msgId"])
    assert detail["body"] == {"kind": "text", "text": "héllo", "length": 6, "truncated": False}
    assert detail["message"]["properties"]["KEYS"] == "k-1"
    wait_for("the test message's Pub trace", lambda: any(
        e["traceType"] == "Pub" for e in client.api("/messageTrace", msgId=sent["msgId"])["entries"]
    ))  # fmt: skip
    pub = client.api("/messageTrace", msgId=sent["msgId"])["entries"][0]
    assert (pub["topic"], pub["keys"], pub["status"]) == ("DashApi", "k-1", "success")
    assert sent["msgId"] in client.get("/messageTrace", msgId=sent["msgId"]).text
    for page, params in [
        ("/message/detail", {"topic": "DashApi", "msgId": sent["msgId"]}),
        ("/message", {"mode": "key", "topic": "DashApi", "key": "k-1"}),
        ("/topic/detail", {"topic": "DashApi"}),
    ]:
        html = client.get(page, **params)
        assert html.status_code == 200, (page, html.text)
        assert sent["msgId"] in html.text or page == "/topic/detail"
    now = int(time.time() * 1000)
    by_time = client.api("/message", mode="time", topic="DashApi", begin=str(now - 60_000),
                         end=str(now + 60_000))  # fmt: skip
    assert [m["msgId"] for m in by_time["rows"]] == [sent["msgId"]]
    assert by_time["truncated"] is False

    status = client.api("/topic/detail", topic="DashApi")
    assert sorted((q["queueId"], q["maxOffset"]) for q in status["status"]) == sorted(
        (i, 1 if i == sent["queueId"] else 0) for i in range(3)
    )
    assert status["route"]["queueDatas"][0]["writeQueueNums"] == 3

    refused = client.post("/topic/deleteTopic", {"topic": "DashApi", "confirm": "nope"})
    assert refused.status_code == 400
    assert "confirm" in refused.json()["error"]
    assert client.post("/topic/deleteTopic", {"topic": "DashApi", "confirm": "DashApi"}).is_success
    assert "DashApi" not in admin(cluster, "topic_list")
    assert client.get("/api/topic/detail", topic="DashApi").status_code == 404


def test_groups_reset_and_consume_directly(client: DashClient, cluster: Cluster) -> None:
    made = client.post(
        "/consumer/createOrUpdate",
        {"group": "dash_api_g", "retryMaxTimes": "3", "consumeMessageOrderly": "true"},
    )
    assert made.status_code == 200, made.text
    cfg = admin(cluster, "group_config", "dash_api_g", cluster.broker_addr())
    assert (cfg.retry_max_times, cfg.consume_message_orderly) == (3, True)
    client.post("/topic/createOrUpdate", {"topic": "DashReset", "writeQueueNums": "2"})
    wait_for_route(cluster.namesrv_addr, "DashReset")  # the sends below need it
    for i in range(4):
        client.post("/topic/sendTopicMessage", {"topic": "DashReset", "body": f"m{i}"})

    async def commit_zero() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as a:
            for q in range(2):
                await a.api.update_consumer_offset(
                    cluster.broker_addr(), "dash_api_g", "DashReset", q, 0
                )

    run(commit_zero())
    wait_for("the group's lag", lambda: any(
        r["group"] == "dash_api_g" and r["diffTotal"] == 4
        for r in client.api("/consumer", q="dash_api_g")["rows"]
    ))  # fmt: skip
    detail = client.api("/consumer/detail", group="dash_api_g")
    assert detail["online"] is False
    assert detail["diffTotal"] == 4
    assert {q["topic"] for q in detail["queues"]} == {"DashReset"}

    skipped = client.post("/topic/resetOffset", {"topic": "DashReset", "group": "dash_api_g"})
    assert skipped.status_code == 200, skipped.text
    assert skipped.json()["mode"] in ("broker", "direct")  # useServerSideResetOffset decides
    stats = admin(cluster, "consume_stats", "dash_api_g", "DashReset")
    assert all(w.consumer_offset == w.broker_offset for w in stats.offset_table.values())
    assert sum(w.broker_offset for w in stats.offset_table.values()) == 4
    back = client.post(
        "/topic/resetOffset", {"topic": "DashReset", "group": "dash_api_g", "resetTime": "0"}
    )
    assert sorted(o["offset"] for o in back.json()["offsets"]) == [0, 0]

    msg = client.api("/message", mode="time", topic="DashReset")["rows"][0]
    offline = client.post(
        "/message/consumeMessageDirectly",
        {"msgId": msg["msgId"], "topic": "DashReset", "group": "dash_api_g"},
    )
    assert offline.status_code == 409
    assert "online" in offline.json()["error"]

    assert client.post("/consumer/deleteSubGroup", {"group": "dash_api_g"}).status_code == 400
    gone = client.post("/consumer/deleteSubGroup", {"group": "dash_api_g", "confirm": "dash_api_g"})
    assert gone.status_code == 200
    assert (
        "dash_api_g"
        not in admin(cluster, "all_group_configs")
        .values[cluster.broker_addr()]
        .subscription_group_table
    )


def test_dlq_list_export_and_resend(client: DashClient, cluster: Cluster) -> None:
    client.post("/topic/createOrUpdate", {"topic": "DashDlq", "writeQueueNums": "1"})
    client.post("/consumer/createOrUpdate", {"group": "dash_dlq_g"})
    wait_for_route(cluster.namesrv_addr, "DashDlq")  # the send below needs it
    sent = client.post(
        "/topic/sendTopicMessage", {"topic": "DashDlq", "body": "dead", "keys": "dk"}
    )
    msg_id, offset_id = sent.json()["msgId"], sent.json()["offsetMsgId"]

    async def to_dlq() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as a:
            msg = await a.view_message(offset_id)
            await a.api.consumer_send_message_back(cluster.broker_addr(), msg, "dash_dlq_g", -1)

    run(to_dlq())
    assert "dash_dlq_g" in client.api("/dlqMessage")["dlqGroups"]
    wait_for("the DLQ topic's route", lambda: client.api("/dlqMessage", group="dash_dlq_g")["rows"])
    # the listing reads the DLQ's queue; the resend below finds the message by id, in the
    # index of keys the reput thread builds after the queue entry
    wait_indexed(cluster.namesrv_addr, "%DLQ%dash_dlq_g", msg_id)
    listed = client.api("/dlqMessage", group="dash_dlq_g")
    assert [m["msgId"] for m in listed["rows"]] == [msg_id]
    exported = client.get("/dlqMessage/exportDlqMessage", group="dash_dlq_g")
    assert "attachment" in exported.headers["content-disposition"]
    assert [(m["msgId"], m["body"]) for m in exported.json()["messages"]] == [(msg_id, "dead")]
    assert (
        client.post("/dlqMessage/batchResendDlqMessage", {"group": "dash_dlq_g"}).status_code == 400
    )
    answer = client.post(
        "/dlqMessage/batchResendDlqMessage", {"group": "dash_dlq_g", "msgId": msg_id}
    )
    assert answer.status_code == 200, answer.text
    resent = answer.json()
    assert [r["msgId"] for r in resent["resent"]] == [msg_id]
    # the answer names where the copy was stored; the index of keys follows asynchronously
    again = admin(cluster, "view_message", resent["resent"][0]["resentAs"])
    assert (again.topic, again.msg_id) == ("%RETRY%dash_dlq_g", msg_id)
    wait_indexed(cluster.namesrv_addr, "%RETRY%dash_dlq_g", msg_id)
    assert bytes(again.body) == b"dead"
    assert again.properties["RETRY_TOPIC"] == "DashDlq"
    assert again.keys == ["dk"]
    assert again.reconsume_times == 0
    assert client.api("/dlqMessage", group="nobody_g")["rows"] == []


@pytest.mark.parametrize(
    ("path", "params", "status", "words"),
    [
        ("/topic/detail", {"topic": "NoSuchTopic"}, 404, "unknown topic"),
        ("/topic/detail", {"topic": "bad name!"}, 400, "illegal characters"),
        ("/topic", {"sort": "color"}, 400, "sort"),
        ("/topic", {"type": "WEIRD"}, 400, "type"),
        ("/topic", {"page": "minus"}, 400, "page"),
        ("/consumer/detail", {"group": "no_such_group"}, 404, "unknown consumer group"),
        ("/consumer/runningInfo", {"group": "g"}, 400, "clientId"),
        ("/message", {"mode": "time", "topic": "TBW102", "begin": "yesterday"}, 400, "begin"),
        (
            "/message",
            {
                "mode": "time",
                "topic": "TBW102",
                "begin": "2024-01-02T00:00",
                "end": "2024-01-01T00:00",
            },
            400,
            "after begin",
        ),
        (
            "/message",
            {
                "mode": "time",
                "topic": "TBW102",
                "begin": "2024-01-01T00:00",
                "end": "2024-03-01T00:00",
            },
            400,
            "7 days",
        ),
        ("/message", {"mode": "key", "topic": "NoSuchTopic", "key": "k"}, 404, "unknown topic"),
        ("/message", {"mode": "fuzzy", "topic": "TBW102"}, 400, "mode"),
        ("/message/detail", {}, 400, "msgId"),
        ("/message/detail", {"msgId": "7F00000100002A9F0000000000FFFFFF"}, 404, "not in this"),
        ("/message/detail", {"msgId": "not-an-id"}, 400, "topic"),
    ],
)
def test_bad_input_is_one_readable_line(
    client: DashClient, path: str, params: dict[str, str], status: int, words: str
) -> None:
    api = client.get("/api" + path, **params)
    assert api.status_code == status, api.text
    assert words in api.json()["error"]
    html = client.get(path, **params)
    assert html.status_code == status
    assert "Traceback" not in html.text
    assert 'id="error"' in html.text


def test_acl_page_says_when_acl_is_off(client: DashClient, cluster: Cluster) -> None:
    page = client.api("/acl")
    assert page["aclDisabledOn"] == [cluster.broker_addr()]
    assert page["accounts"] == []
    assert "ACL is not enabled" in client.get("/acl").text
    refused = client.post("/acl/createOrUpdate", {"accessKey": "RocketMQ", "secretKey": "12345678"})
    assert refused.status_code == 502
    assert "not enabled" in refused.json()["error"]
    short = client.post("/acl/createOrUpdate", {"accessKey": "a", "secretKey": "b"})
    assert short.status_code == 400
    bad = client.post(
        "/acl/createOrUpdate",
        {"accessKey": "RocketMQ", "secretKey": "12345678", "topicPerms": "TopicA=WRITE"},
    )
    assert bad.status_code == 400
    assert "RESOURCE=PERM" in bad.json()["error"]


def test_posts_need_csrf_origin_and_valid_fields(client: DashClient) -> None:
    client.token()
    no_token = client.http.post("/api/topic/createOrUpdate", data={"topic": "Forged"})
    assert no_token.status_code == 403
    wrong = client.http.post(
        "/api/topic/createOrUpdate", data={"topic": "Forged", "csrf_token": "x" * 43}
    )
    assert wrong.status_code == 403
    foreign = client.http.post(
        "/api/topic/createOrUpdate",
        data={"topic": "Forged", "csrf_token": client.token()},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert client.get("/api/topic/detail", topic="Forged").status_code == 404
    bad = client.post("/topic/createOrUpdate", {"topic": "Ok", "perm": "9"})
    assert bad.status_code == 400
    assert "perm" in bad.json()["error"]
    form = client.post("/topic/createOrUpdate", {"topic": "bad name"}, api=False)
    assert form.status_code == 303
    assert form.headers["location"] == "/topic"
    shown = client.get("/topic")
    assert "illegal characters" in shown.text
    assert "flash error" in shown.text
    assert client.get("/topic").text.count("flash error") == 0  # shown once
    assert client.http.get("/topic/createOrUpdate").status_code == 405


def test_login_and_read_only_accounts(cluster: Cluster, tmp_path: Path) -> None:
    users = tmp_path / "users.properties"
    users.write_text("admin=s3cret,1\nviewer=look\n", encoding="utf-8")
    proc = start_dashboard(cluster.namesrv_addr, "--auth", str(users))
    c = DashClient(proc.ready["dashboard"])
    try:
        first = c.get("/topic")
        assert first.status_code == 303
        assert first.headers["location"].startswith("/login")
        assert c.get("/api/topic").status_code == 401
        token = c.token()
        wrong = c.http.post(
            "/login", data={"username": "admin", "password": "x", "csrf_token": token}
        )
        assert wrong.status_code == 401
        assert "wrong user name or password" in wrong.text
        ok = c.http.post(
            "/login", data={"username": "viewer", "password": "look", "csrf_token": token}
        )
        assert ok.status_code == 303
        assert c.get("/api/topic").status_code == 200
        refused = c.post("/topic/createOrUpdate", {"topic": "ViewerTopic"})
        assert refused.status_code == 403
        assert "only look" in refused.json()["error"]
        c.http.post("/logout", data={"csrf_token": c.token()})
        c.http.post(
            "/login", data={"username": "admin", "password": "s3cret", "csrf_token": c.token()}
        )
        assert c.post("/topic/createOrUpdate", {"topic": "AdminTopic"}).status_code == 200
    finally:
        c.close()
        proc.stop()


def test_dead_broker_and_dead_namesrv_are_reported(cluster: Cluster) -> None:
    # a hung broker (SIGSTOP: registered, connected, silent) costs one deadline, not a page
    quick = start_dashboard(cluster.namesrv_addr, "--request-timeout-ms", "500")
    client = DashClient(quick.ready["dashboard"])
    cluster.start_broker("broker-z", mappedFileSizeConsumeQueue=20 * 1024)
    addr = cluster.broker_addr("broker-z")
    proc = cluster.brokers.pop("broker-z")
    try:
        wait_for("broker-z in the list", lambda: any(
            b["addr"] == addr for b in client.api("/cluster")["brokers"]
        ))  # fmt: skip
        os.kill(proc.pid, signal.SIGSTOP)

        def down() -> bool:
            rows = client.api("/cluster")["brokers"]
            return any(b["addr"] == addr and not b["reachable"] for b in rows)

        wait_for("broker-z shown as down", down)
        row = next(b for b in client.api("/cluster")["brokers"] if b["addr"] == addr)
        assert "no answer within 500 ms" in row["error"]
        wait_for("the topic list's warning", lambda: f"broker {addr}" in client.get(
            "/topic", type="all").text)  # fmt: skip
        assert client.api("/topic", type="all")["total"] > 0
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.stop()
        client.close()
        quick.stop()

    lonely = start_dashboard(f"127.0.0.1:{free_port()}", "--request-timeout-ms", "500")
    c = DashClient(lonely.ready["dashboard"])
    try:
        response = c.get("/api/cluster")
        assert response.status_code in (502, 504)
        assert "cluster" in response.json()["error"]
        assert "Traceback" not in c.get("/cluster").text
    finally:
        c.close()
        lonely.stop()


def test_cli_refuses_bad_flags(tmp_path: Path) -> None:
    import subprocess
    import sys

    def dash(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ariane", "dashboard", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    bad_ns = dash("-n", "nohostport")
    assert bad_ns.returncode == 2
    assert "HOST:PORT" in bad_ns.stderr
    missing = dash("--auth", str(tmp_path / "none.properties"), "--port", "0")
    assert missing.returncode == 2
    assert "cannot read users file" in missing.stderr
    assert "Traceback" not in bad_ns.stderr + missing.stderr


def test_standalone_serves_the_dashboard(tmp_path: Path) -> None:
    proc = start_server(
        ["standalone", "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0",
         "--broker-port", "0", "--dashboard-port", "0"],
        name="standalone",
    )  # fmt: skip
    try:
        addr = proc.ready["dashboard"]
        assert addr.startswith("127.0.0.1:")
        c = DashClient(addr)
        try:
            brokers = c.api("/cluster")["brokers"]
            assert [b["addr"] for b in brokers] == [proc.ready["broker"]]
        finally:
            c.close()
    finally:
        assert proc.stop() == 0
    assert (tmp_path / "data" / "logs" / "dashboard.out").exists()
