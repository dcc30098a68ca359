"""``ariane bench dashboard``: page times of the web dashboard at 1,000 topics and 10,000
consumer groups.

How it works: unless ``--namesrv``/``--dashboard`` name a running cluster and dashboard, it
starts ``ariane standalone --dashboard-port 0`` in a temporary directory. It then seeds the
cluster through the admin API in bulk (topics and groups with one request per broker per
batch, a message per topic, offsets for some groups so lag is computed) and loads every page:
the first load (cold caches, the lists fetched from the brokers), then ``--rounds`` loads
over HTTP, and, with Chromium present, one warm-up and ``--browser-rounds`` loads in the
browser (navigation start to the load event). It prints p50/p95 per page; it asserts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ariane.bench._child import ariane_child
from ariane.client import Admin, Message, Producer
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.bodies import TopicConfig

__all__ = ["browser_times", "dashboard_bench", "percentile", "scale_pages", "seed_scale"]

_TOPIC_BATCH = 250
_GROUP_BATCH = 2000
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def topic_name(i: int) -> str:
    """The i-th seeded topic."""
    return f"ScaleTopic{i:04d}"


def group_name(i: int) -> str:
    """The i-th seeded consumer group."""
    return f"scale_group_{i:05d}"


async def seed_scale(
    namesrv: str, topics: int, groups: int, *, messages: bool = True, lagging_groups: int = 200
) -> None:
    """Create ``topics`` topics (4 queues) and ``groups`` groups in bulk; with ``messages``
    one message per topic, and offsets 0 for the first ``lagging_groups`` groups on a topic
    each (a lag of one)."""
    async with Admin(namesrv_addr=namesrv, timeout_ms=30_000) as admin:
        names = [topic_name(i) for i in range(topics)]
        for start in range(0, topics, _TOPIC_BATCH):
            batch = [TopicConfig(n, 4, 4) for n in names[start : start + _TOPIC_BATCH]]
            await admin.create_topics(batch)
        for start in range(0, groups, _GROUP_BATCH):
            chunk = [
                SubscriptionGroupConfig(group_name(i))
                for i in range(start, min(groups, start + _GROUP_BATCH))
            ]
            await admin.create_groups(chunk)
        deadline = time.monotonic() + 60
        while len(set(names) & set(await admin.topic_list())) < topics:
            if time.monotonic() > deadline:
                raise click.ClickException("the NameServer did not learn the topics in 60 s")
            await asyncio.sleep(0.2)
        if not messages:
            return
        async with Producer("scale_seed_producer", client_config=admin.client_config) as p:
            gate = asyncio.Semaphore(64)

            async def send(n: str) -> None:
                async with gate:
                    await p.send(Message(n, b"scale", keys=f"key-{n}"))

            await asyncio.gather(*(send(n) for n in names))
        addr = (await admin.master_addrs())[0]
        gate = asyncio.Semaphore(64)

        async def commit(i: int) -> None:
            async with gate:
                topic = names[i % topics]
                for q in range(4):
                    await admin.api.update_consumer_offset(addr, group_name(i), topic, q, 0)

        await asyncio.gather(*(commit(i) for i in range(min(lagging_groups, groups))))


def scale_pages(broker_addr: str, topics: int = 1000) -> list[tuple[str, str]]:
    """(name, path) of every page, with filters that hit the seeded data."""
    t = topic_name(min(500, topics - 1))
    return [
        ("Dashboard", "/"),
        ("Cluster", "/cluster"),
        ("Broker", f"/cluster/broker?addr={broker_addr}"),
        ("Topic", "/topic"),
        ("Topic sorted by stored", "/topic?type=all&sort=messages&desc=1"),
        ("Topic search", "/topic?q=0999"),
        ("Topic detail", f"/topic/detail?topic={t}"),
        ("Consumer", "/consumer"),
        ("Consumer sorted by delay", "/consumer?sort=diff&desc=1"),
        ("Consumer search", "/consumer?q=group_099"),
        ("Consumer detail", f"/consumer/detail?group={group_name(5)}"),
        ("Producer", "/producer"),
        ("Message by time", f"/message?mode=time&topic={t}"),
        ("Message by key", f"/message?mode=key&topic={t}&key=key-{t}"),
        ("DLQ Message", "/dlqMessage"),
    ]


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))
    return ordered[index]


@contextlib.contextmanager
def _standalone() -> Iterator[dict[str, str]]:
    args = ["standalone", "--namesrv-port", "0", "--broker-port", "0", "--dashboard-port", "0"]
    what = "the standalone cluster with its dashboard"
    with ariane_child(args, "--data-dir", "ariane-bench-dashboard-", "dashboard", what) as child:
        yield child[0]


def _http_times(base: str, pages: list[tuple[str, str]], rounds: int) -> dict[str, Any]:
    try:
        import httpx
    except ImportError:
        raise click.ClickException("this benchmark needs httpx (the 'dev' extra)") from None

    out: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=60) as http:
        for name, path in pages:
            t0 = time.perf_counter()
            first = http.get(path)
            cold = (time.perf_counter() - t0) * 1000
            if first.status_code != 200:
                raise click.ClickException(
                    f"{path} answered {first.status_code}: {first.text[:200]}"
                )
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                http.get(path).raise_for_status()
                times.append((time.perf_counter() - t0) * 1000)
            out[name] = {"cold": cold, "times": times}
    return out


def browser_times(base: str, pages: list[tuple[str, str]], rounds: int) -> dict[str, list[float]]:
    """Navigation-to-load times (ms) of every page in Chromium (empty when unavailable)."""
    if rounds <= 0 or not Path(CHROMIUM).exists():
        return {}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {}
    out: dict[str, list[float]] = {}
    profile = tempfile.TemporaryDirectory(prefix="ariane-bench-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile.name, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = context.new_page()
        for name, path in pages:
            page.goto(base + path, wait_until="load")  # warm-up: scripts compiled and cached
            times = []
            for _ in range(rounds):
                page.goto(base + path, wait_until="load")
                times.append(
                    float(page.evaluate(
                        "() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return n.loadEventEnd - n.startTime; }"
                    ))
                )  # fmt: skip
            out[name] = times
        context.close()
    profile.cleanup()
    return out


@click.command("dashboard")
@click.option("-n", "--namesrv", default=None, help="A running cluster (default: start one).")
@click.option("--dashboard", "dashboard_addr", default=None, help="Its dashboard HOST:PORT.")
@click.option("--topics", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--groups", type=click.IntRange(1), default=10_000, show_default=True)
@click.option("--rounds", type=click.IntRange(1), default=40, show_default=True)
@click.option("--browser-rounds", type=click.IntRange(0), default=20, show_default=True)
def dashboard_bench(
    namesrv: str | None,
    dashboard_addr: str | None,
    topics: int,
    groups: int,
    rounds: int,
    browser_rounds: int,
) -> None:
    """p50/p95 page times of the dashboard at TOPICS topics and GROUPS groups."""
    if (namesrv is None) != (dashboard_addr is None):
        raise click.UsageError("--namesrv and --dashboard go together")
    with contextlib.ExitStack() as stack:
        if namesrv is None:
            ready = stack.enter_context(_standalone())
            namesrv, dashboard_addr, broker = ready["namesrv"], ready["dashboard"], ready["broker"]
        else:
            broker = ""
        assert dashboard_addr is not None
        t0 = time.perf_counter()
        asyncio.run(seed_scale(namesrv, topics, groups))
        click.echo(
            f"seeded {topics} topics and {groups} groups in {time.perf_counter() - t0:.1f} s"
        )
        if not broker:
            broker = asyncio.run(_first_master(namesrv))
        base = f"http://{dashboard_addr}"
        pages = scale_pages(broker, topics)
        http = _http_times(base, pages, rounds)
        browser = browser_times(base, pages, browser_rounds)
    click.echo(
        f"{'page':<26}{'first':>9}{'p50':>9}{'p95':>9}{'browser p50':>13}{'browser p95':>13}  (ms)"
    )
    for name, _ in pages:
        h = http[name]
        b = browser.get(name, [])
        bp = (
            f"{percentile(b, 0.5):>13.1f}{percentile(b, 0.95):>13.1f}"
            if b
            else f"{'-':>13}{'-':>13}"
        )
        click.echo(
            f"{name:<26}{h['cold']:>9.1f}{percentile(h['times'], 0.5):>9.1f}"
            f"{percentile(h['times'], 0.95):>9.1f}{bp}"
        )
    click.echo(f"rounds: {rounds} over HTTP, {browser_rounds if browser else 0} in Chromium")


async def _first_master(namesrv: str) -> str:
    async with Admin(namesrv_addr=namesrv) as admin:
        return (await admin.master_addrs())[0]
