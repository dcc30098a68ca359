"""Message commands (RocketMQ ``tools.command.message``): queryMsgById, queryMsgByKey,
queryMsgByUniqueKey, queryMsgByOffset, printMsg, printMsgByQueue, sendMessage, consumeMessage.

printMsg, printMsgByQueue and consumeMessage read queues with plain PULL_MESSAGE requests (32 messages each,
no offset committed, group ``TOOLS_CONSUMER`` unless given), so they never disturb a real
consumer group.
"""

from __future__ import annotations

import codecs
import os
from typing import Any

import click

from ariane.admin.command import (
    OFFSET,
    QUEUE_ID,
    AdminContext,
    CommandFailed,
    TimestampType,
    admin_command,
)
from ariane.admin.output import Table, Ts, View, kv_table
from ariane.admin.trace import trace_hints
from ariane.common.message import message_dict

__all__ = [
    "consume_message",
    "message_dict",
    "print_msg",
    "print_msg_by_queue",
    "query_msg_by_id",
    "query_msg_by_key",
    "query_msg_by_offset",
    "query_msg_by_unique_key",
    "send_message",
]

_TOPIC = click.option("-t", "--topic", required=True, help="Topic name.")
_BODY_CELL_CHARS = 80


def _detail(m: dict[str, Any]) -> Table:
    values: dict[str, Any] = {
        "Msg Id": m["msgId"],
        "Offset Msg Id": m["offsetMsgId"],
        "Topic": m["topic"],
        "Tags": m["tags"],
        "Keys": " ".join(m["keys"]) or None,
        "Queue Id": m["queueId"],
        "Queue Offset": m["queueOffset"],
        "CommitLog Offset": m["commitLogOffset"],
        "Reconsume Times": m["reconsumeTimes"],
        "Born Timestamp": Ts(m["bornTimestamp"]),
        "Store Timestamp": Ts(m["storeTimestamp"]),
        "Born Host": m["bornHost"],
        "Store Host": m["storeHost"],
        "System Flag": m["sysFlag"],
        "Properties": ", ".join(f"{k}={v}" for k, v in m["properties"].items()),
        "Body Length": m["bodyLength"],
    }
    if "body" in m:
        values["Message Body"] = m["body"]
    table = kv_table({})
    table.rows = list(values.items())
    table.title = f"Message {m['msgId']}"
    return table


def _list_table(msgs: list[dict[str, Any]], *, body: bool) -> Table:
    columns = ["Broker Host", "QID", "Offset", "Msg Id", "Store Time", "Tags", "Keys"]
    columns += ["Body"] if body else []
    table = Table(columns, numeric=frozenset({"QID", "Offset"}))
    for m in msgs:
        row: list[Any] = [
            m["storeHost"],
            m["queueId"],
            m["queueOffset"],
            m["msgId"],
            Ts(m["storeTimestamp"]),
            m["tags"],
            " ".join(m["keys"]) or None,
        ]
        if body:
            text = m["body"].replace("\n", "\\n")
            cut = len(text) > _BODY_CELL_CHARS
            row.append(text[:_BODY_CELL_CHARS] + ("..." if cut else ""))
        table.rows.append(row)
    return table


def _check_charset(ctx: AdminContext, charset: str) -> str:
    try:
        return codecs.lookup(charset).name
    except LookupError:
        raise ctx.usage_error(f"unknown charset {charset!r}") from None


async def _consume_directly(ctx: AdminContext, msg: Any, group: str, client_id: str) -> View:
    store = str(msg.store_host)
    result = await ctx.admin.api.consume_message_directly(
        store, group, client_id, msg.offset_msg_id, topic=msg.topic, timeout_ms=ctx.timeout_ms
    )
    from ariane.admin.group import jsonable

    result = jsonable(result)
    values = result if isinstance(result, dict) else {"result": result}
    return View(
        {"message": message_dict(msg), "consumeResult": result},
        [_detail(message_dict(msg)), kv_table(values, title="Consume result")],
    )


async def _messages_view(
    ctx: AdminContext, msgs: list[Any], group: str | None, client_id: str | None
) -> View:
    """The found messages in detail, or (``-g``/``-d``) the first one consumed directly."""
    if group is not None and client_id is not None:
        return await _consume_directly(ctx, msgs[0], group, client_id)
    dicts = [message_dict(m) for m in msgs]
    hints = await trace_hints(ctx.admin, [m.msg_id for m in msgs], ctx.timeout_ms)
    return View({"messages": dicts}, [_detail(d) for d in dicts], hints)


@admin_command("queryMsgById", "Query a message by its offset message id.")
@click.option("-i", "--msgId", "msg_ids", required=True, help="offsetMsgId(s), comma-separated.")
@click.option("-t", "--topic", help="Topic (lets -i be a unique key too).")
@click.option("-g", "--consumerGroup", "group", help="With -d: consume it on that client.")
@click.option("-d", "--clientId", "client_id", help="With -g: the client to consume on.")
async def query_msg_by_id(
    ctx: AdminContext, msg_ids: str, topic: str | None, group: str | None, client_id: str | None
) -> View:
    """Fetch messages by their offset message id (broker address + CommitLog offset, the
    SendResult's offsetMsgId). With -g and -d the message is also pushed to that consumer
    client (CONSUME_MESSAGE_DIRECTLY) and its answer shown."""
    if (group is None) != (client_id is None):
        raise ctx.usage_error("-g and -d go together")
    from ariane.common.msgid import decode_offset_msg_id
    from ariane.errors import ArianeError, InvalidArgumentError

    found = []
    for msg_id in [m.strip() for m in msg_ids.split(",") if m.strip()]:
        try:
            if topic is not None:
                msg = await ctx.admin.query_message_by_id(topic, msg_id)
            else:
                try:
                    decode_offset_msg_id(msg_id)
                except InvalidArgumentError:
                    raise CommandFailed(
                        f"{msg_id!r} is not an offset message id (for a unique key use -t"
                        " TOPIC or queryMsgByUniqueKey)"
                    ) from None
                msg = await ctx.admin.view_message(msg_id)
        except CommandFailed:
            raise
        except ArianeError as exc:
            raise CommandFailed(f"message {msg_id} not found ({exc})") from None
        found.append(msg)
    return await _messages_view(ctx, found, group, client_id)


@admin_command("queryMsgByKey", "Query messages by key.")
@_TOPIC
@click.option("-k", "--msgKey", "key", required=True, help="The key (KEYS property).")
@click.option("-b", "--beginTimestamp", "begin_ms", type=TimestampType(), help="Stored from.")
@click.option("-e", "--endTimestamp", "end_ms", type=TimestampType(), help="Stored until.")
@click.option("-c", "--maxNum", "max_num", type=click.IntRange(1, 10_000), default=64)
async def query_msg_by_key(
    ctx: AdminContext,
    topic: str,
    key: str,
    begin_ms: int | None,
    end_ms: int | None,
    max_num: int,
) -> View:
    """The messages of TOPIC whose keys contain KEY (broker index lookup on every broker)."""
    _check_times(ctx, begin_ms, end_ms, "-b")
    from ariane.client.errors import QueryNotFoundError, TopicNotExistError

    try:
        msgs = await ctx.admin.query_message(
            topic, key, max_num=max_num, begin_ms=begin_ms or 0, end_ms=end_ms
        )
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    except QueryNotFoundError:
        msgs = []
    msgs.sort(key=lambda m: (m.store_timestamp_ms, m.queue_id, m.queue_offset))
    dicts = [message_dict(m, body=False) for m in msgs]
    lines = [] if dicts else [f"no message of topic {topic} has key {key!r}"]
    lines += await trace_hints(ctx.admin, [m.msg_id for m in msgs], ctx.timeout_ms)
    return View(
        {"topic": topic, "key": key, "messages": dicts}, [_list_table(dicts, body=False)], lines
    )


@admin_command("queryMsgByUniqueKey", "Query a message by unique key.")
@click.option("-i", "--msgId", "msg_id", required=True, help="The unique key (UNIQ_KEY).")
@_TOPIC
@click.option("-g", "--consumerGroup", "group", help="With -d: consume it on that client.")
@click.option("-d", "--clientId", "client_id", help="With -g: the client to consume on.")
@click.option("-a", "--showAll", "show_all", is_flag=True, help="Every copy (e.g. resends).")
async def query_msg_by_unique_key(
    ctx: AdminContext,
    msg_id: str,
    topic: str,
    group: str | None,
    client_id: str | None,
    show_all: bool,
) -> View:
    """The message of TOPIC whose unique key (the producer's msgId) is MSG_ID."""
    if (group is None) != (client_id is None):
        raise ctx.usage_error("-g and -d go together")
    from ariane.client.errors import QueryNotFoundError, TopicNotExistError

    try:
        if show_all:
            msgs = await ctx.admin.query_message(topic, msg_id, max_num=64)
            msgs = [m for m in msgs if m.msg_id == msg_id] or [
                await ctx.admin.query_message_by_id(topic, msg_id)
            ]
        else:
            msgs = [await ctx.admin.query_message_by_id(topic, msg_id)]
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    except QueryNotFoundError:
        raise CommandFailed(f"no message with unique key {msg_id} in topic {topic}") from None
    return await _messages_view(ctx, msgs, group, client_id)


@admin_command("queryMsgByOffset", "Query a message by queue offset.")
@_TOPIC
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=QUEUE_ID, required=True)
@click.option("-o", "--offset", type=OFFSET, required=True, help="Queue offset.")
async def query_msg_by_offset(
    ctx: AdminContext, topic: str, broker_name: str, queue_id: int, offset: int
) -> View:
    """The message at OFFSET of queue QUEUE_ID of TOPIC on BROKER_NAME."""
    from ariane.client.errors import TopicNotExistError
    from ariane.client.message import MessageQueue
    from ariane.errors import InvalidArgumentError

    mq = MessageQueue(topic, broker_name, queue_id)
    try:
        msg = await ctx.admin.query_message_by_offset(mq, offset)
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    except InvalidArgumentError as exc:
        raise CommandFailed(str(exc)) from None
    if msg is None:
        raise CommandFailed(f"no message at offset {offset} of {topic}@{broker_name}:{queue_id}")
    d = message_dict(msg)
    return View({"message": d}, [_detail(d)])


async def _queues(
    ctx: AdminContext, topic: str, broker_name: str | None = None, queue_id: int | None = None
) -> list[tuple[Any, str]]:
    """(queue, master address) of every readable queue of ``topic``, optionally one broker's
    or one queue id's."""
    from ariane.client.errors import TopicNotExistError

    try:
        queues = await ctx.admin.readable_queues(topic)
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    out = [
        (mq, addr)
        for mq, addr in queues
        if (broker_name is None or mq.broker_name == broker_name)
        and (queue_id is None or mq.queue_id == queue_id)
    ]
    if not out:
        raise CommandFailed(f"topic {topic!r} has no such readable queue")
    return out


async def _read_queue(
    ctx: AdminContext,
    mq: Any,
    addr: str,
    group: str,
    start: int,
    end: int,
    limit: int,
) -> list[Any]:
    """Messages of ``mq`` with offsets in [start, end), at most ``limit``, no commit."""
    return await ctx.admin.read_queue_range(mq, addr, start, end, limit=limit, group=group)


async def _range(
    ctx: AdminContext, mq: Any, addr: str, begin_ms: int | None, end_ms: int | None
) -> tuple[int, int]:
    """Offsets [lo, hi) that hold every message of ``mq`` stored in [begin, end)."""
    return await ctx.admin.offset_range_by_time(mq, addr, begin_ms, end_ms)


def _check_times(ctx: AdminContext, begin_ms: int | None, end_ms: int | None, flag: str) -> None:
    """A begin time after the end time is a usage error (it would select nothing)."""
    if begin_ms is not None and end_ms is not None and begin_ms > end_ms:
        raise ctx.usage_error(f"{flag} {begin_ms} is after -e {end_ms}: swap them")


def _in_time(msg: Any, begin_ms: int | None, end_ms: int | None) -> bool:
    stored: int = msg.store_timestamp_ms
    return (begin_ms is None or stored >= begin_ms) and (end_ms is None or stored < end_ms)


def _tag_filter(expression: str) -> set[str] | None:
    text = expression.strip()
    if text in ("", "*"):
        return None
    return {t.strip() for t in text.split("||") if t.strip()}


@admin_command("printMsg", "Print the messages of a topic.")
@_TOPIC
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True)
@click.option("-s", "--subExpression", "expression", default="*", help='Tags, e.g. "A || B".')
@click.option("-b", "--beginTimestamp", "begin_ms", type=TimestampType(), help="Stored from.")
@click.option("-e", "--endTimestamp", "end_ms", type=TimestampType(), help="Stored before.")
@click.option("-d", "--printBody", "print_body", type=click.BOOL, default=True, show_default=True)
async def print_msg(
    ctx: AdminContext,
    topic: str,
    charset: str,
    expression: str,
    begin_ms: int | None,
    end_ms: int | None,
    print_body: bool,
) -> View:
    """Every message of TOPIC (stored between -b and -e when given), queue by queue,
    filtered by tags; nothing is committed."""
    _check_times(ctx, begin_ms, end_ms, "-b")
    from ariane.client.admin import TOOLS_CONSUMER_GROUP

    charset = _check_charset(ctx, charset)
    tags = _tag_filter(expression)
    msgs: list[dict[str, Any]] = []
    for mq, addr in await _queues(ctx, topic):
        lo, hi = await _range(ctx, mq, addr, begin_ms, end_ms)
        for m in await _read_queue(ctx, mq, addr, TOOLS_CONSUMER_GROUP, lo, hi, hi - lo):
            if (tags is None or m.tags in tags) and _in_time(m, begin_ms, end_ms):
                msgs.append(message_dict(m, charset=charset, body=print_body))
    return View({"topic": topic, "messages": msgs}, [_list_table(msgs, body=print_body)])


@admin_command("printMsgByQueue", "Print the messages of one queue.")
@_TOPIC
@click.option("-a", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=QUEUE_ID, required=True)
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True)
@click.option("-s", "--subExpression", "expression", default="*", help='Tags, e.g. "A || B".')
@click.option("-b", "--beginTimestamp", "begin_ms", type=TimestampType(), help="Stored from.")
@click.option("-e", "--endTimestamp", "end_ms", type=TimestampType(), help="Stored before.")
@click.option(
    "-p", "--printMsg", "print_msgs", type=click.BOOL, default=False, help="List the messages."
)
@click.option("-d", "--printBody", "print_body", type=click.BOOL, default=False, show_default=True)
@click.option(
    "-f", "--calculate", "by_tag", type=click.BOOL, default=False, help="Count messages by tag."
)
async def print_msg_by_queue(
    ctx: AdminContext,
    topic: str,
    broker_name: str,
    queue_id: int,
    charset: str,
    expression: str,
    begin_ms: int | None,
    end_ms: int | None,
    print_msgs: bool,
    print_body: bool,
    by_tag: bool,
) -> View:
    """The messages of one queue (QUEUE_ID of TOPIC on BROKER_NAME), stored between -b and -e
    when given, filtered by tags: how many, the list with -p true (bodies with -d true) and the
    count per tag, largest first, with -f true. Nothing is committed."""
    _check_times(ctx, begin_ms, end_ms, "-b")
    from ariane.client.admin import TOOLS_CONSUMER_GROUP

    charset = _check_charset(ctx, charset)
    tags = _tag_filter(expression)
    ((mq, addr),) = await _queues(ctx, topic, broker_name, queue_id)
    lo, hi = await _range(ctx, mq, addr, begin_ms, end_ms)
    found = [
        m
        for m in await _read_queue(ctx, mq, addr, TOOLS_CONSUMER_GROUP, lo, hi, hi - lo)
        if (tags is None or m.tags in tags) and _in_time(m, begin_ms, end_ms)
    ]
    data: dict[str, Any] = {"topic": topic, "brokerName": broker_name, "queueId": queue_id}
    data.update(minOffset=lo, maxOffset=hi, count=len(found))
    tables: list[Table] = []
    if print_msgs:
        msgs = [message_dict(m, charset=charset, body=print_body) for m in found]
        data["messages"] = msgs
        tables.append(_list_table(msgs, body=print_body))
    if by_tag:
        counts: dict[str, int] = {}
        for m in found:
            if m.tags and m.tags.strip():
                counts[m.tags] = counts.get(m.tags, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        data["tagCounts"] = dict(ranked)
        tables.append(Table(("Tag", "Count"), list(ranked), numeric=frozenset({"Count"})))
    line = f"{len(found)} message(s) in offsets [{lo}, {hi}) of {topic}@{broker_name}:{queue_id}"
    return View(data, tables, [line])


@admin_command("consumeMessage", "Consume (pull) messages without committing.")
@_TOPIC
@click.option("-b", "--brokerName", "broker_name", help="Only this broker's queues.")
@click.option("-i", "--queueId", "queue_id", type=QUEUE_ID, help="Only this queue.")
@click.option("-o", "--offset", type=OFFSET, help="Start offset (with -b and -i).")
@click.option("-g", "--consumerGroup", "group", help="Group to pull as (default TOOLS_CONSUMER).")
@click.option("-s", "--beginTimestamp", "begin_ms", type=TimestampType(), help="Stored from.")
@click.option("-e", "--endTimestamp", "end_ms", type=TimestampType(), help="Stored before.")
@click.option(
    "-c", "--MessageNumber", "count", type=click.IntRange(1), default=128, show_default=True
)
async def consume_message(
    ctx: AdminContext,
    topic: str,
    broker_name: str | None,
    queue_id: int | None,
    offset: int | None,
    group: str | None,
    begin_ms: int | None,
    end_ms: int | None,
    count: int,
) -> View:
    """Pull up to COUNT messages of TOPIC (one queue with -b/-i[/-o], or every queue, from
    the time -s or the oldest message) and print them; no offset is committed."""
    if offset is not None and (broker_name is None or queue_id is None):
        raise ctx.usage_error("-o needs -b and -i")
    _check_times(ctx, begin_ms, end_ms, "-s")
    from ariane.client.admin import TOOLS_CONSUMER_GROUP

    msgs: list[dict[str, Any]] = []
    for mq, addr in await _queues(ctx, topic, broker_name, queue_id):
        if len(msgs) >= count:
            break
        lo, hi = await _range(ctx, mq, addr, begin_ms, end_ms)
        if offset is not None:
            lo = offset
        got = await _read_queue(
            ctx, mq, addr, group or TOOLS_CONSUMER_GROUP, lo, hi, count - len(msgs)
        )
        msgs.extend(message_dict(m) for m in got if _in_time(m, begin_ms, end_ms))
    return View({"topic": topic, "messages": msgs}, [_list_table(msgs, body=True)])


@admin_command("sendMessage", "Send a message.")
@_TOPIC
@click.option("-p", "--body", required=True, help="Message body (UTF-8).")
@click.option("-k", "--key", help="Message keys.")
@click.option("-c", "--tags", help="Message tag.")
@click.option("-b", "--broker", "broker_name", help="Send to this broker (with -i).")
@click.option("-i", "--qid", "queue_id", type=QUEUE_ID, help="Queue id (with -b).")
async def send_message(
    ctx: AdminContext,
    topic: str,
    body: str,
    key: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
) -> View:
    """Send one message to TOPIC with the normal producer (a chosen queue with -b and -i)."""
    if (broker_name is None) != (queue_id is None):
        raise ctx.usage_error("-b and -i go together")
    if not body:
        raise ctx.usage_error("the body is empty")
    from ariane.client import Message, MessageQueue

    async with ctx.producer(f"mqadmin_{os.getpid()}") as producer:
        msg = Message(topic, body.encode("utf-8"), tags=tags, keys=key)
        if broker_name is not None and queue_id is not None:
            result = await producer.send(msg, queue=MessageQueue(topic, broker_name, queue_id))
        else:
            result = await producer.send(msg)
    data = {
        "topic": topic,
        "brokerName": result.message_queue.broker_name,
        "queueId": result.message_queue.queue_id,
        "queueOffset": result.queue_offset,
        "sendStatus": result.status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
    }
    table = Table(
        ("Broker Name", "Queue Id", "Queue Offset", "Send Status", "Msg Id", "Offset Msg Id"),
        [
            (
                data["brokerName"],
                data["queueId"],
                data["queueOffset"],
                data["sendStatus"],
                data["msgId"],
                data["offsetMsgId"],
            )
        ],
        numeric=frozenset({"Queue Id", "Queue Offset"}),
    )
    return View(data, [table])
