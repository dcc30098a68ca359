"""Replication commands (RocketMQ 5 ``tools.command.ha``): haStatus.

For a master: its CommitLog end, how many slaves are connected and in sync, and per slave its
acknowledged offset, how far behind it is (bytes, an estimate in messages, seconds since the
oldest message it lacks was stored), the transfer rate and where the transfer stands. For a
slave: its master, its state (TRANSFER, CHECKING, CONNECTING, REFUSED with the reason), its
own end and when it last heard from the master."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from ariane.admin.cluster import targets
from ariane.admin.command import AdminContext, admin_command
from ariane.admin.output import Table, View

__all__ = ["ha_status"]


def _when(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _tables(addr: str, status: dict[str, Any]) -> list[Table]:
    if status.get("master"):
        head = Table(
            ["#MasterAddr", "#MasterCommitLogMaxOffset", "#SlaveNum", "#InSyncSlaveNum"],
            numeric=frozenset({"#MasterCommitLogMaxOffset", "#SlaveNum", "#InSyncSlaveNum"}),
        )
        conns = status.get("haConnectionInfo") or []
        head.rows.append(
            (addr, status.get("masterCommitLogMaxOffset", 0), len(conns),
             status.get("inSyncSlaveNums", 0))
        )  # fmt: skip
        slaves = Table(
            ["#SlaveAddr", "#SlaveAckOffset", "#Diff", "#DiffMessages", "#DiffSeconds",
             "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere"],
            numeric=frozenset({"#SlaveAckOffset", "#Diff", "#DiffMessages", "#DiffSeconds",
                               "#TransferSpeed(KB/s)", "#TransferFromWhere"}),
        )  # fmt: skip
        for c in conns:
            slaves.rows.append(
                (
                    c.get("addr", ""), c.get("slaveAckOffset", -1), c.get("diff", 0),
                    c.get("lagMessages", 0), c.get("lagSeconds", 0.0),
                    f"{c.get('transferredByteInSecond', 0) / 1024:.2f}",
                    "OK" if c.get("inSync") else "Fall Behind", c.get("transferFromWhere", -1),
                )
            )  # fmt: skip
        return [head, slaves]
    client = status.get("haClientRuntimeInfo") or {}
    table = Table(
        ["#SlaveAddr", "#MasterAddr", "#State", "#MaxOffset", "#LastReadTime", "#LastWriteTime"],
        numeric=frozenset({"#MaxOffset"}),
    )
    table.rows.append(
        (
            addr, client.get("masterAddr", ""), client.get("state", ""),
            client.get("maxOffset", 0), _when(int(client.get("lastReadTimestamp", 0))),
            _when(int(client.get("lastWriteTimestamp", 0))),
        )
    )  # fmt: skip
    return [table]


@admin_command("haStatus", "The replication status of brokers.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address (host:port).")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
async def ha_status(ctx: AdminContext, broker_addr: str | None, cluster: str | None) -> View:
    """Replication status (GET_BROKER_HA_STATUS) of one broker (-b, a master or a slave) or
    of the masters of a cluster (-c): each slave's acknowledged offset and how far behind it
    is; a slave's master, state and last contact. A slave that refused its master (another
    or rewritten history) says why."""
    addrs = await targets(ctx, broker_addr, cluster)
    statuses = await asyncio.gather(*(ctx.admin.broker_ha_status(a) for a in addrs))
    by_addr = dict(zip(addrs, statuses, strict=True))
    tables = [t for a, s in by_addr.items() for t in _tables(a, s)]
    lines = []
    for a, s in by_addr.items():
        refused = (s.get("haClientRuntimeInfo") or {}).get("refusedReason")
        if refused:
            lines.append(f"{a}: not replicating: {refused}")
    return View({"brokers": by_addr}, tables, lines=lines)
