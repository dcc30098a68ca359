"""Consumer/producer group commands (RocketMQ ``tools.command.consumer`` and ``connection``):
updateSubGroup, deleteSubGroup, consumerConnection, producerConnection, consumerStatus."""

from __future__ import annotations

from typing import Any

import click

from ariane.admin.command import AdminContext, CommandFailed, admin_command, one_of
from ariane.admin.output import Table, View, kv_table
from ariane.remoting.protocol.fastjson import jsonable

__all__ = [
    "consumer_connection",
    "consumer_status",
    "delete_sub_group",
    "jsonable",
    "producer_connection",
    "update_sub_group",
]

_GROUP = click.option("-g", "--groupName", "group", required=True, help="Consumer group.")
_BROKER = click.option("-b", "--brokerAddr", "broker_addr", help="Broker address (host:port).")
_CLUSTER = click.option("-c", "--clusterName", "cluster", help="Cluster name.")


@admin_command("updateSubGroup", "Update or create a subscription group.")
@_BROKER
@_CLUSTER
@_GROUP
@click.option("-s", "--consumeEnable", "consume_enable", type=click.BOOL, default=True)
@click.option(
    "-m", "--consumeFromMinEnable", "consume_from_min_enable", type=click.BOOL, default=True
)
@click.option(
    "-d", "--consumeBroadcastEnable", "consume_broadcast_enable", type=click.BOOL, default=True
)
@click.option("-o", "--consumeMessageOrderly", "orderly", type=click.BOOL, default=False)
@click.option("-q", "--retryQueueNums", "retry_queue_nums", type=click.IntRange(0, 1024), default=1)
@click.option(
    "-r", "--retryMaxTimes", "retry_max_times", type=click.IntRange(-1, 2**31 - 1), default=16
)
@click.option("-i", "--brokerId", "broker_id", type=click.IntRange(0, 2**63 - 1), default=0)
@click.option(
    "-w",
    "--whichBrokerWhenConsumeSlowly",
    "which_broker",
    type=click.IntRange(0, 2**63 - 1),
    default=1,
)
@click.option(
    "-a", "--notifyConsumerIdsChanged", "notify_ids_changed", type=click.BOOL, default=True
)
async def update_sub_group(
    ctx: AdminContext,
    broker_addr: str | None,
    cluster: str | None,
    group: str,
    consume_enable: bool,
    consume_from_min_enable: bool,
    consume_broadcast_enable: bool,
    orderly: bool,
    retry_queue_nums: int,
    retry_max_times: int,
    broker_id: int,
    which_broker: int,
    notify_ids_changed: bool,
) -> View:
    """Create or update consumer group GROUP on one broker (-b) or the masters of a
    cluster (-c)."""
    one_of(ctx.click_ctx, b=broker_addr, c=cluster)
    written = await ctx.admin.create_group(
        group,
        cluster=cluster,
        broker_addr=broker_addr,
        retry_max_times=retry_max_times,
        retry_queue_nums=retry_queue_nums,
        consume_orderly=orderly,
        consume_broadcast_enable=consume_broadcast_enable,
        consume_enable=consume_enable,
        consume_from_min_enable=consume_from_min_enable,
        broker_id=broker_id,
        which_broker_when_consume_slowly=which_broker,
        notify_consumer_ids_changed_enable=notify_ids_changed,
    )
    config = await ctx.admin.group_config(group, written[0])
    data = {"group": group, "brokers": written, "config": config.to_json()}
    lines = [f"create subscription group {group} on {a} success" for a in written]
    return View(data, lines=lines)


@admin_command("deleteSubGroup", "Delete a subscription group.")
@_BROKER
@_CLUSTER
@_GROUP
@click.option(
    "-r",
    "--removeOffset",
    "remove_offset",
    type=click.BOOL,
    default=True,
    help="Also remove the group's offsets (true|false).",
)
async def delete_sub_group(
    ctx: AdminContext,
    broker_addr: str | None,
    cluster: str | None,
    group: str,
    remove_offset: bool,
) -> View:
    """Delete consumer group GROUP from one broker (-b) or the masters of a cluster (-c)."""
    one_of(ctx.click_ctx, b=broker_addr, c=cluster)
    done = await ctx.admin.delete_group(
        group, cluster=cluster, broker_addr=broker_addr, clean_offset=remove_offset
    )
    lines = [f"delete subscription group {group} from {a} success" for a in done]
    return View({"group": group, "brokers": done}, lines=lines)


async def _consumer_connection(ctx: AdminContext, group: str) -> Any:
    from ariane.client.errors import ConsumerNotOnlineError

    try:
        return await ctx.admin.consumer_connections(group)
    except ConsumerNotOnlineError:
        raise CommandFailed(f"consumer group {group!r} is not online") from None


def _connections_table(conns: list[Any]) -> Table:
    table = Table(("#", "Client Id", "Client Addr", "Language", "Version"), numeric=frozenset("#"))
    for i, c in enumerate(sorted(conns, key=lambda c: c.client_id), 1):
        table.rows.append((i, c.client_id, c.client_addr, c.language, _version(c.version)))
    return table


def _version(code: int) -> str:
    """RocketMQ's ``MQVersion.getVersionDesc``: 479 -> V5_3_3 (approximate beyond known)."""
    from ariane.common.versions import version_desc

    return version_desc(code)


@admin_command("consumerConnection", "A consumer group's connections.")
@_GROUP
async def consumer_connection(ctx: AdminContext, group: str) -> View:
    """The online consumers of GROUP: connections, subscriptions and consume settings."""
    conn = await _consumer_connection(ctx, group)
    subs = Table(("Topic", "Sub Expression", "Type"), title="Subscriptions")
    for topic in sorted(conn.subscription_table):
        sd = conn.subscription_table[topic]
        subs.rows.append((topic, sd.sub_string, sd.expression_type))
    settings = {
        "consumeType": conn.consume_type.name if conn.consume_type else None,
        "messageModel": conn.message_model.name if conn.message_model else None,
        "consumeFromWhere": conn.consume_from_where.name if conn.consume_from_where else None,
    }
    data = {
        "group": group,
        "connections": [c.to_json() for c in conn.connection_set],
        "subscriptions": {t: s.to_json() for t, s in conn.subscription_table.items()},
        **settings,
    }
    tables = [_connections_table(conn.connection_set), subs, kv_table(settings)]
    return View(data, tables)


@admin_command("producerConnection", "A producer group's connections.")
@click.option("-g", "--producerGroup", "group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to.")
async def producer_connection(ctx: AdminContext, group: str, topic: str) -> View:
    """The producers of GROUP connected to a broker hosting TOPIC."""
    from ariane.client.errors import TopicNotExistError
    from ariane.errors import BrokerResponseError

    try:
        conn = await ctx.admin.producer_connections(group, topic)
    except TopicNotExistError:
        raise CommandFailed(f"topic {topic!r} does not exist") from None
    except BrokerResponseError as exc:
        raise CommandFailed(f"producer group {group!r} is not online ({exc.remark})") from None
    data = {
        "group": group,
        "topic": topic,
        "connections": [c.to_json() for c in conn.connection_set],
    }
    return View(data, [_connections_table(conn.connection_set)])


@admin_command("consumerStatus", "A consumer's own running information.")
@_GROUP
@click.option("-i", "--clientId", "client_id", help="One client (default: every client).")
@click.option("-s", "--jstack", is_flag=True, help="Ask for thread stacks (Java clients).")
async def consumer_status(
    ctx: AdminContext, group: str, client_id: str | None, jstack: bool
) -> View:
    """The running information each consumer of GROUP reports about itself (relayed by a
    broker): properties, subscriptions, queues held and consume statuses."""
    conn = await _consumer_connection(ctx, group)
    ids = sorted(c.client_id for c in conn.connection_set)
    if client_id is not None:
        if client_id not in ids:
            raise CommandFailed(f"client {client_id!r} is not a consumer of group {group!r}")
        ids = [client_id]
    from ariane.errors import ArianeError

    infos: dict[str, Any] = {}
    tables: list[Table] = []
    for cid in ids:
        try:
            info = await ctx.admin.consumer_running_info(group, cid)
        except ArianeError as exc:
            infos[cid] = {"error": str(exc)}
            tables.append(Table(("Error",), [(str(exc),)], title=cid))
            continue
        info = jsonable(info)
        infos[cid] = info
        props = info.get("properties") if isinstance(info, dict) else None
        if isinstance(props, dict):
            tables.append(kv_table(props, title=f"{cid}: properties"))
        mq_table = info.get("mqTable") if isinstance(info, dict) else None
        if isinstance(mq_table, dict) and mq_table:
            mqs = Table(("Queue", "Details"), title=f"{cid}: queues")
            for key in sorted(mq_table):
                mqs.rows.append((key, _short(mq_table[key])))
            tables.append(mqs)
        status = info.get("statusTable") if isinstance(info, dict) else None
        if isinstance(status, dict) and status:
            st = Table(("Topic", "Status"), title=f"{cid}: consume status")
            for key in sorted(status):
                st.rows.append((key, _short(status[key])))
            tables.append(st)
        if jstack and isinstance(info, dict) and info.get("jstack"):
            tables.append(Table(("Stack",), [(info["jstack"],)], title=f"{cid}: jstack"))
    clients = Table(("#", "Client Id", "Version"), numeric=frozenset("#"), title="Clients")
    versions = {c.client_id: c.version for c in conn.connection_set}
    for i, cid in enumerate(ids, 1):
        clients.rows.append((i, cid, _version(versions.get(cid, 0))))
    return View({"group": group, "clients": infos}, [clients, *tables])


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)
