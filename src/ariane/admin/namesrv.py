"""NameServer commands (RocketMQ ``tools.command.namesrv``): getNamesrvConfig,
updateNamesrvConfig, updateKvConfig, deleteKvConfig. Each goes to every NameServer given
with ``-n``, as RocketMQ's admin does."""

from __future__ import annotations

import click

from ariane.admin.command import AdminContext, CommandFailed, admin_command
from ariane.admin.output import View, kv_table

__all__ = ["delete_kv_config", "get_namesrv_config", "update_kv_config", "update_namesrv_config"]


@admin_command("getNamesrvConfig", "The NameServers' settings.")
async def get_namesrv_config(ctx: AdminContext) -> View:
    """Every setting of every NameServer given with -n."""
    configs = await ctx.admin.namesrv_config()
    return View({"namesrvs": configs}, [kv_table(c, title=a) for a, c in configs.items()])


@admin_command("updateNamesrvConfig", "Change NameServer settings.")
@click.option("-k", "--key", required=True, help="Setting name.")
@click.option("-v", "--value", required=True, help="New value.")
async def update_namesrv_config(ctx: AdminContext, key: str, value: str) -> View:
    """Change setting KEY to VALUE on every NameServer given with -n (applied and saved to
    its config file)."""
    before = await ctx.admin.namesrv_config()
    for addr, config in before.items():
        if key not in config:
            raise CommandFailed(f"name server {addr} has no setting {key!r}")
    done = await ctx.admin.update_namesrv_config({key: value})
    lines = [f"update name server config success, {a}: {key} = {value}" for a in done]
    return View({"key": key, "value": value, "namesrvs": done}, lines=lines)


@admin_command("updateKvConfig", "Create or update a KV config entry.")
@click.option("-s", "--namespace", required=True, help="Namespace (e.g. ORDER_TOPIC_CONFIG).")
@click.option("-k", "--key", required=True, help="Key.")
@click.option("-v", "--value", required=True, help="Value.")
async def update_kv_config(ctx: AdminContext, namespace: str, key: str, value: str) -> View:
    """Create or update KEY in NAMESPACE of the NameServers' KV config (persisted by them)."""
    done = await ctx.admin.put_kv_config(namespace, key, value)
    lines = [f"update kv config success, {a}: {namespace}/{key} = {value}" for a in done]
    return View({"namespace": namespace, "key": key, "value": value, "namesrvs": done}, lines=lines)


@admin_command("deleteKvConfig", "Delete a KV config entry.")
@click.option("-s", "--namespace", required=True, help="Namespace.")
@click.option("-k", "--key", required=True, help="Key.")
async def delete_kv_config(ctx: AdminContext, namespace: str, key: str) -> View:
    """Delete KEY from NAMESPACE of the NameServers' KV config."""
    done = await ctx.admin.delete_kv_config(namespace, key)
    lines = [f"delete kv config success, {a}: {namespace}/{key}" for a in done]
    return View({"namespace": namespace, "key": key, "namesrvs": done}, lines=lines)
