"""The dashboard at scale: 1,000 topics and 10,000 consumer groups created through the admin
API in bulk (one request per broker per batch), a traced message consumed by an online
consumer (the probe), every page the dashboard serves loaded in Chromium (the JSON download
over HTTP). The load times
are written to test-artifacts/dashboard/scale-timings.json; ``ariane bench dashboard``
measures them (nothing here is timed)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ariane.bench.dashboard import (
    DOWNLOADS,
    PROBE_GROUP,
    group_name,
    scale_pages,
    scale_probe,
    seed_scale,
    topic_name,
)
from tests.integration.dashboard.support import ARTIFACTS, DashClient, browser_page, wait_for
from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.xdist_group("dashboard-scale"),
]
TOPICS = 1000
GROUPS = 10_000


def test_every_page_at_1000_topics_and_10000_groups(
    cluster: Cluster, dashboard: ServerProcess
) -> None:
    asyncio.run(seed_scale(cluster.namesrv_addr, TOPICS, GROUPS, lagging_groups=20))
    client = DashClient(dashboard.ready["dashboard"])
    try:
        wait_for(
            "every topic listed", lambda: client.api("/topic", q="scaletopic")["total"] == TOPICS
        )
        wait_for(
            "every group listed",
            lambda: client.api("/consumer", q="scale_group_")["total"] == GROUPS,
        )
        wait_for("every topic's message counted", lambda: client.api(
            "/topic", q="scaletopic", sort="messages")["rows"][0]["messageCount"] == 1)  # fmt: skip
        topics = client.api("/topic", q="scaletopic", sort="topic", page="20")
        assert [r["topic"] for r in topics["rows"]] == [topic_name(i) for i in range(950, 1000)]
        assert (topics["page"], topics["pages"]) == (20, 20)
        assert all(r["messageCount"] == 1 for r in topics["rows"])
        wait_for("the lag of the seeded groups", lambda: client.api(
            "/consumer", q="scale_group_", sort="diff", desc="1")["rows"][0]["diffTotal"] == 1)  # fmt: skip
        lagging = client.api("/consumer", q="scale_group_", sort="diff", desc="1")["rows"][:20]
        assert sorted(r["group"] for r in lagging) == [group_name(i) for i in range(20)]
        assert {r["diffTotal"] for r in lagging} == {1}
        assert client.api("/consumer", q=group_name(9999))["rows"][0]["topics"] == []
    finally:
        client.close()

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with scale_probe(cluster.namesrv_addr, TOPICS) as probe:
        pages = scale_pages(cluster.broker_addr(), probe, TOPICS)
        _check_probe_pages(DashClient(dashboard.ready["dashboard"]), probe.msg_id, probe.topic)
        timings: dict[str, float] = {}
        with browser_page() as page:
            base = f"http://{dashboard.ready['dashboard']}"
            for name, path in pages:
                if name in DOWNLOADS:
                    continue
                page.goto(base + path, wait_until="load")
                assert page.locator("h1").count() == 1, path
                assert page.locator(".flash.error, #error").count() == 0, path
                timings[name] = float(page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return n.loadEventEnd - n.startTime; }"
                ))  # fmt: skip
                if name in ("Topic", "Consumer"):
                    page.screenshot(path=str(ARTIFACTS / f"scale-{name.lower()}.png"))
            page.goto(base + "/consumer")
            assert page.locator("#groups tbody tr").count() == 50
            assert "10,0" in page.inner_text(".pager")
    assert sorted(n for n, _ in pages if n not in timings) == sorted(DOWNLOADS)
    (ARTIFACTS / "scale-timings.json").write_text(json.dumps(timings, indent=2), encoding="utf-8")


def _check_probe_pages(client: DashClient, msg_id: str, topic: str) -> None:
    """The probe's pages at scale: found by id, consumed by the probe group only, traced."""
    try:
        found = client.api("/message", mode="id", topic=topic, msgId=msg_id)
        assert [m["msgId"] for m in found["rows"]] == [msg_id]
        wait_for("the probe consumed on its detail page", lambda: client.api(
            "/message/detail", topic=topic, msgId=msg_id)["messageTrack"] == [
            {"group": PROBE_GROUP, "status": "CONSUMED", "clientIds": [_client_id(client)]}])  # fmt: skip
        kinds = [e["traceType"] for e in client.api("/messageTrace", msgId=msg_id)["entries"]]
        assert (kinds[0], "SubAfter" in kinds) == ("Pub", True)
        export = client.get("/dlqMessage/exportDlqMessage", group=group_name(5))
        assert (export.status_code, export.json()["messages"]) == (200, [])
    finally:
        client.close()


def _client_id(client: DashClient) -> str:
    rows = client.api("/consumer", q=PROBE_GROUP)["rows"]
    return str(rows[0]["clientIds"][0]) if rows and rows[0]["clientIds"] else "?"
