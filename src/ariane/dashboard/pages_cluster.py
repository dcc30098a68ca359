"""Dashboard and Cluster pages (rocketmq-dashboard's ``/dashboard/*.query`` and
``/cluster/*.query``): brokers' TPS and message counts over time, the top topics, every broker
with its role, version and status, and one broker's runtime figures and settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.routing import Route

from ariane.dashboard.data import Snapshot
from ariane.dashboard.web import Page, PageError, page_routes

if TYPE_CHECKING:
    from ariane.dashboard.context import Dashboard

__all__ = ["routes"]

_TOP_TOPICS = 10


def warnings_of(*snapshots: Snapshot[Any]) -> list[str]:
    """One line per broker that did not answer while a list was loaded."""
    lines: dict[str, None] = {}
    for snap in snapshots:
        for addr, reason in sorted(snap.errors.items()):
            lines[f"broker {addr}: {reason}"] = None
    return list(lines)


async def overview(request: Request, dash: Dashboard) -> Page:
    """Dashboard: totals, TPS charts, top topics by 24 h volume."""
    brokers = await dash.data.brokers()
    topics = await dash.data.topics()
    if not dash.collector.history:
        await dash.collector.sample()
    user_topics = [t for t in topics.rows if t.kind not in ("SYSTEM", "RETRY", "DLQ")]
    top = sorted(
        (t for t in user_topics if t.put_24h or t.message_count),
        key=lambda t: (t.put_24h or 0, t.message_count or 0),
        reverse=True,
    )[:_TOP_TOPICS]
    up = [b for b in brokers.rows if b.reachable]
    totals = {
        "brokers": len(brokers.rows),
        "brokersUp": len(up),
        "topics": len(user_topics),
        "inTps": sum(b.in_tps for b in up),
        "outTps": sum(b.out_tps for b in up),
        "inTotalToday": sum(b.in_today for b in up),
        "outTotalToday": sum(b.out_today for b in up),
    }
    series = dash.collector.series()
    return Page(
        "overview.html",
        {"totals": totals, "brokers": brokers.rows, "top": top, "series": series},
        {
            "totals": totals,
            "brokers": [b.to_json() for b in brokers.rows],
            "topTopics": [t.to_json() for t in top],
            "series": series,
        },
        warnings_of(brokers, topics),
    )


async def cluster(request: Request, dash: Dashboard) -> Page:
    """Cluster: every broker of every cluster."""
    brokers = await dash.data.brokers()
    clusters = sorted({b.cluster for b in brokers.rows})
    return Page(
        "cluster.html",
        {"brokers": brokers.rows, "clusters": clusters},
        {"clusters": clusters, "brokers": [b.to_json() for b in brokers.rows]},
        warnings_of(brokers),
    )


async def broker(request: Request, dash: Dashboard) -> Page:
    """One broker: runtime figures (``brokerStatus``) and settings (``getBrokerConfig``)."""
    addr = request.query_params.get("addr", "").strip()
    known = {b.addr: b for b in (await dash.data.brokers()).rows}
    if addr not in known:
        raise PageError(404, f"no broker at {addr!r} in this cluster")
    runtime = await dash.admin.broker_runtime_info(addr)
    config = await dash.admin.broker_config(addr)
    return Page(
        "broker.html",
        {
            "broker": known[addr],
            "runtime": sorted(runtime.items()),
            "config": sorted(config.items()),
        },
        {"broker": known[addr].to_json(), "runtime": runtime, "config": config},
    )


def routes() -> list[Route]:
    """This module's routes."""
    return [
        *page_routes("/", overview, name="Dashboard"),
        *page_routes("/cluster", cluster, name="Cluster"),
        *page_routes("/cluster/broker", broker, name="Broker"),
    ]
