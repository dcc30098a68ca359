"""The dashboard at scale: 1,000 topics and 10,000 consumer groups created through the admin
API in bulk (one request per broker per batch), every page loaded in Chromium. The load times
are written to test-artifacts/dashboard/scale-timings.json; ``ariane bench dashboard``
measures them (nothing here is timed)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ariane.bench.dashboard import group_name, scale_pages, seed_scale, topic_name
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
    pages = scale_pages(cluster.broker_addr(), TOPICS)
    timings: dict[str, float] = {}
    with browser_page() as page:
        base = f"http://{dashboard.ready['dashboard']}"
        for name, path in pages:
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
    (ARTIFACTS / "scale-timings.json").write_text(json.dumps(timings, indent=2), encoding="utf-8")
