"""Queue commands (RocketMQ ``tools.command.queue``): queryCq.

queryCq reads raw ConsumeQueue entries with QUERY_CONSUME_QUEUE: for each index its CommitLog
offset, size and tags code (the tag's hash), and with ``-g`` whether the online group's
filter selects it, which is how one finds out why a consumer skips messages.
"""

from __future__ import annotations

import click

from ariane.admin.command import OFFSET, QUEUE_ID, AdminContext, CommandFailed, admin_command
from ariane.admin.output import Table, View

__all__ = ["query_cq"]


async def _first_broker(ctx: AdminContext, topic: str) -> str:
    """The master of the first broker (by name) hosting ``topic``, as RocketMQ picks it."""
    from ariane.client.errors import TopicNotExistError

    try:
        route = await ctx.admin.topic_route(topic)
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        if bd.master_addr:
            return bd.master_addr
    raise CommandFailed(f"topic {topic!r} has no master broker in its route (give -b)")


@admin_command("queryCq", "Raw ConsumeQueue entries of one queue.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-q", "--queue", "queue_id", type=QUEUE_ID, required=True, help="Queue id.")
@click.option("-i", "--index", type=OFFSET, required=True, help="First entry (offset).")
@click.option(
    "-c", "--count", type=click.IntRange(1, 1000), default=10, show_default=True, help="Entries."
)
@click.option("-b", "--broker", "broker_addr", help="Broker address (default: the first one).")
@click.option("-g", "--consumer", "group", help="Consumer group: show whether its filter matches.")
async def query_cq(
    ctx: AdminContext,
    topic: str,
    queue_id: int,
    index: int,
    count: int,
    broker_addr: str | None,
    group: str | None,
) -> View:
    """COUNT ConsumeQueue entries of queue QUEUE of TOPIC from INDEX: CommitLog offset, size
    and tags code of each, the queue's min and max index and, with -g, the group's
    subscription and whether its filter matches each entry."""
    from ariane.errors import BrokerResponseError

    addr = broker_addr or await _first_broker(ctx, topic)
    try:
        body, remark = await ctx.admin.query_consume_queue(
            addr, topic, queue_id, index, count=count, group=group
        )
    except BrokerResponseError as exc:
        raise CommandFailed(f"broker {addr}: {exc.remark or exc}") from None
    columns = ["Index", "CommitLog Offset", "Size", "Tags Code"]
    columns += ["Matches"] if group else []
    table = Table([*columns, "Note"], numeric=frozenset(columns[:4]))
    entries = []
    for i, one in enumerate(body.queue_data, start=index):
        entries.append({"index": i, **one.to_json()})
        row: list[object] = [i, one.physic_offset, one.physic_size, one.tags_code]
        row += [one.eval] if group else []
        table.rows.append([*row, one.msg])
    lines = [f"Queue data: max: {body.max_queue_index}, min: {body.min_queue_index}"]
    if group:
        lines.append(f"Filter data: {body.filter_data}")
    if not entries:
        lines.append(remark or f"no entry from index {index}")
    data = {
        "brokerAddr": addr,
        "topic": topic,
        "queueId": queue_id,
        "maxQueueIndex": body.max_queue_index,
        "minQueueIndex": body.min_queue_index,
        "subscriptionData": body.subscription_data.to_json() if body.subscription_data else None,
        "filterData": body.filter_data,
        "entries": entries,
    }
    return View(data, [table] if entries else [], lines)
