"""The dashboard in a real browser (Debian's Chromium driven by Playwright): create a topic,
send a test message, find it by key and by id, watch a group's lag drop to 0 while a consumer
runs, reset its offsets, resend a DLQ message; each step checked on the page and against the
broker, and a screenshot of every page saved under test-artifacts/dashboard/."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from ariane.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    SyncPushConsumer,
)
from tests.integration.dashboard.support import ARTIFACTS, browser_page, wait_for, wait_indexed
from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess
from tests.support.rpc import wait_for_route

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.xdist_group("dashboard-browser"),
]
T = TypeVar("T")


def _consumer(cluster: Cluster, group: str, topic: str, got: list[MessageExt]) -> SyncPushConsumer:
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = SyncPushConsumer(
        group,
        client_config=ClientConfig(
            namesrv_addr=cluster.namesrv_addr,
            instance_name=f"dash-{group}",
            rebalance_interval_ms=500,
            persist_consumer_offset_interval_ms=200,
            poll_name_server_interval_ms=500,
            heartbeat_broker_interval_ms=1000,
        ),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a loop of its own (Playwright's sync API owns this thread's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _admin(cluster: Cluster, name: str, *args: Any, **kwargs: Any) -> Any:
    async def go() -> Any:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            return await getattr(admin, name)(*args, **kwargs)

    return _run(go())


def test_operator_walkthrough(cluster: Cluster, dashboard: ServerProcess) -> None:
    base = f"http://{dashboard.ready['dashboard']}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        page.on("dialog", lambda d: d.accept())

        def shot(name: str) -> None:
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

        def flash() -> str:
            if page.locator(".flash").count() == 0:
                shot("failed")
            return str(page.locator(".flash").first.inner_text())

        # create a topic from the Topic page
        page.goto(f"{base}/topic")
        page.click("#add-topic summary")
        page.fill("#add-topic input[name=topic]", "WalkTopic")
        page.fill("#add-topic input[name=writeQueueNums]", "2")
        page.fill("#add-topic input[name=readQueueNums]", "2")
        page.click("#add-topic button[type=submit]")
        page.wait_for_url(re.compile(r"/topic/detail\?topic=WalkTopic"))
        assert "saved on 1 broker" in flash()
        # the dashboard waits for the route only up to its 3 s request deadline; the broker
        # registers the topic in the background, and what follows (the detail page's send
        # form too) finds it by its route
        wait_for_route(cluster.namesrv_addr, "WalkTopic")
        page.reload()
        assert _admin(cluster, "topic_config", "WalkTopic").write_queue_nums == 2

        # send a test message
        page.fill("#send input[name=tags]", "TagW")
        page.fill("#send input[name=keys]", "walk-key")
        page.fill("#send textarea[name=body]", "hello from the browser")
        page.click("#send button[type=submit]")
        page.wait_for_url(re.compile(r"/message/detail"))
        assert "SEND_OK" in flash()
        msg_id = page.inner_text("#msg-id").strip()
        wait_indexed(cluster.namesrv_addr, "WalkTopic", msg_id)
        stored = _admin(cluster, "query_message_by_id", "WalkTopic", msg_id)
        assert bytes(stored.body) == b"hello from the browser"
        assert page.inner_text("#msg-body") == "hello from the browser"
        shot("message")

        # find it by key and by id
        page.goto(f"{base}/message?mode=key&topic=WalkTopic")
        page.fill("#message-query input[name=key]", "walk-key")
        page.click("#message-query button[type=submit]")
        assert page.locator("#messages tbody a").all_inner_texts() == [msg_id]
        page.goto(f"{base}/message?mode=id&topic=WalkTopic")
        page.fill("#message-query input[name=msgId]", msg_id)
        page.click("#message-query button[type=submit]")
        assert page.locator("#messages tbody a").all_inner_texts() == [msg_id]
        page.goto(f"{base}/message?mode=time&topic=WalkTopic")
        assert page.locator("#messages tbody a").all_inner_texts() == [msg_id]
        shot("messages")

        # a group with a backlog: its lag drops to 0 while a consumer runs
        async def backlog() -> None:
            async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
                await admin.create_group("walk_group")
                for q in range(2):
                    await admin.api.update_consumer_offset(
                        cluster.broker_addr(), "walk_group", "WalkTopic", q, 0
                    )

        _run(backlog())
        for i in range(5):
            page.goto(f"{base}/topic/detail?topic=WalkTopic")
            page.fill("#send textarea[name=body]", f"backlog {i}")
            page.click("#send button[type=submit]")
            page.wait_for_url(re.compile(r"/message/detail"))

        def lag_on_page() -> str:
            page.goto(f"{base}/consumer/detail?group=walk_group")
            return str(page.inner_text("#diff-total"))

        wait_for("a lag of 6 on the page", lambda: lag_on_page() == "6")
        got: list[MessageExt] = []
        consumer = _consumer(cluster, "walk_group", "WalkTopic", got)
        with consumer:
            wait_for("the lag to drop to 0", lambda: lag_on_page() == "0")
            stats = _admin(cluster, "consume_stats", "walk_group", "WalkTopic")
            assert (
                sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values()) == 0
            )
            assert sorted(bytes(m.body) for m in got) == sorted(
                [b"hello from the browser"] + [b"backlog %d" % i for i in range(5)]
            )
            assert page.inner_text("#client-count") == "1"
            shot("consumer")

            # reset offsets to the start: the running consumer gets every message again
            page.select_option("#reset select[name=topic]", "WalkTopic")
            page.fill("#reset input[name=resetTime]", "2000-01-01T00:00:00")
            page.click("#reset button[type=submit]")
            page.wait_for_url(re.compile(r"/consumer/detail"))
            assert "reset to" in flash()
            wait_for("every message consumed twice", lambda: len(got) >= 12)
            assert sorted(bytes(m.body) for m in got[6:]) == sorted(bytes(m.body) for m in got[:6])

            # resend one message to the running consumer (CONSUME_MESSAGE_DIRECTLY)
            def consumed_on_page() -> bool:  # the offsets are cached like the lists
                page.goto(f"{base}/message/detail?topic=WalkTopic&msgId={msg_id}")
                return "CONSUMED" in page.inner_text("#tracks")

            wait_for("CONSUMED on the message's page", consumed_on_page)
            page.click("#tracks button[type=submit]")
            page.wait_for_url(re.compile(r"/message/detail"))
            assert "CR_SUCCESS" in flash()
            wait_for("the directly consumed message", lambda: len(got) >= 13)
            assert bytes(got[12].body) == b"hello from the browser"

        # a DLQ message resent to its group
        async def dead_letter() -> None:
            async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
                msg = await admin.query_message_by_id("WalkTopic", msg_id)
                await admin.create_group("walk_dlq")
                await admin.api.consumer_send_message_back(
                    cluster.broker_addr(), msg, "walk_dlq", -1
                )

        _run(dead_letter())

        def dlq_listed() -> bool:
            page.goto(f"{base}/dlqMessage?group=walk_dlq")
            return page.locator("#messages tbody a").all_inner_texts() == [msg_id]

        wait_for("the DLQ page to list the message", dlq_listed)
        shot("dlq")
        page.check(f"input[name=msgId][value='{msg_id}']")
        page.click("#dlq-resend button[type=submit]")
        page.wait_for_url(re.compile(r"/dlqMessage\?group=walk_dlq"))
        assert "1 message(s) resent to walk_dlq" in flash()
        got_dlq: list[MessageExt] = []

        def resent() -> list[MessageExt]:  # what came through the retry topic
            return [m for m in got_dlq if "RETRY_TOPIC" in m.properties]

        with _consumer(cluster, "walk_dlq", "WalkTopic", got_dlq):
            wait_for("the resent message consumed", lambda: len(resent()) >= 1)
        assert [(m.msg_id, bytes(m.body), m.topic, m.tags) for m in resent()] == [
            (msg_id, b"hello from the browser", "WalkTopic", "TagW")
        ]

        # the test message's trace (the dashboard's producer traces what it sends)
        def traced() -> bool:
            page.goto(f"{base}/messageTrace?msgId={msg_id}")
            return "Pub" in page.inner_text("main")

        wait_for("the Pub record on the trace page", traced)

        # every other page renders; a screenshot of each
        for name, path in [
            ("dashboard", "/"),
            ("cluster", "/cluster"),
            ("topics", "/topic"),
            ("topic", "/topic/detail?topic=WalkTopic"),
            ("consumers", "/consumer"),
            ("producers", "/producer"),
            ("broker", f"/cluster/broker?addr={cluster.broker_addr()}"),
            ("trace", f"/messageTrace?msgId={msg_id}"),
            ("acl-off", "/acl"),  # ACL on: acl.png of test_dashboard_acl
        ]:
            page.goto(base + path)
            assert page.locator("h1").count() == 1
            assert page.locator(".flash.error").count() == 0, path
            shot(name)
        page.goto(f"{base}/cluster")
        assert "broker-a" in page.inner_text("#brokers")
