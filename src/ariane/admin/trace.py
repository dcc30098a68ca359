"""Message trace commands (RocketMQ ``QueryMsgTraceByIdSubCommand``): queryMsgTraceById, and
the hints the message query commands print when a trace exists.

queryMsgTraceById looks the message id up in the trace topic's key index on every broker that
hosts it (``Admin.query_message_trace``) and prints one row per record in time order: the
producer's Pub (store host, send cost, status), each delivery's SubBefore/SubAfter (consumer
group, client host, retry count, listener cost, result) and a transaction's EndTransaction.
Records that do not decode are listed under their own title instead of failing the command.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import click

from ariane.admin.command import AdminContext, CommandFailed, TimestampType, admin_command
from ariane.admin.output import Table, Ts, View

if TYPE_CHECKING:
    from ariane.client.admin import Admin
    from ariane.client.trace import MessageTrace, TraceEntry

__all__ = ["query_msg_trace_by_id", "trace_hints"]

#: Message ids whose trace the query commands look for (one index query each).
_HINT_LIMIT = 8
_COLUMNS = (
    "Type",
    "Time",
    "Group",
    "Client Host",
    "Store Host",
    "Cost (ms)",
    "Status",
    "Retries",
    "Detail",
)


def _detail(e: TraceEntry) -> str | None:
    t = e.trace_type.value
    if t == "Pub":
        return f"{e.msg_type} {e.body_length} bytes, region {e.region_id}"
    if t == "SubAfter":
        return e.consume_result or None
    if t == "EndTransaction":
        check = " (check-back)" if e.from_transaction_check else ""
        return f"{e.transaction_state}{check}"
    return None


def _timeline(trace: MessageTrace) -> Table:
    table = Table(
        _COLUMNS,
        numeric=frozenset({"Cost (ms)", "Retries"}),
        title=f"Trace of {trace.msg_id} ({trace.entries[0].topic or 'topic unknown'})",
    )
    for e in trace.entries:
        table.rows.append(
            [
                e.trace_type.value,
                Ts(e.timestamp_ms or None),
                e.group,
                e.client_host,
                e.store_host or None,
                e.cost_ms,
                e.status or None,
                e.retry_times,
                _detail(e),
            ]
        )
    return table


def _undecodable(trace: MessageTrace) -> Table:
    table = Table(
        ("Trace Msg Id", "Client Host", "Stored", "Record", "Problem", "Text"),
        title="Undecodable trace records",
    )
    for u in trace.undecodable:
        table.rows.append(
            [u.trace_msg_id, u.client_host, Ts(u.store_timestamp_ms), u.index, u.error, u.text]
        )
    return table


@admin_command("queryMsgTraceById", "Query a message's trace.")
@click.option("-i", "--msgId", "msg_id", required=True, help="The message id (unique key).")
@click.option("-t", "--traceTopic", "trace_topic", help="Trace topic (RMQ_SYS_TRACE_TOPIC).")
@click.option("-b", "--beginTimestamp", "begin_ms", type=TimestampType(), help="Stored from.")
@click.option("-e", "--endTimestamp", "end_ms", type=TimestampType(), help="Stored until.")
@click.option("-c", "--maxNum", "max_num", type=click.IntRange(1, 10_000), default=64)
async def query_msg_trace_by_id(
    ctx: AdminContext,
    msg_id: str,
    trace_topic: str | None,
    begin_ms: int | None,
    end_ms: int | None,
    max_num: int,
) -> View:
    """The trace of message MSG_ID: who sent it, which broker stored it, who consumed it,
    how often and how long each step took (needs producers/consumers with trace on)."""
    from ariane.client.errors import TopicNotExistError
    from ariane.errors import InvalidArgumentError

    msg_id = msg_id.strip()
    if not msg_id:
        raise ctx.usage_error("-i needs a message id")
    try:
        trace = await ctx.admin.query_message_trace(
            msg_id, trace_topic, max_num=max_num, begin_ms=begin_ms or 0, end_ms=end_ms
        )
    except InvalidArgumentError as exc:
        raise ctx.usage_error(str(exc)) from None
    except TopicNotExistError:
        topic = trace_topic or "RMQ_SYS_TRACE_TOPIC"
        raise CommandFailed(
            f"trace topic {topic!r} does not exist (start a broker with traceTopicEnable=true "
            "or give the clients' trace topic with -t)"
        ) from None
    tables = []
    lines = []
    if trace.entries:
        tables.append(_timeline(trace))
    else:
        lines.append(f"no trace of message {msg_id} in topic {trace.trace_topic}")
    if trace.undecodable:
        tables.append(_undecodable(trace))
        lines.append(f"{len(trace.undecodable)} trace record(s) could not be decoded")
    return View(trace.to_dict(), tables, lines)


async def trace_hints(admin: Admin, msg_ids: list[str], timeout_ms: int) -> list[str]:
    """One line per message (of the first few) that has records in the default trace
    topic; nothing when there is no trace topic or the lookup fails."""
    from ariane.common.trace import DEFAULT_TRACE_TOPIC
    from ariane.errors import ArianeError

    async def has_trace(msg_id: str) -> bool:
        try:
            found = await admin.query_message(DEFAULT_TRACE_TOPIC, msg_id, max_num=1)
        except ArianeError:
            return False
        return bool(found)

    ids = list(dict.fromkeys(i for i in msg_ids if i))[:_HINT_LIMIT]
    try:
        found: list[Any] = await asyncio.wait_for(
            asyncio.gather(*(has_trace(i) for i in ids)), timeout_ms / 1000
        )
    except TimeoutError:
        return []
    return [
        f"message {i} has a trace: mqadmin queryMsgTraceById -i {i}"
        for i, yes in zip(ids, found, strict=True)
        if yes
    ]
