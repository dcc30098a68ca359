"""ACL commands of ``mqadmin`` (RocketMQ 4.9/5.1 ``tools/command/acl``): updateAclConfig,
deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion, getAclConfig.

Each acts on one broker (-b) or on every master of a cluster (-c), with RocketMQ's flags. When
the brokers run with ACL, these need an admin account: ``--ak``/``--sk`` or
``$ROCKETMQ_HOME/conf/tools.yml``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import click

from ariane.acl.plain import PlainAccessConfig
from ariane.admin.cluster import targets
from ariane.admin.command import AdminContext, admin_command
from ariane.admin.output import Table, View

__all__ = [
    "cluster_acl_config_version",
    "delete_acl_config",
    "get_acl_config",
    "update_acl_config",
    "update_global_white_addr",
]

_BROKER = click.option("-b", "--brokerAddr", "broker_addr", help="Broker address (host:port).")
_CLUSTER = click.option("-c", "--clusterName", "cluster", help="Cluster name.")


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def _admin_flag(value: str | None) -> bool:
    if value is None:
        return False
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise click.BadParameter(f"{value!r} is not true or false", param_hint="'-m'")
    return lowered == "true"


@admin_command("updateAclConfig", "Create or update an ACL account on brokers.")
@_BROKER
@_CLUSTER
@click.option("-a", "--accessKey", "access_key", required=True, help="The account's accessKey.")
@click.option("-s", "--secretKey", "secret_key", required=True, help="Its secretKey.")
@click.option("-w", "--whiteRemoteAddress", "white", help="An IP rule that needs no signature.")
@click.option("-i", "--defaultTopicPerm", "default_topic", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-u", "--defaultGroupPerm", "default_group", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-t", "--topicPerms", "topic_perms", help="e.g. topicA=DENY,topicD=SUB")
@click.option("-g", "--groupPerms", "group_perms", help="e.g. groupD=DENY,groupD=SUB")
@click.option("-m", "--admin", "admin_flag", help="true or false.")
async def update_acl_config(
    ctx: AdminContext,
    broker_addr: str | None,
    cluster: str | None,
    access_key: str,
    secret_key: str,
    white: str | None,
    default_topic: str | None,
    default_group: str | None,
    topic_perms: str | None,
    group_perms: str | None,
    admin_flag: str | None,
) -> View:
    """Create the account -a (or update it) in the ACL files of one broker (-b) or of the
    masters of a cluster (-c); the brokers apply it at once."""
    try:
        is_admin = _admin_flag(admin_flag)
    except click.BadParameter as exc:
        raise ctx.usage_error(exc.format_message()) from None
    config = PlainAccessConfig(
        access_key, secret_key, white, is_admin, default_topic, default_group,
        _split(topic_perms), _split(group_perms),
    )  # fmt: skip
    addrs = await targets(ctx, broker_addr, cluster)
    await asyncio.gather(*(ctx.admin.update_acl_account(a, config) for a in addrs))
    shown = {k: v for k, v in config.to_json().items() if k != "secretKey"}
    lines = [f"create or update plain access config to {a} success." for a in addrs]
    lines.append(f"{shown}")
    return View({"brokers": addrs, "account": shown}, lines=lines)


@admin_command("deleteAclConfig", "Delete an ACL account from brokers.")
@_BROKER
@_CLUSTER
@click.option("-a", "--accessKey", "access_key", required=True, help="The account to delete.")
async def delete_acl_config(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None, access_key: str
) -> View:
    """Delete the account -a from the ACL files of one broker (-b) or of the masters of a
    cluster (-c)."""
    addrs = await targets(ctx, broker_addr, cluster)
    await asyncio.gather(*(ctx.admin.delete_acl_account(a, access_key) for a in addrs))
    lines = [f"delete plain access config account from {a} success." for a in addrs]
    lines.append(f"account's accesskey is:{access_key}")
    return View({"brokers": addrs, "accessKey": access_key}, lines=lines)


@admin_command("updateGlobalWhiteAddr", "Replace the global white addresses of brokers.")
@_BROKER
@_CLUSTER
@click.option(
    "-g",
    "--globalWhiteRemoteAddresses",
    "addrs",
    required=True,
    help="Comma list of IP rules, e.g. 10.10.103.*,192.168.0.*",
)
@click.option(
    "-p", "--aclFileFullPath", "path", help="The ACL file to change (default plain_acl.yml)."
)
async def update_global_white_addr(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None, addrs: str, path: str | None
) -> View:
    """Set the globalWhiteRemoteAddresses of one broker (-b) or of the masters of a cluster (-c):
    clients from these addresses need no account."""
    rules = list(_split(addrs))
    brokers = await targets(ctx, broker_addr, cluster)
    await asyncio.gather(*(ctx.admin.update_global_white_addrs(a, rules, path) for a in brokers))
    lines = [f"update global white remote addresses to {a} success." for a in brokers]
    return View({"brokers": brokers, "globalWhiteRemoteAddresses": rules}, lines=lines)


def _ms(timestamp: int) -> str:
    if timestamp <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp / 1000))


@admin_command("clusterAclConfigVersion", "The ACL file versions of brokers.")
@_BROKER
@_CLUSTER
async def cluster_acl_config_version(
    ctx: AdminContext, broker_addr: str | None, cluster: str | None
) -> View:
    """Each ACL file of one broker (-b) or of the masters of a cluster (-c): its version
    counter and last update time."""
    addrs = await targets(ctx, broker_addr, cluster)
    infos = await asyncio.gather(*(ctx.admin.acl_version(a) for a in addrs))
    rows: list[Sequence[object]] = []
    data = []
    for info in infos:
        for path, version in sorted(info.file_versions.items()):
            rows.append(
                (info.cluster_name, info.broker_name, info.broker_addr, path,
                 version.counter, _ms(version.timestamp))
            )  # fmt: skip
            data.append(
                {"clusterName": info.cluster_name, "brokerName": info.broker_name,
                 "brokerAddr": info.broker_addr, "aclFilePath": path,
                 "aclConfigVersionNum": version.counter, "aclLastUpdateTime": version.timestamp}
            )  # fmt: skip
    table = Table(
        ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
         "#AclConfigVersionNum", "#AclLastUpdateTime"),
        rows,
    )  # fmt: skip
    return View({"versions": data}, [table])


@admin_command("getAclConfig", "The ACL accounts and white addresses of brokers.")
@_BROKER
@_CLUSTER
async def get_acl_config(ctx: AdminContext, broker_addr: str | None, cluster: str | None) -> View:
    """Every account (secrets included: admin accounts only) and global white address of one
    broker (-b) or of the masters of a cluster (-c)."""
    addrs = await targets(ctx, broker_addr, cluster)
    configs = await asyncio.gather(*(ctx.admin.acl_config(a) for a in addrs))
    tables = []
    data = {}
    columns = (
        "accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
        "defaultGroupPerm", "topicPerms", "groupPerms",
    )  # fmt: skip
    for addr, config in zip(addrs, configs, strict=True):
        accounts = [a.to_json() for a in config.accounts]
        data[addr] = {"globalWhiteAddrs": list(config.global_white_addrs), "accounts": accounts}
        rows: list[Sequence[object]] = [
            (a.access_key, a.secret_key, a.white_remote_address, a.admin, a.default_topic_perm,
             a.default_group_perm, ",".join(a.topic_perms), ",".join(a.group_perms))
            for a in config.accounts
        ]  # fmt: skip
        white = ", ".join(config.global_white_addrs) or "-"
        tables.append(Table(columns, rows, title=f"{addr} (globalWhiteAddrs: {white})"))
    return View({"brokers": data}, tables)
