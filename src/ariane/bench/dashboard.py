"""``ariane bench dashboard``: page times of the web dashboard at 1,000 topics and 10,000
consumer groups.

How it works: unless ``--namesrv``/``--dashboard`` name a running cluster and dashboard, it
starts ``ariane standalone --dashboard-port 0`` in a temporary directory. It then seeds the
cluster through the admin API in bulk (topics and groups with one request per broker per
batch, a message per topic, offsets for some groups so lag is computed), sends one traced
message that a traced consumer (kept online) consumes, so the by-id, detail, trace and
running-info pages show real data, and loads every page the dashboard serves: the first load
(cold caches, the lists fetched from the brokers), then ``--rounds`` loads over HTTP, and,
with Chromium present, one warm-up and ``--browser-rounds`` loads in the browser (navigation
start to the load event; a download is timed over HTTP only). It prints p50/p95 per page and
what the ACL and Login times stand for on this cluster; it asserts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ariane.bench._child import ariane_child
from ariane.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    SyncProducer,
    SyncPushConsumer,
)
from ariane.errors import ArianeError
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.bodies import TopicConfig

__all__ = [
    "DOWNLOADS",
    "PROBE_GROUP",
    "Probe",
    "browser_times",
    "dashboard_bench",
    "percentile",
    "scale_pages",
    "scale_probe",
    "seed_scale",
]

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


PROBE_GROUP = "scale_probe_group"
PROBE_KEY = "scale-probe"
#: Pages answered as a file download: timed over HTTP only (a browser saves them).
DOWNLOADS = frozenset({"DLQ export"})


@dataclass(frozen=True, slots=True)
class Probe:
    """A traced message of the probe topic and the online consumer that consumed it."""

    topic: str
    msg_id: str
    offset_msg_id: str
    group: str
    client_id: str


def probe_topic(topics: int) -> str:
    """The seeded topic the probe message goes to (and the pages filter on)."""
    return topic_name(min(500, topics - 1))


@contextlib.contextmanager
def scale_probe(namesrv: str, topics: int, timeout_s: float = 120.0) -> Iterator[Probe]:
    """Send one traced message (key ``scale-probe``) to the probe topic and keep a traced
    push consumer of ``scale_probe_group`` running on it until exit, so the by-id, detail,
    trace and running-info pages have something real to show. Waits until the message is
    consumed, indexed and its Pub and SubAfter traces are stored."""
    topic = probe_topic(topics)
    asyncio.run(_create_probe_group(namesrv))  # past the broker's auto-create limit
    got = threading.Event()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = ClientConfig(
        namesrv_addr=namesrv, instance_name="ariane-bench-probe", rebalance_interval_ms=500,
        poll_name_server_interval_ms=500, heartbeat_broker_interval_ms=1000,
        persist_consumer_offset_interval_ms=200,
    )  # fmt: skip
    consumer = SyncPushConsumer(
        PROBE_GROUP, client_config=config, enable_trace=True,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    with consumer, SyncProducer("scale_probe_producer", client_config=config,
                                enable_trace=True) as producer:  # fmt: skip
        sent = producer.send(Message(topic, b"probe", tags="probe", keys=PROBE_KEY))
        if not got.wait(timeout_s):
            raise click.ClickException(f"the probe message was not consumed in {timeout_s} s")
        client_id = asyncio.run(_probe_ready(namesrv, topic, sent.msg_id, timeout_s))
        yield Probe(topic, sent.msg_id, sent.offset_msg_id, PROBE_GROUP, client_id)


async def _create_probe_group(namesrv: str) -> None:
    async with Admin(namesrv_addr=namesrv) as admin:
        await admin.create_group(PROBE_GROUP)


async def _probe_ready(namesrv: str, topic: str, msg_id: str, timeout_s: float) -> str:
    """The probe consumer's client id, once the message is indexed and fully traced."""
    deadline = time.monotonic() + timeout_s
    async with Admin(namesrv_addr=namesrv) as admin:
        while True:
            with contextlib.suppress(ArianeError):
                await admin.query_message_by_id(topic, msg_id)
                trace = await admin.query_message_trace(msg_id)
                kinds = {e.trace_type.value for e in trace.entries}
                conn = await admin.consumer_connections(PROBE_GROUP)
                if {"Pub", "SubAfter"} <= kinds and conn.connection_set:
                    return str(conn.connection_set[0].client_id)
            if time.monotonic() > deadline:
                raise click.ClickException(f"the probe message was not traced in {timeout_s} s")
            await asyncio.sleep(0.2)


def scale_pages(broker_addr: str, probe: Probe, topics: int = 1000) -> list[tuple[str, str]]:
    """(name, path) of every page the dashboard serves, with filters that hit the seeded
    data and the probe."""
    t = probe_topic(topics)
    msg = f"topic={probe.topic}&msgId={probe.msg_id}"
    cid = urllib.parse.quote(probe.client_id)
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
        ("Consumer running info", f"/consumer/runningInfo?group={probe.group}&clientId={cid}"),
        ("Producer", "/producer"),
        ("Message by time", f"/message?mode=time&topic={t}"),
        ("Message by key", f"/message?mode=key&topic={t}&key=key-{t}"),
        ("Message by id", f"/message?mode=id&{msg}"),
        ("Message detail", f"/message/detail?{msg}"),
        ("Message detail by offset id", f"/message/detail?msgId={probe.offset_msg_id}"),
        ("Message Trace", f"/messageTrace?msgId={probe.msg_id}"),
        ("DLQ Message", "/dlqMessage"),
        ("DLQ Message of a group", f"/dlqMessage?group={group_name(5)}"),
        ("DLQ export", f"/dlqMessage/exportDlqMessage?group={group_name(5)}"),
        ("ACL", "/acl"),
        ("Login", "/login"),
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
            if name in DOWNLOADS:
                continue
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
        probe = stack.enter_context(scale_probe(namesrv, topics))
        pages = scale_pages(broker, probe, topics)
        http = _http_times(base, pages, rounds)
        browser = browser_times(base, pages, browser_rounds)
        notes = _notes(base)
    click.echo(
        f"{'page':<30}{'first':>9}{'p50':>9}{'p95':>9}{'browser p50':>13}{'browser p95':>13}  (ms)"
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
            f"{name:<30}{h['cold']:>9.1f}{percentile(h['times'], 0.5):>9.1f}"
            f"{percentile(h['times'], 0.95):>9.1f}{bp}"
        )
    click.echo(f"rounds: {rounds} over HTTP, {browser_rounds if browser else 0} in Chromium")
    for note in notes:
        click.echo(note)


def _notes(base: str) -> list[str]:
    """What the timings of the ACL and Login pages stand for on this cluster."""
    import httpx

    notes = []
    with httpx.Client(base_url=base, timeout=60) as http:
        acl = http.get("/api/acl").json()
        login_required = http.get("/api/dashboard").status_code == 401
    if acl.get("aclDisabledOn") and not acl.get("accounts"):
        off = ", ".join(acl["aclDisabledOn"])
        notes.append(f"ACL: off on {off}; /acl was timed answering that (one request per broker)")
    if not login_required:
        notes.append(
            "Login: the dashboard runs without --auth; /login served its form all the same"
        )
    notes.append(f"{', '.join(sorted(DOWNLOADS))}: a file download, timed over HTTP only")
    return notes


async def _first_master(namesrv: str) -> str:
    async with Admin(namesrv_addr=namesrv) as admin:
        return (await admin.master_addrs())[0]
