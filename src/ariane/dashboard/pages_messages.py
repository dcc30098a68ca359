"""Message, DLQ Message and Message Trace pages (rocketmq-dashboard's ``/message/*``,
``/dlqMessage/*`` and ``/messageTrace/*``).

Messages are found by topic and time range (queues read concurrently, newest first, at most
``max_messages``, the range at most ``max_time_range_ms``), by key, or by id (unique key or
offsetMsgId); results are cached a minute per query and paged on the server. A message's page
shows its properties, a bounded body preview, whether each consumer group of its topic has
consumed it (from the cached group list and every broker's GET_BROKER_CONSUME_STATS, so no
request per group), and lets an admin push it to one consumer of a group (CONSUME_MESSAGE_DIRECTLY).
The DLQ page lists a group's ``%DLQ%`` messages, exports them as JSON and resends them to
the group through its ``%RETRY%`` topic, so the group consumes them again whether or not a
consumer is online.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import Route

from ariane.client import Message, MessageExt, MessageQueue
from ariane.client.errors import QueryNotFoundError, TopicNotExistError
from ariane.common import properties as props
from ariane.common.message import message_dict
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import dlq_topic, retry_topic
from ariane.dashboard.forms import BadInput, paginate, time_range
from ariane.dashboard.pages_topics import group_param, route_appears, topic_param
from ariane.dashboard.web import Done, Page, PageError, action_routes, page_routes, text_field
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.fastjson import jsonable

if TYPE_CHECKING:
    from ariane.dashboard.context import Dashboard

__all__ = ["routes"]

_KEY_MAX = 64
_DEFAULT_SPAN_MS = 3_600_000
_CONSUMED_GROUPS_MAX = 200
_SORTS: dict[str, Any] = {
    "storeTime": lambda m: (m.store_timestamp_ms, m.queue_offset),
    "queue": lambda m: (m.queue_id, m.queue_offset),
}


def _summary(m: MessageExt) -> dict[str, Any]:
    d = message_dict(m, body=False)
    d.pop("properties", None)
    return d


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _by_time(dash: Dashboard, topic: str, begin: int, end: int) -> list[MessageExt]:
    key = f"msgs:{topic}:{begin}:{end}"
    return await dash.data.cache.get(
        key,
        lambda: dash.admin.query_messages_by_time(
            topic, begin, end, max_num=dash.config.max_messages
        ),
    )


async def _find(dash: Dashboard, topic: str | None, msg_id: str) -> MessageExt:
    """A message by unique key (with its topic) or offsetMsgId."""
    if topic:
        return await dash.admin.query_message_by_id(topic, msg_id)
    try:
        decoded = decode_offset_msg_id(msg_id)
    except InvalidArgumentError:
        raise BadInput("topic", "is required to find a message by its unique key") from None
    addr = f"{decoded.host}:{decoded.port}"
    if addr not in {b.addr for b in (await dash.data.brokers()).rows}:
        raise PageError(404, f"message {msg_id} names broker {addr}, which is not in this cluster")
    return await dash.admin.view_message(msg_id)


async def messages(request: Request, dash: Dashboard) -> Page:
    """Message: query by topic and time range, by key, or by id."""
    p = request.query_params
    mode = p.get("mode", "time")
    if mode not in ("time", "key", "id"):
        raise BadInput("mode", "must be time, key or id")
    context: dict[str, Any] = {"mode": mode, "topic": p.get("topic", ""), "listing": None}
    api: dict[str, Any] = {"mode": mode}
    wanted = {"time": "topic", "key": "key", "id": "msgId"}[mode]
    if not p.get("topic") or not (p.get(wanted) or "").strip():  # the empty form
        context.update(key=p.get("key", ""), msg_id=p.get("msgId", ""))
        return Page("messages.html", context, {**api, "rows": []})
    topic = topic_param(p.get("topic"))
    found: list[MessageExt]
    if mode == "time":
        begin, end = time_range(
            p.get("begin"), p.get("end"), now_ms=_now_ms(),
            default_span_ms=_DEFAULT_SPAN_MS, max_span_ms=dash.config.max_time_range_ms,
        )  # fmt: skip
        found = await _by_time(dash, topic, begin, end)
        context.update(begin=begin, end=end)
        api.update(begin=begin, end=end, truncated=len(found) >= dash.config.max_messages)
    elif mode == "key":
        key = (p.get("key") or "").strip()
        if not key:
            raise BadInput("key", "is required")
        await dash.admin.topic_route(topic)
        found = await dash.admin.query_message(topic, key, max_num=_KEY_MAX)
        context["key"] = key
    else:
        msg_id = (p.get("msgId") or "").strip()
        if not msg_id:
            raise BadInput("msgId", "is required")
        try:
            found = [await _find(dash, topic, msg_id)]
        except QueryNotFoundError:
            found = []
        context["msg_id"] = msg_id
    listing = paginate(
        found, keys=_SORTS, sort=p.get("sort"), desc=p.get("desc", "1") != "0",
        page_text=p.get("page"), page_size=dash.config.page_size, default_sort="storeTime",
    )  # fmt: skip
    context["listing"] = listing
    api.update(listing.to_json(_summary))
    return Page("messages.html", context, api)


def _body_preview(body: bytes, limit: int) -> dict[str, Any]:
    cut = body[:limit]
    try:
        text, kind = cut.decode("utf-8"), "text"
    except UnicodeDecodeError:
        text, kind = cut.hex(" ", 1), "hex"
    return {"kind": kind, "text": text, "length": len(body), "truncated": len(body) > limit}


async def _queue_offsets(dash: Dashboard, msg: MessageExt) -> tuple[dict[str, int], str]:
    """Group -> its consumer offset of the message's queue, and why they are unknown when
    the message's broker did not answer (empty when it did)."""
    offsets = await dash.data.consumer_offsets()
    brokers = (await dash.data.brokers()).rows
    name = next((b.broker_name for b in brokers if b.addr == str(msg.store_host)), None)
    failed = {
        e
        for a, e in offsets.errors.items()
        if name is None or any(b.addr == a and b.broker_name == name for b in brokers)
    }
    consumed = {
        o.group: o.offset
        for o in offsets.rows
        if o.topic == msg.topic and o.queue_id == msg.queue_id and name in (None, o.broker_name)
    }
    return consumed, "; ".join(sorted(failed))


async def _consumption(dash: Dashboard, msg: MessageExt) -> tuple[list[dict[str, Any]], list[str]]:
    """Per consumer group of the message's topic: consumed or not (``messageTrackDetail``),
    and warnings. The groups come from the cached group list and their offsets from the
    cached GET_BROKER_CONSUME_STATS of every broker: no request per group, whatever their
    number."""
    origin = msg.properties.get(props.RETRY_TOPIC) if msg.topic.startswith("%") else None
    topic = origin or msg.topic
    groups = [g for g in (await dash.data.groups()).rows if topic in g.topics]
    groups.sort(key=lambda g: g.group)
    consumed, unknown = await _queue_offsets(dash, msg)
    out = []
    for g in groups[:_CONSUMED_GROUPS_MAX]:
        off = consumed.get(g.group)
        if unknown:
            status = f"UNKNOWN ({unknown})"
        elif off is not None and off > msg.queue_offset:
            status = "CONSUMED"
        elif not g.clients:
            status = "NOT_ONLINE"
        else:
            status = "NOT_CONSUME_YET"
        out.append({"group": g.group, "status": status, "clientIds": list(g.client_ids)})
    warnings = []
    if len(groups) > _CONSUMED_GROUPS_MAX:
        warnings.append(
            f"{len(groups):,} groups consume {topic}: the first {_CONSUMED_GROUPS_MAX} by name "
            "are listed; the Consumer page searches the others"
        )
    return out, warnings


async def message_detail(request: Request, dash: Dashboard) -> Page:
    """One message: fields, properties, body preview, consumption per group, resend."""
    p = request.query_params
    msg_id = (p.get("msgId") or "").strip()
    if not msg_id:
        raise BadInput("msgId", "is required")
    topic = topic_param(p.get("topic")) if p.get("topic") else None
    msg = await _find(dash, topic, msg_id)
    info = message_dict(msg, body=False)
    body = _body_preview(bytes(msg.body), dash.config.body_preview_bytes)
    tracks, warnings = await _consumption(dash, msg)
    return Page(
        "message.html",
        {"m": info, "body": body, "tracks": tracks},
        {"message": info, "body": body, "messageTrack": tracks},
        warnings,
    )


async def consume_directly(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Push a stored message to one consumer of a group (``consumeMessageDirectly``)."""
    msg_id = text_field(form, "msgId")
    topic = text_field(form, "topic", required=False) or None
    group = group_param(text_field(form, "group"))
    client_id = text_field(form, "clientId", required=False)
    msg = await _find(dash, topic, msg_id)
    if not client_id:
        conn = await dash.admin.consumer_connections(group)
        if not conn.connection_set:
            raise PageError(409, f"no consumer of {group} is online")
        client_id = conn.connection_set[0].client_id
    result = jsonable(
        await dash.admin.api.consume_message_directly(
            str(msg.store_host), group, client_id, msg.offset_msg_id, topic=msg.topic,
            timeout_ms=dash.config.request_timeout_ms,
        )
    )  # fmt: skip
    outcome = result.get("consumeResult", "?") if isinstance(result, dict) else result
    return Done(
        f"message {msg.msg_id} consumed by {client_id}: {outcome}",
        f"/message/detail?topic={msg.topic}&msgId={msg.msg_id}",
        {"result": result, "clientId": client_id},
    )


# -- DLQ ---------------------------------------------------------------------------------------


async def _dlq_messages(
    dash: Dashboard, group: str, begin_text: str | None, end_text: str | None
) -> tuple[list[MessageExt], int, int]:
    begin, end = time_range(
        begin_text, end_text, now_ms=_now_ms(), default_span_ms=_DEFAULT_SPAN_MS * 24,
        max_span_ms=dash.config.max_time_range_ms,
    )  # fmt: skip
    try:
        found = await _by_time(dash, dlq_topic(group), begin, end)
    except TopicNotExistError:
        found = []  # no message of the group ever reached its DLQ
    return found, begin, end


async def dlq(request: Request, dash: Dashboard) -> Page:
    """DLQ Message: a group's dead letters in a time range."""
    p = request.query_params
    if not p.get("group"):
        groups = sorted(
            r.topic[len("%DLQ%") :] for r in (await dash.data.topics()).rows if r.kind == "DLQ"
        )
        return Page(
            "dlq.html", {"group": "", "listing": None, "dlq_groups": groups},
            {"messages": [], "dlqGroups": groups},
        )  # fmt: skip
    group = group_param(p.get("group"))
    found, begin, end = await _dlq_messages(dash, group, p.get("begin"), p.get("end"))
    listing = paginate(
        found, keys=_SORTS, sort=p.get("sort"), desc=p.get("desc", "1") != "0",
        page_text=p.get("page"), page_size=dash.config.page_size, default_sort="storeTime",
    )  # fmt: skip
    return Page(
        "dlq.html",
        {"group": group, "listing": listing, "begin": begin, "end": end, "dlq_groups": []},
        {"group": group, "begin": begin, "end": end, **listing.to_json(_summary)},
    )


async def dlq_export(request: Request, dash: Dashboard) -> Page:
    """The group's dead letters (or the ``msgId`` ones) as a JSON file, bodies included."""
    p = request.query_params
    group = group_param(p.get("group"))
    found, _, _ = await _dlq_messages(dash, group, p.get("begin"), p.get("end"))
    wanted = set(p.getlist("msgId"))
    chosen = [m for m in found if not wanted or m.offset_msg_id in wanted or m.msg_id in wanted]
    return Page(
        "", {}, {"group": group, "messages": [message_dict(m) for m in chosen]},
        download=f"dlq-{group}.json",
    )  # fmt: skip


def _resend_message(msg: MessageExt, group: str) -> Message:
    """The DLQ message as a message of the group's retry topic (original topic, keys, tags,
    user properties and unique key kept; reconsume count back to 0)."""
    kept = {k: v for k, v in msg.properties.items() if k not in props.SYSTEM_KEYS}
    kept[props.RETRY_TOPIC] = msg.properties.get(props.RETRY_TOPIC) or msg.topic
    kept[props.ORIGIN_MESSAGE_ID] = msg.properties.get(props.ORIGIN_MESSAGE_ID) or msg.msg_id
    unique = msg.properties.get(props.UNIQ_KEY)
    if unique:
        kept[props.UNIQ_KEY] = unique
    return Message(
        retry_topic(group), bytes(msg.body), tags=msg.tags, keys=list(msg.keys) or None,
        flag=msg.flag, properties=kept,
    )  # fmt: skip


async def dlq_resend(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Resend chosen dead letters to their group (``batchResendDlqMessage``)."""
    group = group_param(text_field(form, "group"))
    ids = [i.strip() for i in form.getlist("msgId") if isinstance(i, str) and i.strip()]
    if not ids:
        raise BadInput("msgId", "choose at least one message")
    admin = dash.admin
    dead = dlq_topic(group)
    retry = retry_topic(group)
    try:
        route = await admin.topic_route(retry)
    except TopicNotExistError:  # the group never retried: its retry topic is made now
        await admin.create_topic(
            retry, read_queue_nums=1, write_queue_nums=1, perm=PERM_READ | PERM_WRITE
        )
        if not await route_appears(dash, retry):  # not a 404: the topic exists now
            raise PageError(
                503,
                f"{retry} was just created for the resend, but the name servers do not route"
                " it yet; resend again in a few seconds",
            ) from None
        route = await admin.topic_route(retry)
    queues = [
        MessageQueue(retry, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PERM_WRITE
        for i in range(qd.write_queue_nums)
    ]
    if not queues:
        raise PageError(409, f"{retry} has no writable queue")
    producer = await dash.producer()
    sent: list[dict[str, Any]] = []
    for n, msg_id in enumerate(ids):
        msg = await admin.query_message_by_id(dead, msg_id)
        queue = queues[n % len(queues)]
        result = await producer.send(_resend_message(msg, group), queue=queue)
        sent.append(
            {"msgId": msg.msg_id, "resentAs": result.offset_msg_id, "status": result.status.name}
        )
    dash.data.invalidate("groups", "topics", "msgs:")
    return Done(
        f"{len(sent)} message(s) resent to {group}",
        f"/dlqMessage?group={group}",
        {"group": group, "resent": sent},
    )


# -- trace -------------------------------------------------------------------------------------


async def trace(request: Request, dash: Dashboard) -> Page:
    """Message Trace: the produce/consume records of a message id (``queryMsgTraceById``)."""
    msg_id = (request.query_params.get("msgId") or "").strip()
    data: dict[str, Any] = {"msgId": msg_id, "entries": [], "undecodable": []}
    missing = False
    if msg_id:
        try:
            found = await dash.admin.query_message_trace(msg_id, dash.config.trace_topic)
        except TopicNotExistError:
            missing = True  # no client has written a trace yet
        else:
            data = found.to_dict()
    return Page(
        "trace.html",
        {"msg_id": msg_id, "trace": data, "records_json": json.dumps(data["entries"]),
         "missing": missing, "trace_topic": dash.config.trace_topic},
        data,
    )  # fmt: skip


def routes() -> list[Route]:
    """This module's routes."""
    return [
        *page_routes("/message", messages, name="Message"),
        *page_routes("/message/detail", message_detail, name="Message"),
        *action_routes(
            "/message/consumeMessageDirectly", consume_directly, default_next="/message"
        ),
        *page_routes("/dlqMessage", dlq, name="DLQ Message"),
        *page_routes("/dlqMessage/exportDlqMessage", dlq_export, name="DLQ export"),
        *action_routes("/dlqMessage/batchResendDlqMessage", dlq_resend, default_next="/dlqMessage"),
        *page_routes("/messageTrace", trace, name="Message Trace"),
    ]
