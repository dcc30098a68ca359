"""Statistics commands (RocketMQ ``tools.command.stats`` and ``broker``): statsAll,
brokerConsumeStats.

statsAll follows RocketMQ's ``StatsAllSubCommand``: per topic (retry and DLQ topics left
out) InTPS is the minute TPS of ``TOPIC_PUT_NUMS`` summed over the topic's masters, and
InMsg24Hour the day sum (else the hour sum, else the minute sum); per consumer group of the
topic OutTPS/OutMsg24Hour come from ``GROUP_GET_NUMS`` (``topic@group``) and Accumulation
is the group's total lag on the topic.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from ariane.admin.command import AdminContext, CommandFailed, admin_command
from ariane.admin.output import Table, Ts, View

__all__ = ["broker_consume_stats", "compute_24h_sum", "stats_all"]

_SKIP_PREFIXES = ("%RETRY%", "%DLQ%")


def compute_24h_sum(data: Any) -> int:
    """RocketMQ's ``compute24HourSum``: the day sum, else the hour sum, else the minute sum."""
    if data is None:
        return 0
    for window in (data.stats_day, data.stats_hour, data.stats_minute):
        if window.sum:
            return int(window.sum)
    return 0


async def _item(ctx: AdminContext, addrs: list[str], name: str, key: str) -> tuple[float, int]:
    answers = await asyncio.gather(*(ctx.admin.broker_stats(a, name, key) for a in addrs))
    tps = float(sum(d.stats_minute.tps for d in answers if d is not None))
    return tps, sum(compute_24h_sum(d) for d in answers)


async def _topic_rows(ctx: AdminContext, topic: str, active_only: bool) -> list[dict[str, Any]]:
    from ariane.client.errors import TopicNotExistError

    try:
        route = await ctx.admin.topic_route(topic)
    except TopicNotExistError:
        return []
    addrs = sorted({bd.master_addr for bd in route.broker_datas if bd.master_addr})
    in_tps, in_24h = await _item(ctx, addrs, "TOPIC_PUT_NUMS", topic)
    groups = await ctx.admin.topic_consumed_by(topic)
    rows = []
    for group in groups:
        out_tps, out_24h = await _item(ctx, addrs, "GROUP_GET_NUMS", f"{topic}@{group}")
        stats = await ctx.admin.consume_stats(group, topic)
        lag = sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
        rows.append(
            {
                "topic": topic,
                "group": group,
                "accumulation": max(0, lag),
                "inTps": in_tps,
                "outTps": out_tps,
                "inMsg24Hour": in_24h,
                "outMsg24Hour": out_24h,
            }
        )
    if not rows:
        rows.append(
            {
                "topic": topic,
                "group": None,
                "accumulation": 0,
                "inTps": in_tps,
                "outTps": 0.0,
                "inMsg24Hour": in_24h,
                "outMsg24Hour": 0,
            }
        )
    if active_only:
        rows = [r for r in rows if r["inMsg24Hour"] or r["outMsg24Hour"]]
    return rows


@admin_command("statsAll", "TPS and accumulation of every topic and group.")
@click.option("-a", "--activeTopic", "active", is_flag=True, help="Only topics with traffic.")
@click.option("-t", "--topic", help="Only this topic.")
async def stats_all(ctx: AdminContext, active: bool, topic: str | None) -> View:
    """Per topic and consumer group: accumulation (lag), InTPS/OutTPS of the last minute
    and messages in/out over the last 24 hours (broker statistics)."""
    if topic is not None:
        topics = [topic]
        from ariane.client.errors import TopicNotExistError

        try:
            await ctx.admin.topic_route(topic)
        except TopicNotExistError:
            raise CommandFailed(f"topic {topic!r} does not exist") from None
    else:
        topics = sorted(t for t in await ctx.admin.topic_list() if not t.startswith(_SKIP_PREFIXES))
    gate = asyncio.Semaphore(16)

    async def one(t: str) -> list[dict[str, Any]]:
        async with gate:
            return await _topic_rows(ctx, t, active)

    rows = [r for chunk in await asyncio.gather(*(one(t) for t in topics)) for r in chunk]
    columns = (
        "Topic",
        "Consumer Group",
        "Accumulation",
        "InTPS",
        "OutTPS",
        "InMsg24Hour",
        "OutMsg24Hour",
    )
    table = Table(columns, numeric=frozenset(columns[2:]))
    for r in rows:
        table.rows.append(
            (
                r["topic"],
                r["group"] or "NO_CONSUMER",
                r["accumulation"],
                r["inTps"],
                r["outTps"],
                r["inMsg24Hour"],
                r["outMsg24Hour"],
            )
        )
    return View({"rows": rows}, [table])


@admin_command("brokerConsumeStats", "Consume stats of every group on a broker.")
@click.option("-b", "--brokerAddr", "broker_addr", required=True, help="Broker address.")
@click.option("-l", "--level", type=click.IntRange(0), default=0, help="Only diffs >= LEVEL.")
@click.option("-o", "--order", type=click.BOOL, default=False, help="Only ordered topics.")
@click.option("-t", "--timeoutMillis", "timeout_millis", type=click.IntRange(1), hidden=True)
async def broker_consume_stats(
    ctx: AdminContext, broker_addr: str, level: int, order: bool, timeout_millis: int | None
) -> View:
    """Per topic, group and queue on one broker: broker offset, consumer offset, diff and
    the store time of the last consumed message."""
    stats = await ctx.admin.broker_consume_stats(broker_addr, is_order=order)
    rows: list[dict[str, Any]] = []
    for entry in stats.consume_stats_list:
        for group, per_topic in sorted(entry.items()):
            for cs in per_topic:
                for mq in sorted(cs.offset_table, key=lambda q: (q.topic, q.queue_id)):
                    w = cs.offset_table[mq]
                    diff = w.broker_offset - w.consumer_offset
                    if diff < level:
                        continue
                    rows.append(
                        {
                            "topic": mq.topic,
                            "group": group,
                            "brokerName": mq.broker_name,
                            "queueId": mq.queue_id,
                            "brokerOffset": w.broker_offset,
                            "consumerOffset": w.consumer_offset,
                            "diff": diff,
                            "lastTimestamp": w.last_timestamp,
                        }
                    )
    rows.sort(key=lambda r: (r["topic"], r["group"], r["queueId"]))
    columns = ("Topic", "Group", "Broker Name", "QID", "Broker Offset", "Consume Offset", "Diff")
    table = Table(
        (*columns, "LastTime"),
        numeric=frozenset({"QID", "Broker Offset", "Consume Offset", "Diff"}),
    )
    for r in rows:
        table.rows.append(
            (
                r["topic"],
                r["group"],
                r["brokerName"],
                r["queueId"],
                r["brokerOffset"],
                r["consumerOffset"],
                r["diff"],
                Ts(r["lastTimestamp"]),
            )
        )
    data = {"brokerAddr": broker_addr, "totalDiff": stats.total_diff, "queues": rows}
    return View(data, [table], [f"Diff Total: {stats.total_diff}"])
