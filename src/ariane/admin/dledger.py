"""DLedger group commands (Ariane's; DLedger's own ``leadershipTransfer`` tool does the same
for Java clusters): transferLeadership hands a group's leadership to one of its nodes and
waits until that node is the registered master."""

from __future__ import annotations

import asyncio
import time

import click

from ariane.admin.command import AdminContext, CommandFailed, admin_command
from ariane.admin.output import View, kv_table
from ariane.common.cli_bounds import FiniteFloatRange
from ariane.common.roles import MASTER_ID
from ariane.errors import ArianeError

__all__ = ["transfer_leadership"]


async def _nodes(ctx: AdminContext, broker_name: str) -> dict[int, str]:
    info = await ctx.admin.cluster_info()
    data = info.broker_addr_table.get(broker_name)
    if data is None:
        raise CommandFailed(f"no broker group named {broker_name!r} is registered")
    return dict(data.broker_addrs)


async def _self_id(ctx: AdminContext, addr: str) -> str | None:
    try:
        return (await ctx.admin.broker_runtime_info(addr)).get("dLegerSelfId")
    except ArianeError:
        return None


@admin_command("transferLeadership", "Hand a DLedger group's leadership to one of its nodes.")
@click.option("-g", "--brokerName", "broker_name", required=True, help="The DLedger group.")
@click.option("-t", "--transfereeId", "transferee", required=True, help="The node (n1...).")
@click.option(
    "-w", "--waitSeconds", "wait_s", type=FiniteFloatRange(0.1, 3600), default=10.0, show_default=True,
    help="How long to wait for the node to become the master.",
)  # fmt: skip
async def transfer_leadership(
    ctx: AdminContext, broker_name: str, transferee: str, wait_s: float
) -> View:
    """Ask the group's master to hand leadership to node TRANSFEREE (a peer of
    ``dLegerPeers``, caught up with it), then wait until the NameServers have that node as
    the group's master (brokerId 0)."""
    nodes = await _nodes(ctx, broker_name)
    master = nodes.get(MASTER_ID)
    if master is None:
        raise CommandFailed(f"{broker_name} has no master right now; try again in a moment")
    if await _self_id(ctx, master) == transferee:
        return View(
            {"master": master, "transferee": transferee},
            [],
            [f"{transferee} already leads {broker_name} ({master})"],
        )
    remark = await ctx.admin.transfer_leadership(master, transferee)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = (await _nodes(ctx, broker_name)).get(MASTER_ID)
        if now is not None and now != master and await _self_id(ctx, now) == transferee:
            info = await ctx.admin.broker_runtime_info(now)
            data = {
                "brokerName": broker_name,
                "previousMaster": master,
                "master": now,
                "dLegerSelfId": transferee,
                "dLegerTerm": info.get("dLegerTerm", ""),
            }
            return View(data, [kv_table(data)])
    raise CommandFailed(
        f"{remark or 'the transfer started'}, but {transferee} is not the master of "
        f"{broker_name} after {wait_s:g} s"
    )
