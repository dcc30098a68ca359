"""Topic pages (rocketmq-dashboard's ``/topic/*``): the list with search, type filter, sorting
and paging on the server; one topic's route, per-queue status, consumer groups and
configuration; create/update, delete, send a test message and reset a group's offsets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import Route

from ariane.client import Message
from ariane.client.errors import TopicNotExistError
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import validate_group, validate_topic
from ariane.dashboard.data import TOPIC_KINDS, TopicRow
from ariane.dashboard.forms import BadInput, paginate, parse_bool, parse_int, parse_time
from ariane.dashboard.pages_cluster import warnings_of
from ariane.dashboard.web import (
    Done,
    Page,
    action_routes,
    confirm_field,
    page_routes,
    text_field,
)
from ariane.errors import InvalidArgumentError

if TYPE_CHECKING:
    from ariane.dashboard.context import Dashboard

__all__ = ["group_param", "route_appears", "routes", "topic_param"]

_SORTS: dict[str, Any] = {
    "topic": lambda r: r.topic,
    "type": lambda r: (r.kind, r.topic),
    "queues": lambda r: (r.write_queues, r.topic),
    "messages": lambda r: (r.message_count or 0, r.topic),
    "tps": lambda r: (r.put_tps or 0.0, r.topic),
    "put24h": lambda r: (r.put_24h or 0, r.topic),
}
_USER_KINDS = frozenset({"NORMAL", "FIFO", "DELAY", "TRANSACTION"})
_PERMS = {"6": PERM_READ | PERM_WRITE, "4": PERM_READ, "2": PERM_WRITE}
_MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")


def _name(value: str | None, name: str, validate: Callable[[str], None]) -> str:
    text = (value or "").strip()
    if not text:
        raise BadInput(name, "is required")
    try:
        validate(text)
    except InvalidArgumentError as exc:
        raise BadInput(name, str(exc)) from None
    return text


def topic_param(value: str | None, name: str = "topic") -> str:
    """A topic name from a query or form, checked."""
    return _name(value, name, validate_topic)


def group_param(value: str | None, name: str = "group") -> str:
    """A consumer group name from a query or form, checked."""
    return _name(value, name, validate_group)


def _matches(row: TopicRow, query: str, kind: str) -> bool:
    if query and query not in row.topic.lower():
        return False
    if kind == "user":
        return row.kind in _USER_KINDS
    return kind == "all" or row.kind == kind


async def topic_list(request: Request, dash: Dashboard) -> Page:
    """Topic: every topic, filtered by name and type, sorted and paged."""
    params = request.query_params
    query = params.get("q", "").strip().lower()
    kind = params.get("type", "user") or "user"
    if kind not in ("user", "all", *TOPIC_KINDS):
        raise BadInput("type", f"must be user, all or one of {', '.join(TOPIC_KINDS)}")
    snap = await dash.data.topics()
    rows = [r for r in snap.rows if _matches(r, query, kind)]
    listing = paginate(
        rows, keys=_SORTS, sort=params.get("sort"), desc=parse_bool(params.get("desc")),
        page_text=params.get("page"), page_size=dash.config.page_size, default_sort="topic",
    )  # fmt: skip
    clusters = sorted({b.cluster for b in (await dash.data.brokers()).rows})
    return Page(
        "topics.html",
        {"listing": listing, "q": query, "type": kind, "kinds": TOPIC_KINDS, "clusters": clusters},
        listing.to_json(TopicRow.to_json),
        warnings_of(snap),
    )


async def topic_detail(request: Request, dash: Dashboard) -> Page:
    """One topic: route, status per queue, consumer groups, configuration."""
    topic = topic_param(request.query_params.get("topic"))
    admin = dash.admin
    route = await admin.topic_route(topic)
    masters = {bd.broker_name: bd.master_addr for bd in route.broker_datas if bd.master_addr}
    stats = await admin.topic_stats(topic)
    configs = await admin.each_broker(
        lambda a: admin.topic_config(topic, a),
        masters.values(),
        timeout_ms=dash.config.request_timeout_ms,
    )
    groups = [g for g in (await dash.data.groups()).rows if topic in g.topics]
    queues = sorted(stats.offset_table.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    queue_rows: list[dict[str, Any]] = [
        {
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "minOffset": o.min_offset,
            "maxOffset": o.max_offset,
            "lastUpdateTimestamp": o.last_update_timestamp,
        }
        for mq, o in queues
    ]
    config_rows = [
        {"brokerAddr": addr, **tc.to_json()} for addr, tc in sorted(configs.values.items())
    ]
    route_json = {
        "brokerDatas": [bd.to_json() for bd in route.broker_datas],
        "queueDatas": [qd.to_json() for qd in route.queue_datas],
    }
    first = next(iter(configs.values.values()), None)
    return Page(
        "topic.html",
        {
            "topic": topic,
            "route": route,
            "queues": queue_rows,
            "configs": config_rows,
            "config": first,
            "groups": groups,
            "total": sum(q["maxOffset"] - q["minOffset"] for q in queue_rows),
            "message_types": _MESSAGE_TYPES,
        },
        {
            "topic": topic,
            "route": route_json,
            "status": queue_rows,
            "configs": config_rows,
            "consumerGroups": [g.to_json() for g in groups],
        },
        [f"broker {a}: {e}" for a, e in sorted(configs.errors.items())],
    )


async def create_or_update(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Create or update a topic on every master of a cluster (or of every cluster)."""
    topic = topic_param(text_field(form, "topic"))
    writes = parse_int(
        text_field(form, "writeQueueNums", required=False),
        "writeQueueNums",
        default=8,
        lo=1,
        hi=1024,
    )
    reads = parse_int(
        text_field(form, "readQueueNums", required=False),
        "readQueueNums",
        default=writes,
        lo=1,
        hi=1024,
    )
    perm_text = text_field(form, "perm", required=False, default="6")
    if perm_text not in _PERMS:
        raise BadInput("perm", "must be 6 (read/write), 4 (read) or 2 (write)")
    message_type = text_field(form, "messageType", required=False, default="NORMAL").upper()
    if message_type not in _MESSAGE_TYPES:
        raise BadInput("messageType", f"must be one of {', '.join(_MESSAGE_TYPES)}")
    cluster = text_field(form, "cluster", required=False) or None
    addrs = await dash.admin.create_topic(
        topic, cluster=cluster, read_queue_nums=reads, write_queue_nums=writes,
        perm=_PERMS[perm_text], order=message_type == "FIFO",
        attributes={"message.type": message_type},
    )  # fmt: skip
    dash.data.invalidate("topics")
    await route_appears(dash, topic)
    return Done(
        f"topic {topic} saved on {len(addrs)} broker(s)",
        f"/topic/detail?topic={topic}",
        {"topic": topic, "brokers": addrs},
    )


async def route_appears(dash: Dashboard, topic: str) -> bool:
    """Wait (up to the request deadline) until the NameServer routes a new topic: brokers
    register it a moment after they store it, and the next page shows its route. Returns
    whether it is routed."""
    deadline = time.monotonic() + dash.config.request_timeout_ms / 1000
    while True:
        try:
            await dash.admin.topic_route(topic)
            return True
        except TopicNotExistError:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)


async def delete(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Delete a topic from every broker and NameServer (the name typed again to confirm)."""
    topic = topic_param(text_field(form, "topic"))
    confirm_field(form, topic)
    await dash.admin.topic_route(topic)
    await dash.admin.delete_topic(topic)
    dash.data.invalidate("topics", "groups")
    return Done(f"topic {topic} deleted", "/topic", {"topic": topic})


async def send_message(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Send a test message (``/topic/sendTopicMessage.do``)."""
    topic = topic_param(text_field(form, "topic"))
    body = text_field(form, "body")
    tags = text_field(form, "tags", required=False) or None
    keys = text_field(form, "keys", required=False) or None
    await dash.admin.topic_route(topic)
    producer = await dash.producer()
    result = await producer.send(Message(topic, body.encode("utf-8"), tags=tags, keys=keys))
    dash.data.invalidate("topics")
    return Done(
        f"sent to {topic}: {result.status.name}, msgId {result.msg_id}",
        f"/message/detail?topic={topic}&msgId={result.offset_msg_id}",
        {
            "sendStatus": result.status.name,
            "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id,
            "brokerName": result.message_queue.broker_name,
            "queueId": result.message_queue.queue_id,
            "queueOffset": result.queue_offset,
        },
    )


async def reset_offset(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Reset a consumer group's offsets of a topic to a time; ``-1`` or "latest" skips
    everything not consumed yet (``/consumer/resetOffset.do``, ``skipAccumulate.do``)."""
    topic = topic_param(text_field(form, "topic"))
    group = group_param(text_field(form, "group"))
    when = text_field(form, "resetTime", required=False)
    if when.lower() in ("", "latest", "-1"):
        timestamp = -1
    elif when.lower() == "earliest":
        timestamp = 0
    else:
        parsed = parse_time(when, "resetTime")
        assert parsed is not None
        timestamp = parsed
    force = not parse_bool(text_field(form, "onlyBackward", required=False))
    mode, table = await dash.admin.reset_group_offset(group, topic, timestamp, force=force)
    dash.data.invalidate("groups")
    offsets = [
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
        for mq, off in sorted(table.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    ]
    target = (
        "the end"
        if timestamp == -1
        else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp / 1000))
    )
    how = "online consumers told" if mode == "broker" else "committed directly (no consumer online)"
    return Done(
        f"offsets of {group} on {topic} reset to {target} on {len(offsets)} queue(s); {how}",
        f"/consumer/detail?group={group}",
        {"group": group, "topic": topic, "mode": mode, "offsets": offsets},
    )


def routes() -> list[Route]:
    """This module's routes."""
    return [
        *page_routes("/topic", topic_list, name="Topic"),
        *page_routes("/topic/detail", topic_detail, name="Topic"),
        *action_routes("/topic/createOrUpdate", create_or_update, default_next="/topic"),
        *action_routes("/topic/deleteTopic", delete, default_next="/topic"),
        *action_routes("/topic/sendTopicMessage", send_message, default_next="/topic"),
        *action_routes("/topic/resetOffset", reset_offset, default_next="/consumer"),
    ]
