"""Topic commands (RocketMQ ``tools.command.topic``): updateTopic, deleteTopic, topicList,
topicRoute, topicStatus, topicClusterList, updateTopicPerm, allocateMQ, updateOrderConf."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from ariane.admin.command import AdminContext, PermType, admin_command, one_of
from ariane.admin.output import Table, Ts, View
from ariane.common.sysflag import TOPIC_UNIT, TOPIC_UNIT_SUB, perm_to_string

__all__ = [
    "allocate_mq",
    "delete_topic",
    "topic_cluster_list",
    "topic_list",
    "topic_route",
    "topic_status",
    "update_order_conf",
    "update_topic",
    "update_topic_perm",
]

#: NameServer KV namespace of ordered topics' ``brokerName:queueNums`` lists.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

_TOPIC = click.option("-t", "--topic", required=True, help="Topic name.")
_BROKER = click.option("-b", "--brokerAddr", "broker_addr", help="Broker address (host:port).")
_CLUSTER = click.option("-c", "--clusterName", "cluster", help="Cluster name.")


async def _require_route(ctx: AdminContext, topic: str) -> Any:
    from ariane.client.errors import TopicNotExistError

    try:
        return await ctx.admin.topic_route(topic)
    except TopicNotExistError:
        from ariane.admin.command import CommandFailed

        raise CommandFailed(f"topic {topic!r} does not exist") from None


async def _names_by_addr(ctx: AdminContext) -> dict[str, str]:
    info = await ctx.admin.cluster_info()
    out: dict[str, str] = {}
    for bd in info.broker_addr_table.values():
        for addr in bd.broker_addrs.values():
            out[addr] = bd.broker_name
    return out


@admin_command("updateTopic", "Update or create a topic.")
@_BROKER
@_CLUSTER
@_TOPIC
@click.option("-r", "--readQueueNums", "read_queue_nums", type=click.IntRange(0, 1024), default=8)
@click.option("-w", "--writeQueueNums", "write_queue_nums", type=click.IntRange(0, 1024), default=8)
@click.option("-p", "--perm", type=PermType(), default=6, help="2 = W, 4 = R, 6 = RW.")
@click.option("-o", "--order", type=click.BOOL, default=False, help="Ordered topic (true|false).")
@click.option("-u", "--unit", type=click.BOOL, default=False, help="Unit topic (true|false).")
@click.option(
    "-s", "--hasUnitSub", "has_unit_sub", type=click.BOOL, default=False, help="true|false."
)
@click.option("-a", "--attributes", help="Topic attributes, e.g. +message.type=FIFO.")
async def update_topic(
    ctx: AdminContext,
    broker_addr: str | None,
    cluster: str | None,
    topic: str,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    order: bool,
    unit: bool,
    has_unit_sub: bool,
    attributes: str | None,
) -> View:
    """Create or update TOPIC on one broker (-b) or every master of a cluster (-c)."""
    one_of(ctx.click_ctx, b=broker_addr, c=cluster)
    attrs: dict[str, str] = {}
    for item in (attributes or "").split(","):
        key, sep, value = item.strip().lstrip("+").partition("=")
        if not item.strip():
            continue
        if not sep or not key:
            raise ctx.usage_error(f"bad attribute {item!r}: use +key=value[,+key=value]")
        attrs[key] = value
    sys_flag = (TOPIC_UNIT if unit else 0) | (TOPIC_UNIT_SUB if has_unit_sub else 0)
    written = await ctx.admin.create_topic(
        topic,
        cluster=cluster,
        broker_addr=broker_addr,
        read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums,
        perm=perm,
        order=order,
        attributes=attrs,
        topic_sys_flag=sys_flag,
    )
    if order:
        names = await _names_by_addr(ctx)
        conf = ";".join(sorted(f"{names[a]}:{write_queue_nums}" for a in written if a in names))
        if conf:
            await ctx.admin.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
    data = {
        "topic": topic,
        "brokers": written,
        "readQueueNums": read_queue_nums,
        "writeQueueNums": write_queue_nums,
        "perm": perm,
        "order": order,
        "topicSysFlag": sys_flag,
        "attributes": attrs,
    }
    return View(data, lines=[f"create topic {topic} on {a} success" for a in written])


@admin_command("deleteTopic", "Delete a topic.")
@_TOPIC
@click.option("-c", "--clusterName", "cluster", required=True, help="Cluster name.")
async def delete_topic(ctx: AdminContext, topic: str, cluster: str) -> View:
    """Delete TOPIC from the masters of a cluster and from every NameServer."""
    await _require_route(ctx, topic)
    await ctx.admin.delete_topic(topic, cluster=cluster)
    data = {"topic": topic, "cluster": cluster}
    return View(data, lines=[f"delete topic {topic} from cluster {cluster} success"])


@admin_command("topicList", "Fetch all topics.")
@click.option(
    "-c", "--clusterModel", "cluster_model", is_flag=True, help="Also show cluster and groups."
)
async def topic_list(ctx: AdminContext, cluster_model: bool) -> View:
    """Every topic the NameServer knows (-c: with its cluster and consumer groups)."""
    topics = sorted(await ctx.admin.topic_list())
    if not cluster_model:
        return View({"topics": topics}, [Table(("Topic",), [(t,) for t in topics])])
    info = await ctx.admin.cluster_info()
    cluster_of = {name: bd.cluster for name, bd in info.broker_addr_table.items()}
    gate = asyncio.Semaphore(32)

    async def one(topic: str) -> dict[str, Any]:
        async with gate:
            try:
                route = await ctx.admin.topic_route(topic)
                groups = await ctx.admin.topic_consumed_by(topic)
            except Exception:
                return {"topic": topic, "cluster": None, "consumerGroups": []}
        clusters = sorted({cluster_of.get(b.broker_name, b.cluster) for b in route.broker_datas})
        return {
            "topic": topic,
            "cluster": clusters[0] if clusters else None,
            "consumerGroups": groups,
        }

    rows = await asyncio.gather(*(one(t) for t in topics))
    table = Table(("Cluster", "Topic", "Consumer Groups"))
    for row in rows:
        table.rows.append((row["cluster"], row["topic"], ", ".join(row["consumerGroups"]) or "-"))
    return View({"topics": rows}, [table])


@admin_command("topicRoute", "Examine a topic's route.")
@_TOPIC
async def topic_route(ctx: AdminContext, topic: str) -> View:
    """The route of TOPIC: its brokers and queues."""
    route = await _require_route(ctx, topic)
    brokers = Table(("Broker Name", "Cluster", "BID", "Addr"), title="Brokers")
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        for bid, addr in sorted(bd.broker_addrs.items()):
            brokers.rows.append((bd.broker_name, bd.cluster, bid, addr))
    queues = Table(
        ("Broker Name", "Read Queues", "Write Queues", "Perm", "Sys Flag"),
        title="Queues",
        numeric=frozenset({"Read Queues", "Write Queues", "Sys Flag"}),
    )
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        queues.rows.append(
            (
                qd.broker_name,
                qd.read_queue_nums,
                qd.write_queue_nums,
                f"{qd.perm} ({perm_to_string(qd.perm)})",
                qd.topic_sys_flag,
            )
        )
    lines = [f"order topic conf: {route.order_topic_conf}"] if route.order_topic_conf else []
    return View(route.to_json(), [brokers, queues], lines)


@admin_command("topicStatus", "Examine a topic's queues.")
@_TOPIC
async def topic_status(ctx: AdminContext, topic: str) -> View:
    """Min and max offset and last update time of every queue of TOPIC."""
    await _require_route(ctx, topic)
    stats = await ctx.admin.topic_stats(topic)
    table = Table(
        ("Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"),
        numeric=frozenset({"QID", "Min Offset", "Max Offset"}),
    )
    queues = []
    for mq in sorted(stats.offset_table, key=lambda q: (q.broker_name, q.queue_id)):
        off = stats.offset_table[mq]
        queues.append(
            {
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "minOffset": off.min_offset,
                "maxOffset": off.max_offset,
                "lastUpdateTimestamp": off.last_update_timestamp,
            }
        )
        table.rows.append(
            (
                mq.broker_name,
                mq.queue_id,
                off.min_offset,
                off.max_offset,
                Ts(off.last_update_timestamp),
            )
        )
    return View({"topic": topic, "queues": queues}, [table])


@admin_command("topicClusterList", "The clusters hosting a topic.")
@_TOPIC
async def topic_cluster_list(ctx: AdminContext, topic: str) -> View:
    """The clusters hosting TOPIC."""
    await _require_route(ctx, topic)
    clusters = await ctx.admin.topic_clusters(topic)
    return View(
        {"topic": topic, "clusters": clusters}, [Table(("Cluster",), [(c,) for c in clusters])]
    )


@admin_command("updateTopicPerm", "Update a topic's permission.")
@_BROKER
@_CLUSTER
@_TOPIC
@click.option("-p", "--perm", type=PermType(), required=True, help="2 = W, 4 = R, 6 = RW.")
async def update_topic_perm(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None, topic: str, perm: int
) -> View:
    """Change TOPIC's permission on one broker (-b) or the masters of a cluster (-c),
    keeping its queues."""
    one_of(ctx.click_ctx, b=broker_addr, c=cluster)
    route = await _require_route(ctx, topic)
    hosting = {bd.master_addr for bd in route.broker_datas if bd.master_addr}
    if broker_addr:
        targets = [broker_addr]
        if broker_addr not in hosting:
            from ariane.admin.command import CommandFailed

            raise CommandFailed(f"broker {broker_addr} does not host topic {topic!r}")
    else:
        targets = sorted(set(await ctx.admin.master_addrs(cluster)) & hosting)
    changes = []
    for addr in targets:
        config = await ctx.admin.topic_config(topic, addr)
        old = config.perm
        await ctx.admin.create_topic(
            topic,
            broker_addr=addr,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=perm,
            order=config.order,
            attributes=config.attributes,
            topic_sys_flag=config.topic_sys_flag,
        )
        changes.append({"brokerAddr": addr, "oldPerm": old, "newPerm": perm})
    lines = [
        f"update topic {topic} perm on {c['brokerAddr']}: {c['oldPerm']} -> {c['newPerm']}"
        for c in changes
    ]
    return View({"topic": topic, "changes": changes}, lines=lines)


# -- issue 20: allocateMQ, updateOrderConf ----------------------------------------------------------


@admin_command("allocateMQ", "How a topic's queues are allocated to clients.")
@_TOPIC
@click.option(
    "-i", "--ipList", "ip_list", required=True, help="Client ips (or ids), comma-separated."
)
async def allocate_mq(ctx: AdminContext, topic: str, ip_list: str) -> View:
    """Which readable queues of TOPIC each client of IP_LIST would consume, with the
    averaging strategy every clustering consumer uses by default
    (AllocateMessageQueueAveragely; clients in the order given)."""
    from ariane.client._allocate import AllocateMessageQueueAveragely
    from ariane.client._route import subscribe_queues_from_route

    ips = list(dict.fromkeys(ip.strip() for ip in ip_list.split(",") if ip.strip()))
    if not ips:
        raise ctx.usage_error("-i names no client")
    route = await _require_route(ctx, topic)
    mqs = sorted(
        subscribe_queues_from_route(topic, route), key=lambda q: (q.broker_name, q.queue_id)
    )
    strategy = AllocateMessageQueueAveragely()
    result = {ip: strategy.allocate("allocateMQ", ip, mqs, ips) for ip in ips}
    table = Table(("Client", "Broker Name", "Queue Ids"))
    for ip, queues in result.items():
        by_broker: dict[str, list[str]] = {}
        for mq in queues:
            by_broker.setdefault(mq.broker_name, []).append(str(mq.queue_id))
        if not by_broker:
            table.rows.append((ip, None, None))
        for name, ids in by_broker.items():
            table.rows.append((ip, name, ",".join(ids)))
    data = {
        "topic": topic,
        "result": {ip: [mq.to_json() for mq in qs] for ip, qs in result.items()},
    }
    return View(data, [table])


def _check_order_conf(ctx: AdminContext, conf: str | None) -> str:
    """``brokerName:queueNums[;brokerName:queueNums]``, checked and normalized."""
    if not conf or not conf.strip():
        raise ctx.usage_error(
            "please set orderConf with option -v (brokerName1:num;brokerName2:num)"
        )
    items = []
    for item in conf.strip().strip(";").split(";"):
        name, sep, num = item.strip().rpartition(":")
        if not sep or not name or not num.strip().isdigit() or int(num) <= 0:
            raise ctx.usage_error(
                f"bad order conf item {item.strip()!r}: use brokerName:queueNums, e.g. broker-a:8"
            )
        items.append(f"{name}:{int(num)}")
    return ";".join(items)


@admin_command("updateOrderConf", "Create, update, get or delete a topic's order conf.")
@_TOPIC
@click.option(
    "-m",
    "--method",
    type=click.Choice(["put", "get", "delete"]),
    required=True,
    help="put, get or delete.",
)
@click.option("-v", "--orderConf", "order_conf", help="brokerName1:num;brokerName2:num (put).")
async def update_order_conf(
    ctx: AdminContext, topic: str, method: str, order_conf: str | None
) -> View:
    """The ordered-topic configuration of TOPIC on the NameServers (KV namespace
    ORDER_TOPIC_CONFIG: which brokers host its queues, and how many): put (-v), get or
    delete. Brokers mark the topic ordered when they next register, and with the NameServer's
    orderMessageEnable its route carries the conf."""
    if method == "put":
        conf = _check_order_conf(ctx, order_conf)
        await ctx.admin.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
        line = f"update orderConf success. topic=[{topic}], orderConf=[{conf}]"
        return View({"topic": topic, "method": method, "orderConf": conf}, lines=[line])
    if order_conf is not None:
        raise ctx.usage_error(f"-v goes with -m put, not -m {method}")
    if method == "get":
        value = await ctx.admin.get_kv_config(ORDER_TOPIC_CONFIG, topic)
        line = f"get orderConf success. topic=[{topic}], orderConf=[{value or ''}]"
        if value is None:
            line = f"topic {topic} has no order conf"
        return View({"topic": topic, "method": method, "orderConf": value}, lines=[line])
    await ctx.admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)
    line = f"delete orderConf success. topic=[{topic}]"
    return View({"topic": topic, "method": method, "orderConf": None}, lines=[line])
