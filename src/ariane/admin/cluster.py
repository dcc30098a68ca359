"""Cluster and broker commands (RocketMQ ``tools.command.cluster``, ``broker``, ``namesrv``):
clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig, wipeWritePerm, addWritePerm,
cleanExpiredCQ, deleteExpiredCommitLog."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import click

from ariane.admin.command import AdminContext, CommandFailed, admin_command, one_of
from ariane.admin.output import Table, View, kv_table
from ariane.client.broker_status import add_replication_lag, broker_row

__all__ = [
    "add_write_perm",
    "broker_row",
    "broker_status",
    "clean_expired_cq",
    "cluster_list",
    "delete_expired_commit_log",
    "get_broker_config",
    "targets",
    "update_broker_config",
    "wipe_write_perm",
]

_BROKER = click.option("-b", "--brokerAddr", "broker_addr", help="Broker address (host:port).")
_CLUSTER = click.option("-c", "--clusterName", "cluster", help="Cluster name.")


async def _runtime(ctx: AdminContext, addr: str) -> dict[str, str] | None:
    from ariane.errors import ArianeError

    try:
        return await ctx.admin.broker_runtime_info(addr)
    except ArianeError:
        return None


async def _cluster_view(ctx: AdminContext, more: bool) -> View:
    info = await ctx.admin.cluster_info()
    targets: list[tuple[str, str, int, str]] = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            if bd is None:
                continue
            for bid, addr in sorted(bd.broker_addrs.items()):
                targets.append((cluster, name, bid, addr))
    answers = await asyncio.gather(*(_runtime(ctx, t[3]) for t in targets))
    now_ms = int(time.time() * 1000)
    rows = [broker_row(*t, rt, now_ms) for t, rt in zip(targets, answers, strict=True)]
    add_replication_lag(rows)
    columns = ["Cluster Name", "Broker Name", "BID", "Addr", "Version"]
    if more:
        columns += ["InTotalYest", "OutTotalYest", "InTotalToday", "OutTotalToday"]
    else:
        columns += ["InTPS(LOAD)", "OutTPS(LOAD)", "PCWait(ms)", "Hour", "SPACE", "ACTIVATED"]
        columns += ["ROLE", "BEHIND(B)"]
    raft = any("raftRole" in r for r in rows)
    table = Table(
        [*columns, "Raft(Term)"] if raft else columns,
        numeric=frozenset({"BID", *columns[5:-3], "BEHIND(B)"})
        if not more
        else frozenset({"BID", *columns[5:]}),
    )
    for r in rows:
        head = (r["cluster"], r["brokerName"], r["brokerId"], r["addr"])
        if not r["reachable"]:
            table.rows.append((*head, "unreachable", *(["-"] * (len(table.columns) - 5))))
            continue
        tail = (f"{r['raftRole']}({r['raftTerm']})" if "raftRole" in r else "-",) if raft else ()
        if more:
            table.rows.append(
                (
                    *head,
                    r["version"],
                    r["inTotalYesterday"],
                    r["outTotalYesterday"],
                    r["inTotalToday"],
                    r["outTotalToday"],
                    *tail,
                )
            )
        else:
            table.rows.append(
                (
                    *head,
                    r["version"],
                    f"{r['inTps']:.2f}({r['sendQueueSize']},{r['sendQueueHeadWaitMs']}ms)",
                    f"{r['outTps']:.2f}({r['pullQueueSize']},0ms)",
                    r["pageCacheLockTimeMs"],
                    f"{r['hoursOfData']:.2f}",
                    f"{r['commitLogDiskRatio']:.4f}",
                    r["activated"],
                    r["role"] or "-",
                    "-" if r.get("behindBytes") is None else r["behindBytes"],
                    *tail,
                )
            )
    clusters = {c: sorted(names) for c, names in sorted(info.cluster_addr_table.items())}
    return View({"clusters": clusters, "brokers": rows}, [table])


@admin_command("clusterList", "List clusters and brokers with their TPS.")
@click.option("-m", "--moreStats", "more", is_flag=True, help="Message totals of yesterday/today.")
@click.option(
    "-i",
    "--interval",
    type=click.IntRange(1, 86_400),
    help="Repeat every INTERVAL seconds (Ctrl-C).",
)
async def cluster_list(ctx: AdminContext, more: bool, interval: int | None) -> View:
    """Every broker of every cluster with its version, InTPS/OutTPS (with the send/pull
    queue sizes and wait, "LOAD"), page-cache lock wait, hours of stored data, disk use, its
    role and, for a slave, how many bytes its CommitLog is behind its master's (-m: messages
    in/out yesterday and today); nodes of DLedger groups also show their Raft role and
    term."""
    view = await _cluster_view(ctx, more)
    while interval is not None:
        from ariane.admin.output import render_text

        render_text(view)
        await asyncio.sleep(interval)
        view = await _cluster_view(ctx, more)
    return view


async def targets(ctx: AdminContext, broker_addr: str | None, cluster: str | None) -> list[str]:
    """The broker (-b) or the masters of a cluster (-c) a command acts on."""
    one_of(ctx.click_ctx, b=broker_addr, c=cluster)
    from ariane.errors import InvalidArgumentError

    if broker_addr:
        return [broker_addr]
    try:
        addrs = await ctx.admin.master_addrs(cluster)
    except InvalidArgumentError:
        raise CommandFailed(f"cluster {cluster!r} does not exist") from None
    if not addrs:
        raise CommandFailed(f"cluster {cluster!r} has no master broker")
    return addrs


async def _per_broker_tables(
    ctx: AdminContext,
    broker_addr: str | None,
    cluster: str | None,
    fetch: Callable[[str], Awaitable[dict[str, str]]],
) -> View:
    """One key/value table per target broker: ``{"brokers": {addr: {key: value}}}``."""
    addrs = await targets(ctx, broker_addr, cluster)
    tables = await asyncio.gather(*(fetch(a) for a in addrs))
    by_addr = dict(zip(addrs, tables, strict=True))
    return View({"brokers": by_addr}, [kv_table(t, title=a) for a, t in by_addr.items()])


@admin_command("brokerStatus", "A broker's runtime statistics.")
@_BROKER
@_CLUSTER
async def broker_status(ctx: AdminContext, broker_addr: str | None, cluster: str | None) -> View:
    """The runtime statistics table (GET_BROKER_RUNTIME_INFO) of one broker (-b) or the
    masters of a cluster (-c)."""
    return await _per_broker_tables(ctx, broker_addr, cluster, ctx.admin.broker_runtime_info)


@admin_command("getBrokerConfig", "A broker's settings.")
@_BROKER
@_CLUSTER
async def get_broker_config(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None
) -> View:
    """Every setting of one broker (-b) or of the masters of a cluster (-c)."""
    return await _per_broker_tables(ctx, broker_addr, cluster, ctx.admin.broker_config)


@admin_command("updateBrokerConfig", "Change (and persist) a broker setting.")
@_BROKER
@_CLUSTER
@click.option("-k", "--key", required=True, help="Setting name (e.g. brokerPermission).")
@click.option("-v", "--value", required=True, help="New value.")
async def update_broker_config(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None, key: str, value: str
) -> View:
    """Change setting KEY to VALUE on one broker (-b) or the masters of a cluster (-c). The
    broker applies it at once (store tunables such as fileReservedTime after a restart, as the
    output says) and saves it, so it survives restarts. Store geometry, paths, identity,
    network, role and security settings are refused: they come from broker.conf only.
    brokerPermission 4 makes a broker read-only, 6 restores read and write."""
    addrs = await targets(ctx, broker_addr, cluster)
    before = await asyncio.gather(*(ctx.admin.broker_config(a) for a in addrs))
    for addr, config in zip(addrs, before, strict=True):
        if key not in config:
            raise CommandFailed(f"broker {addr} has no setting {key!r}")
    later = await asyncio.gather(*(ctx.admin.update_broker_config(a, {key: value}) for a in addrs))
    after = await asyncio.gather(*(ctx.admin.broker_config(a) for a in addrs))
    changes = []
    lines = []
    for a, b, c, saved in zip(addrs, before, after, later, strict=True):
        restart = key in saved
        # a setting read at start keeps its running value until then: report what was stored
        new = value if restart else c.get(key)
        changes.append(
            {"brokerAddr": a, "key": key, "oldValue": b.get(key), "newValue": new,
             "appliesAfterRestart": restart}
        )  # fmt: skip
        note = (
            f"saved, applies after a restart; running value {c.get(key)}"
            if restart
            else (f"was {b.get(key)}")
        )
        lines.append(f"update broker config success, {a}: {key} = {new} ({note})")
    return View({"changes": changes}, lines=lines)


async def _check_broker_name(ctx: AdminContext, name: str) -> None:
    info = await ctx.admin.cluster_info()
    if name not in info.broker_addr_table:
        raise CommandFailed(f"no broker named {name!r} (see clusterList)")


@admin_command("wipeWritePerm", "Remove a broker's write permission in routes.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
async def wipe_write_perm(ctx: AdminContext, broker_name: str) -> View:
    """Make BROKER_NAME read-only in the routes of every NameServer given with -n (producers
    stop choosing it at their next route refresh; its consumers keep reading)."""
    await _check_broker_name(ctx, broker_name)
    counts = await ctx.admin.wipe_write_perm(broker_name)
    lines = [
        f"wipe write perm of broker[{broker_name}] in name server[{ns}] OK, {n} topics"
        for ns, n in counts.items()
    ]
    return View({"brokerName": broker_name, "topicCounts": counts}, lines=lines)


@admin_command("addWritePerm", "Give a broker its write permission back.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
async def add_write_perm(ctx: AdminContext, broker_name: str) -> View:
    """Make BROKER_NAME writable again in the routes of every NameServer given with -n."""
    await _check_broker_name(ctx, broker_name)
    counts = await ctx.admin.add_write_perm(broker_name)
    lines = [
        f"add write perm of broker[{broker_name}] in name server[{ns}] OK, {n} topics"
        for ns, n in counts.items()
    ]
    return View({"brokerName": broker_name, "topicCounts": counts}, lines=lines)


async def _housekeeping(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None, what: str
) -> View:
    if broker_addr and cluster:
        raise ctx.usage_error("give -b or -c, not both")
    from ariane.errors import InvalidArgumentError

    try:
        if what == "cleanExpiredCQ":
            done = await ctx.admin.clean_expired_consume_queue(
                cluster=cluster, broker_addr=broker_addr
            )
        else:
            done = await ctx.admin.delete_expired_commit_log(
                cluster=cluster, broker_addr=broker_addr
            )
    except InvalidArgumentError as exc:
        raise CommandFailed(str(exc)) from None
    return View({"brokers": done}, lines=[f"{what} success on {a}" for a in done])


@admin_command("cleanExpiredCQ", "Clean expired consume queues.")
@_BROKER
@_CLUSTER
async def clean_expired_cq(ctx: AdminContext, broker_addr: str | None, cluster: str | None) -> View:
    """Delete consume queues that only index messages already deleted from the CommitLog, on
    one broker (-b), the masters of a cluster (-c) or every master."""
    return await _housekeeping(ctx, broker_addr, cluster, "cleanExpiredCQ")


@admin_command("deleteExpiredCommitLog", "Delete expired CommitLog files now.")
@_BROKER
@_CLUSTER
async def delete_expired_commit_log(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None
) -> View:
    """Ask one broker (-b), the masters of a cluster (-c) or every master to delete CommitLog
    files past their retention (fileReservedTime) now instead of at deleteWhen."""
    return await _housekeeping(ctx, broker_addr, cluster, "deleteExpiredCommitLog")
