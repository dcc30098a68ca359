"""Consumer offset commands (RocketMQ ``tools.command.offset`` and ``consumer``):
consumerProgress, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from ariane.admin.command import AdminContext, CommandFailed, TimestampType, admin_command
from ariane.admin.output import Table, Ts, View

__all__ = [
    "clone_group_offset",
    "consumer_progress",
    "progress_rows",
    "reset_offset_by_time",
    "skip_accumulated_message",
]

RETRY_PREFIX = "%RETRY%"
_TOPIC = click.option("-t", "--topic", required=True, help="Topic name.")
_GROUP = click.option("-g", "--group", "group", required=True, help="Consumer group.")


def progress_rows(stats: Any, client_of: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One ``consumerProgress`` row per queue of a ``ConsumeStats``, sorted by topic, broker
    and queue; ``client_of`` maps ``topic@broker@queueId`` to the client holding it."""
    rows = []
    for mq in sorted(stats.offset_table, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
        w = stats.offset_table[mq]
        row = {
            "topic": mq.topic,
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "brokerOffset": w.broker_offset,
            "consumerOffset": w.consumer_offset,
            "diff": w.broker_offset - w.consumer_offset,
            "inflight": max(0, w.pull_offset - w.consumer_offset),
            "lastTimestamp": w.last_timestamp,
        }
        if client_of is not None:
            row["clientIp"] = client_of.get(f"{mq.topic}@{mq.broker_name}@{mq.queue_id}")
        rows.append(row)
    return rows


async def _clients_of_queues(ctx: AdminContext, group: str) -> dict[str, str]:
    """Queue -> client address, from each online consumer's running information."""
    from ariane.admin.group import jsonable
    from ariane.errors import ArianeError

    try:
        conn = await ctx.admin.consumer_connections(group)
    except ArianeError:
        return {}
    out: dict[str, str] = {}
    for c in conn.connection_set:
        try:
            info = jsonable(await ctx.admin.consumer_running_info(group, c.client_id))
        except ArianeError:
            continue
        mq_table = info.get("mqTable") if isinstance(info, dict) else None
        for key in mq_table or {}:
            out[key] = c.client_addr
    return out


async def _group_progress(ctx: AdminContext, group: str, show_client_ip: bool) -> View:
    stats = await ctx.admin.consume_stats(group)
    if not stats.offset_table:
        raise CommandFailed(
            f"consumer group {group!r} has no consume progress (unknown group, or it has not"
            " committed an offset yet)"
        )
    client_of = await _clients_of_queues(ctx, group) if show_client_ip else None
    rows = progress_rows(stats, client_of)
    columns = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset"]
    columns += ["Client IP"] if show_client_ip else []
    columns += ["Diff", "Inflight", "LastTime"]
    table = Table(
        columns,
        numeric=frozenset({"QID", "Broker Offset", "Consumer Offset", "Diff", "Inflight"}),
    )
    for r in rows:
        cells: list[Any] = [
            r["topic"],
            r["brokerName"],
            r["queueId"],
            r["brokerOffset"],
            r["consumerOffset"],
        ]
        if show_client_ip:
            cells.append(r.get("clientIp"))
        cells += [r["diff"], r["inflight"], Ts(r["lastTimestamp"])]
        table.rows.append(cells)
    total = sum(r["diff"] for r in rows)
    data = {"group": group, "consumeTps": stats.consume_tps, "diffTotal": total, "queues": rows}
    lines = [f"Consume TPS: {stats.consume_tps:.2f}", f"Consume Diff Total: {total}"]
    return View(data, [table], lines)


async def _all_groups_progress(ctx: AdminContext) -> View:
    from ariane.errors import ArianeError

    topics = await ctx.admin.topic_list()
    groups = sorted({t[len(RETRY_PREFIX) :] for t in topics if t.startswith(RETRY_PREFIX)})
    gate = asyncio.Semaphore(16)

    async def one(group: str) -> dict[str, Any]:
        async with gate:
            stats = await ctx.admin.consume_stats(group)
            row: dict[str, Any] = {
                "group": group,
                "count": 0,
                "version": None,
                "consumeType": None,
                "messageModel": None,
                "consumeTps": stats.consume_tps,
                "diffTotal": sum(
                    w.broker_offset - w.consumer_offset for w in stats.offset_table.values()
                ),
            }
            try:
                conn = await ctx.admin.consumer_connections(group)
            except ArianeError:
                return row
        from ariane.common.versions import version_desc

        versions = sorted({c.version for c in conn.connection_set})
        row.update(
            count=len(conn.connection_set),
            version=version_desc(versions[-1]) if versions else None,
            consumeType=conn.consume_type.name if conn.consume_type else None,
            messageModel=conn.message_model.name if conn.message_model else None,
        )
        return row

    rows = await asyncio.gather(*(one(g) for g in groups))
    table = Table(
        ("Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total"),
        numeric=frozenset({"Count", "TPS", "Diff Total"}),
    )
    for r in rows:
        table.rows.append(
            (
                r["group"],
                r["count"],
                r["version"] or "OFFLINE",
                r["consumeType"],
                r["messageModel"],
                r["consumeTps"],
                r["diffTotal"],
            )
        )
    return View({"groups": list(rows)}, [table])


@admin_command("consumerProgress", "A consumer group's progress and lag.")
@click.option("-g", "--groupName", "group", help="Consumer group (default: every group).")
@click.option("-s", "--showClientIP", "show_client_ip", is_flag=True, help="Show client IPs.")
async def consumer_progress(ctx: AdminContext, group: str | None, show_client_ip: bool) -> View:
    """Per queue of GROUP: broker offset, consumer offset, diff (lag), in-flight messages
    and the store time of the last consumed message. Without -g: one summary row per group
    (groups are found from their %RETRY% topics, as RocketMQ does)."""
    if group is None:
        return await _all_groups_progress(ctx)
    return await _group_progress(ctx, group, show_client_ip)


async def _reset(
    ctx: AdminContext, group: str, topic: str, timestamp_ms: int, force: bool
) -> tuple[str, dict[Any, int]]:
    from ariane.client.errors import TopicNotExistError
    from ariane.errors import InvalidArgumentError

    try:
        await ctx.admin.topic_route(topic)
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    try:
        return await ctx.admin.reset_group_offset(group, topic, timestamp_ms, force=force)
    except InvalidArgumentError as exc:
        raise CommandFailed(str(exc)) from None


def _reset_view(
    group: str, topic: str, timestamp_ms: int, mode: str, table: dict[Any, int], what: str
) -> View:
    offsets = [
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
        for mq, off in sorted(table.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    ]
    rows = Table(("Broker Name", "QID", "New Offset"), numeric=frozenset({"QID", "New Offset"}))
    rows.rows = [(o["brokerName"], o["queueId"], o["offset"]) for o in offsets]
    data = {
        "group": group,
        "topic": topic,
        "timestamp": timestamp_ms,
        "mode": mode,
        "offsets": offsets,
    }
    how = (
        "reset by the brokers, online consumers notified"
        if mode == "broker"
        else "no consumer online: offsets committed directly"
    )
    return View(data, [rows], [f"{what} group[{group}] topic[{topic}]: {how}"])


@admin_command("resetOffsetByTime", "Reset a group's offsets to a time.")
@_GROUP
@_TOPIC
@click.option(
    "-s",
    "--timestamp",
    "timestamp_ms",
    type=TimestampType(),
    required=True,
    help="now, epoch milliseconds or yyyy-MM-dd#HH:mm:ss:SSS (local time).",
)
@click.option(
    "-f",
    "--force",
    type=click.BOOL,
    default=True,
    show_default=True,
    help="Also move offsets forward (false: only backward).",
)
@click.option("-c", "--cplus", is_flag=True, hidden=True, help="Accepted for compatibility.")
async def reset_offset_by_time(
    ctx: AdminContext, group: str, topic: str, timestamp_ms: int, force: bool, cplus: bool
) -> View:
    """Move GROUP's offsets of TOPIC to the first message stored at or after the time,
    without restarting consumers: every broker hosting the topic commits the new offsets
    and tells the group's online clients (RESET_CONSUMER_CLIENT_OFFSET). When a broker
    refuses because no client is online (CONSUMER_NOT_ONLINE, brokers without
    useServerSideResetOffset) the offsets are committed directly instead (RocketMQ's
    resetOffsetByTimeOld). JSON "mode" says which: "broker" or "direct"."""
    mode, table = await _reset(ctx, group, topic, timestamp_ms, force)
    return _reset_view(group, topic, timestamp_ms, mode, table, "reset offsets of")


@admin_command("skipAccumulatedMessage", "Skip every message not consumed yet.")
@_GROUP
@_TOPIC
@click.option("-f", "--force", type=click.BOOL, default=True, show_default=True)
async def skip_accumulated_message(ctx: AdminContext, group: str, topic: str, force: bool) -> View:
    """Move GROUP's offsets of TOPIC to the end of every queue (lag becomes 0)."""
    mode, table = await _reset(ctx, group, topic, -1, force)
    return _reset_view(group, topic, -1, mode, table, "skipped accumulated messages of")


@admin_command("cloneGroupOffset", "Copy offsets from another group.")
@click.option("-s", "--srcGroup", "src_group", required=True, help="Group to copy from.")
@click.option("-d", "--destGroup", "dest_group", required=True, help="Group to copy to.")
@_TOPIC
@click.option(
    "-o",
    "--offline",
    type=click.BOOL,
    default=False,
    help="true: copy even if the source group is online elsewhere.",
)
async def clone_group_offset(
    ctx: AdminContext, src_group: str, dest_group: str, topic: str, offline: bool
) -> View:
    """Overwrite DEST_GROUP's offsets of TOPIC with SRC_GROUP's on every broker hosting it."""
    from ariane.client.errors import TopicNotExistError

    try:
        brokers = await ctx.admin.clone_group_offset(src_group, dest_group, topic, offline=offline)
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    data = {"srcGroup": src_group, "destGroup": dest_group, "topic": topic, "brokers": brokers}
    lines = [f"clone group offset {src_group} -> {dest_group} on {a} success" for a in brokers]
    return View(data, lines=lines)
