"""Consumer and Producer pages (rocketmq-dashboard's ``/consumer/*`` and ``/producer/*``):
groups with clients, TPS and lag (searched, sorted and paged on the server); one group's
clients, per-queue progress and settings; create/update and delete a group; a consumer's own
running information; online producers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import Route

from ariane.client.errors import ConsumerNotOnlineError
from ariane.common.versions import version_desc
from ariane.dashboard.data import GroupRow
from ariane.dashboard.forms import paginate, parse_bool, parse_int
from ariane.dashboard.pages_cluster import warnings_of
from ariane.dashboard.pages_topics import group_param, topic_param
from ariane.dashboard.web import (
    Done,
    Page,
    PageError,
    action_routes,
    confirm_field,
    page_routes,
    text_field,
)
from ariane.remoting.protocol.fastjson import jsonable

if TYPE_CHECKING:
    from ariane.dashboard.context import Dashboard

__all__ = ["routes"]

_SORTS: dict[str, Any] = {
    "group": lambda r: r.group,
    "clients": lambda r: (r.clients or 0, r.group),
    "tps": lambda r: (r.tps or 0.0, r.group),
    "diff": lambda r: (r.diff or 0, r.group),
    "topics": lambda r: (len(r.topics), r.group),
    "lastConsume": lambda r: (r.last_consume_ms, r.group),
}


async def group_list(request: Request, dash: Dashboard) -> Page:
    """Consumer: every group, searched by name or topic, sorted and paged."""
    params = request.query_params
    query = params.get("q", "").strip().lower()
    show_system = parse_bool(params.get("system"))
    snap = await dash.data.groups()
    rows = [
        r
        for r in snap.rows
        if (show_system or not r.system)
        and (not query or query in r.group.lower() or any(query in t.lower() for t in r.topics))
    ]
    listing = paginate(
        rows, keys=_SORTS, sort=params.get("sort"), desc=parse_bool(params.get("desc")),
        page_text=params.get("page"), page_size=dash.config.page_size, default_sort="group",
    )  # fmt: skip
    clusters = sorted({b.cluster for b in (await dash.data.brokers()).rows})
    return Page(
        "consumers.html",
        {"listing": listing, "q": query, "system": show_system, "clusters": clusters},
        listing.to_json(GroupRow.to_json),
        warnings_of(snap),
    )


async def _group_row(dash: Dashboard, group: str) -> GroupRow:
    for row in (await dash.data.groups()).rows:
        if row.group == group:
            return row
    dash.data.invalidate("groups")  # created a moment ago elsewhere?
    for row in (await dash.data.groups()).rows:
        if row.group == group:
            return row
    raise PageError(404, f"unknown consumer group: {group}")


async def group_detail(request: Request, dash: Dashboard) -> Page:
    """One group: clients, per-queue progress (incl. retry), settings."""
    group = group_param(request.query_params.get("group"))
    row = await _group_row(dash, group)
    admin = dash.admin
    try:
        conn = await admin.consumer_connections(group)
    except ConsumerNotOnlineError:
        conn = None
    stats = await admin.consume_stats(group)
    queues: list[dict[str, Any]] = [
        {
            "topic": mq.topic,
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "brokerOffset": w.broker_offset,
            "consumerOffset": w.consumer_offset,
            "diff": max(0, w.broker_offset - w.consumer_offset),
            "lastTimestamp": w.last_timestamp,
        }
        for mq, w in sorted(
            stats.offset_table.items(),
            key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id),
        )
    ]
    clients = [
        {
            "clientId": c.client_id,
            "clientAddr": c.client_addr,
            "language": c.language,
            "version": version_desc(c.version),
        }
        for c in (conn.connection_set if conn else [])
    ]
    subscriptions = [
        {"topic": t, "subString": s.sub_string, "expressionType": s.expression_type}
        for t, s in sorted((conn.subscription_table if conn else {}).items())
    ]
    configs = await admin.each_broker(
        lambda a: admin.group_config(group, a), timeout_ms=dash.config.request_timeout_ms
    )
    config_rows = [{"brokerAddr": a, **c.to_json()} for a, c in sorted(configs.values.items())]
    info = {
        "consumeType": conn.consume_type.name if conn and conn.consume_type else "",
        "messageModel": conn.message_model.name if conn and conn.message_model else "",
        "consumeFromWhere": conn.consume_from_where.name
        if conn and conn.consume_from_where
        else "",
    }
    topics = sorted({q["topic"] for q in queues} | {s["topic"] for s in subscriptions})
    return Page(
        "consumer.html",
        {
            "group": group, "row": row, "queues": queues, "clients": clients, "info": info,
            "subscriptions": subscriptions, "configs": config_rows, "topics": topics,
            "total_diff": sum(q["diff"] for q in queues), "consume_tps": stats.consume_tps,
        },
        {
            "group": group, "online": conn is not None, **info, "clients": clients,
            "subscriptions": subscriptions, "consumeTps": stats.consume_tps,
            "diffTotal": sum(q["diff"] for q in queues), "queues": queues, "configs": config_rows,
        },
        [f"broker {a}: {e}" for a, e in sorted(configs.errors.items())],
    )  # fmt: skip


async def running_info(request: Request, dash: Dashboard) -> Page:
    """A consumer's own report (``consumerRunningInfo``), relayed by a broker."""
    group = group_param(request.query_params.get("group"))
    client_id = request.query_params.get("clientId", "").strip()
    if not client_id:
        raise PageError(400, "clientId: is required")
    info = jsonable(await dash.admin.consumer_running_info(group, client_id))
    return Page(
        "running_info.html",
        {"group": group, "client_id": client_id, "info": info},
        {"group": group, "clientId": client_id, "runningInfo": info},
    )


async def create_or_update(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Create or update a subscription group on every master of a cluster."""
    group = group_param(text_field(form, "group"))

    def flag(name: str, default: bool) -> bool:
        value = text_field(form, name, required=False)
        return default if not value else parse_bool(value)

    addrs = await dash.admin.create_group(
        group,
        cluster=text_field(form, "cluster", required=False) or None,
        consume_enable=flag("consumeEnable", True),
        consume_broadcast_enable=flag("consumeBroadcastEnable", True),
        consume_orderly=flag("consumeMessageOrderly", False),
        retry_queue_nums=parse_int(text_field(form, "retryQueueNums", required=False), "retryQueueNums", default=1, hi=64),
        retry_max_times=parse_int(text_field(form, "retryMaxTimes", required=False), "retryMaxTimes", default=16, lo=-1, hi=1000),
        broker_id=parse_int(text_field(form, "brokerId", required=False), "brokerId", default=0, hi=64),
        which_broker_when_consume_slowly=parse_int(
            text_field(form, "whichBrokerWhenConsumeSlowly", required=False),
            "whichBrokerWhenConsumeSlowly", default=1, hi=64,
        ),
    )  # fmt: skip
    dash.data.invalidate("groups")
    return Done(
        f"consumer group {group} saved on {len(addrs)} broker(s)",
        f"/consumer/detail?group={group}",
        {"group": group, "brokers": addrs},
    )


async def delete(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Delete a subscription group (and its offsets) from every master."""
    group = group_param(text_field(form, "group"))
    confirm_field(form, group)
    await _group_row(dash, group)
    addrs = await dash.admin.delete_group(group)
    dash.data.invalidate("groups")
    return Done(f"consumer group {group} deleted", "/consumer", {"group": group, "brokers": addrs})


async def producers(request: Request, dash: Dashboard) -> Page:
    """Producer: online producers, by group (and a topic+group lookup as
    ``/producer/producerConnection.query``)."""
    params = request.query_params
    group = params.get("group", "").strip()
    topic_text = params.get("topic", "").strip()
    snap = await dash.data.producers()
    rows = [r for r in snap.rows if not group or group.lower() in r.group.lower()]
    rows.sort(key=lambda r: (r.group, r.client_id, r.broker_addr))
    connection: list[dict[str, Any]] | None = None
    if topic_text and group:
        topic = topic_param(topic_text)
        conn = await dash.admin.producer_connections(group_param(group), topic)
        connection = [
            {
                "clientId": c.client_id,
                "clientAddr": c.client_addr,
                "language": c.language,
                "version": version_desc(c.version),
            }
            for c in conn.connection_set
        ]
    groups = sorted({r.group for r in snap.rows})
    return Page(
        "producers.html",
        {
            "rows": rows,
            "group": group,
            "topic": topic_text,
            "groups": groups,
            "connection": connection,
        },
        {"producers": [r.to_json() for r in rows], "connection": connection},
        warnings_of(snap),
    )


def routes() -> list[Route]:
    """This module's routes."""
    return [
        *page_routes("/consumer", group_list, name="Consumer"),
        *page_routes("/consumer/detail", group_detail, name="Consumer"),
        *page_routes("/consumer/runningInfo", running_info, name="Consumer"),
        *action_routes("/consumer/createOrUpdate", create_or_update, default_next="/consumer"),
        *action_routes("/consumer/deleteSubGroup", delete, default_next="/consumer"),
        *page_routes("/producer", producers, name="Producer"),
    ]
