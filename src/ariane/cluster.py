"""``ariane cluster``: a local cluster of broker groups with slaves, plus a NameServer, each a
separate process, for development and tests.

How it works: :func:`plan_members` lays out the brokers: ``--groups`` groups named
``broker-a``, ``broker-b``... under one cluster name, each with a master (broker id 0, the
``--role`` given) and ``--slaves`` slaves (ids 1..M, role SLAVE). Ports follow RocketMQ's
custom: group ``g``, broker id ``i`` listens on ``base + 100*g + 10*i`` and replicates on the
port after it; ``--base-port 0`` gives every broker a free port instead. Each broker gets
``<data-dir>/<name>-<id>/broker.conf`` (common properties from ``--broker-conf`` and ``-o``,
then its identity) and its store next to it. The NameServer starts first, then every broker at
once (slaves learn their master's HA address from their NameServer registrations). When every
process is ready this prints one line::

    ready namesrv=HOST:PORT broker-a/0=HOST:PORT broker-a/1=HOST:PORT ... cluster=PATH

and writes ``PATH`` (``<data-dir>/cluster.json``): every member's name, id, role, address,
HA address, pid, configuration file and store. Logs go to ``<data-dir>/logs``. A broker that
dies is reported and the others keep running (that is what failover tests need); the
NameServer dying, Ctrl-C or SIGTERM stops everything (slaves first, then masters, then the
NameServer).

The layout is data, not code: ``--dledger N`` uses another planner
(:func:`plan_dledger_members`): groups of N DLedger nodes, all started at once, whose master
is whichever node Raft elects (``cluster.json`` gives each node's ``dLegerSelfId`` and Raft
address; ``mqadmin clusterList`` shows who leads).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ariane.common.process import log_backup_count_option, log_level_option, log_max_bytes_option
from ariane.standalone import (
    _Child,
    _child_log_args,
    _fail,
    _make_dirs,
    _read_conf,
    _stop_on_signals,
    _Supervisor,
)

__all__ = ["Member", "cluster", "plan_dledger_members", "plan_members"]

_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0
_PROG = "ariane cluster"


@dataclass(frozen=True, slots=True)
class Member:
    """One broker of the cluster.

    Attributes:
        group: the broker name (``brokerName``).
        broker_id: 0 for a master.
        props: its ``broker.conf`` properties (identity, ports and role included).
    """

    group: str
    broker_id: int
    props: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``<group>/<id>``, its name in the ready line."""
        return f"{self.group}/{self.broker_id}"

    @property
    def dir_name(self) -> str:
        """Its directory under the data directory."""
        return f"{self.group}-{self.broker_id}"


def group_name(index: int) -> str:
    """``broker-a``, ``broker-b``, ..., ``broker-z``, ``broker-aa``..."""
    letters = ""
    n = index
    while True:
        letters = chr(ord("a") + n % 26) + letters
        n = n // 26 - 1
        if n < 0:
            return f"broker-{letters}"


def plan_members(
    *,
    groups: int,
    slaves: int,
    cluster_name: str,
    master_role: str,
    base_port: int,
    common: dict[str, str],
) -> list[Member]:
    """The brokers of a master/slave cluster, masters first.

    Raises:
        click.BadParameter: the ports would not fit below 65536.
    """
    if base_port and base_port + 100 * (groups - 1) + 10 * slaves + 1 > 65535:
        raise click.BadParameter("ports past 65535: lower --base-port", param_hint="--base-port")
    members = []
    for broker_id in range(slaves + 1):
        for g in range(groups):
            props = dict(common)
            port = base_port + 100 * g + 10 * broker_id if base_port else 0
            props.update(
                {
                    "brokerClusterName": cluster_name,
                    "brokerName": group_name(g),
                    "brokerId": str(broker_id),
                    "brokerRole": master_role if broker_id == 0 else "SLAVE",
                    "listenPort": str(port),
                    "haListenPort": str(port + 1 if port else 0),
                }
            )
            members.append(Member(group_name(g), broker_id, props))
    return members


def _apply_member_options(members: list[Member], items: tuple[str, ...]) -> list[Member]:
    """Apply ``GROUP/ID:KEY=VALUE`` options to the members they name.

    Raises:
        click.BadParameter: a malformed option or one naming no member.
    """
    by_key = {m.key: m for m in members}
    for item in items:
        target, sep, pair = item.partition(":")
        if not sep or target not in by_key:
            raise click.BadParameter(
                f"{item!r} names no member (members: {', '.join(by_key)})", param_hint="-m"
            )
        by_key[target].props.update(_option_pairs((pair,)))
    return members


def plan_dledger_members(
    *,
    groups: int,
    nodes: int,
    cluster_name: str,
    base_port: int,
    common: dict[str, str],
    host: str = "127.0.0.1",
    free_port: Any = None,
) -> list[Member]:
    """The brokers of a cluster of DLedger groups (issue 14): each group ``nodes`` peers
    ``n0``.. that elect their master; node ``i`` of group ``g`` listens on
    ``base + 100*g + 10*i`` and speaks Raft on the port two above (``--base-port 0``: free
    ports). ``Member.broker_id`` is the node's index (its broker id follows its role).

    Raises:
        click.BadParameter: the ports would not fit below 65536.
    """
    if base_port and base_port + 100 * (groups - 1) + 10 * (nodes - 1) + 2 > 65535:
        raise click.BadParameter("ports past 65535: lower --base-port", param_hint="--base-port")
    members = []
    for g in range(groups):
        name = group_name(g)
        ports = [base_port + 100 * g + 10 * i if base_port else 0 for i in range(nodes)]
        raft = [p + 2 if p else free_port() for p in ports]
        peers = ";".join(f"n{i}-{host}:{raft[i]}" for i in range(nodes))
        for i in range(nodes):
            props = dict(common)
            props.update(
                {
                    "brokerClusterName": cluster_name,
                    "brokerName": name,
                    "brokerId": str(i + 1),  # a slave until elected: the role follows Raft
                    "brokerRole": "SLAVE",
                    "listenPort": str(ports[i]),
                    "enableDLegerCommitLog": "true",
                    "dLegerGroup": name,
                    "dLegerPeers": peers,
                    "dLegerSelfId": f"n{i}",
                }
            )
            members.append(Member(name, i, props))
    return members


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _write_conf(path: Path, props: dict[str, str]) -> None:
    from ariane.common.javaprops import format_properties

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_properties(props), encoding="utf-8")


def _option_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="-o")
        out[key.strip()] = value
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="./cluster-data",
    show_default=True,
    help="Where the servers' files, cluster.json and the logs go.",
)
@click.option("--groups", type=click.IntRange(1, 26 * 27), default=2, show_default=True,
              help="Broker groups (broker-a, broker-b...).")  # fmt: skip
@click.option("--slaves", type=click.IntRange(0, 9), default=1, show_default=True,
              help="Slaves per group.")  # fmt: skip
@click.option("--dledger", "dledger_nodes", type=click.IntRange(0, 9), default=0,
              show_default=True,
              help="DLedger groups of this many nodes electing their master (issue 14) "
              "instead of a master with --slaves; 3 or 5.")  # fmt: skip
@click.option("--cluster-name", default="DefaultCluster", show_default=True)
@click.option(
    "--role",
    type=click.Choice(["ASYNC_MASTER", "SYNC_MASTER"], case_sensitive=False),
    default="ASYNC_MASTER",
    show_default=True,
    help="The masters' brokerRole.",
)
@click.option("--namesrv-port", type=click.IntRange(0, 65535), default=9876, show_default=True,
              help="NameServer port (0 picks a free port).")  # fmt: skip
@click.option(
    "--base-port",
    type=click.IntRange(0, 65535),
    default=10911,
    show_default=True,
    help="Group g, broker id i listens on BASE + 100*g + 10*i (HA on the next port); 0 gives "
    "every broker free ports.",
)
@click.option("--host", default=None, help="Address every server binds to (default 127.0.0.1).")
@click.option(
    "--broker-conf",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Properties every broker gets (RocketMQ names; identity and ports are set here).",
)
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A property for every broker (repeatable; wins over --broker-conf).")  # fmt: skip
@click.option(
    "-m",
    "--member-option",
    "member_options",
    multiple=True,
    metavar="GROUP/ID:KEY=VALUE",
    help="A property for one broker, e.g. -m broker-a/1:haMasterAddress=127.0.0.1:7000 "
    "(repeatable; wins over -o).",
)
@log_level_option("Logging threshold of every server.")
@log_max_bytes_option()
@log_backup_count_option()
def cluster(
    data_dir: str,
    groups: int,
    slaves: int,
    dledger_nodes: int,
    cluster_name: str,
    role: str,
    namesrv_port: int,
    base_port: int,
    host: str | None,
    broker_conf: str | None,
    options: tuple[str, ...],
    member_options: tuple[str, ...],
    log_level: str,
    log_max_bytes: int,
    log_backup_count: int,
) -> None:
    """Run a NameServer and GROUPS broker groups of one master and SLAVES slaves (or, with
    --dledger N, of N DLedger nodes that elect their master) until Ctrl-C or SIGTERM."""
    data = Path(data_dir).resolve()
    logs = data / "logs"
    _make_dirs((logs,), "ariane cluster")
    common = _read_conf(broker_conf, "ariane cluster")
    common.update(_option_pairs(options))
    if dledger_nodes:
        members = plan_dledger_members(
            groups=groups, nodes=dledger_nodes, cluster_name=cluster_name, base_port=base_port,
            common=common, host=host or "127.0.0.1",
            free_port=lambda: _free_port(host or "127.0.0.1"),
        )  # fmt: skip
    else:
        members = plan_members(
            groups=groups, slaves=slaves, cluster_name=cluster_name, master_role=role.upper(),
            base_port=base_port, common=common,
        )  # fmt: skip
    members = _apply_member_options(members, member_options)
    sup = _Supervisor()
    _stop_on_signals(sup)
    log_args = _child_log_args(logs, log_level, log_max_bytes, log_backup_count)
    ns_args = ["namesrv", "-p", str(namesrv_port), "--data-dir", str(data / "namesrv")]
    ns_args += log_args("namesrv") + (["--host", host] if host else [])
    namesrv = _Child("namesrv", ns_args, logs / "namesrv.out")
    sup.add(namesrv)
    brokers: list[tuple[Member, _Child, Path]] = []
    status = 0
    try:
        problem = sup.wait_ready(namesrv, _START_TIMEOUT_S)
        if problem is None:  # all brokers at once: slaves find their master by registering
            for member in members:
                child, conf = _start_broker(member, data, namesrv.ready["namesrv"], host, log_args)
                sup.add(child)
                brokers.append((member, child, conf))
            for _, child, _ in brokers:
                problem = sup.wait_ready(child, _START_TIMEOUT_S)
                if problem is not None:
                    break
        if problem is not None:
            if problem != "interrupted":
                culprit = sup.dead() or next((c for _, c, _ in brokers if not c.ready), namesrv)
                _fail(problem, culprit, _PROG)
            status = 0 if problem == "interrupted" else 1
        else:
            path = _describe(data, namesrv, brokers, cluster_name)
            parts = [f"namesrv={namesrv.ready['namesrv']}"]
            parts += [f"{m.key}={c.ready['broker']}" for m, c, _ in brokers]
            click.echo(f"ready {' '.join(parts)} cluster={path}")
            sys.stdout.flush()
            status = _watch(sup, namesrv, brokers)
    finally:
        for _, child, _ in reversed(brokers):
            child.stop(_STOP_TIMEOUT_S)
            child.close()
        namesrv.stop(_STOP_TIMEOUT_S)
        namesrv.close()
    sys.exit(status)


def _start_broker(
    member: Member, data: Path, namesrv: str, host: str | None, log_args: Any
) -> tuple[_Child, Path]:
    home = data / member.dir_name
    props = dict(member.props)
    props["namesrvAddr"] = namesrv
    props.setdefault("storePathRootDir", str(home / "store"))
    if host is not None:
        props["bindAddress"] = host
    conf = home / "broker.conf"
    _write_conf(conf, props)
    args = ["broker", "-c", str(conf), *log_args(member.dir_name)]
    return _Child(member.key, args, data / "logs" / f"{member.dir_name}.out"), conf


def _describe(
    data: Path, namesrv: _Child, brokers: list[tuple[Member, _Child, Path]], cluster_name: str
) -> Path:
    """Write ``cluster.json``; returns its path."""
    doc = {
        "cluster": cluster_name,
        "namesrv": {"addr": namesrv.ready["namesrv"], "pid": namesrv.proc.pid},
        "brokers": [
            {
                "name": m.group,
                "id": m.broker_id,
                "role": m.props["brokerRole"],
                **(
                    {"dLegerSelfId": m.props["dLegerSelfId"], "raft": c.ready.get("raft", "")}
                    if "dLegerSelfId" in m.props
                    else {}
                ),
                "addr": c.ready["broker"],
                "ha": c.ready.get("ha", ""),
                "pid": c.proc.pid,
                "conf": str(conf),
                "store": m.props.get("storePathRootDir") or str(conf.parent / "store"),
            }
            for m, c, conf in brokers
        ],
    }
    path = data / "cluster.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def _watch(sup: _Supervisor, namesrv: _Child, brokers: list[tuple[Member, _Child, Path]]) -> int:
    """Run until asked to stop or the NameServer dies; report brokers that die."""
    reported: set[str] = set()
    while not sup.stop_requested:
        if namesrv.proc.poll() is not None:
            sup.pump(0)
            _fail(f"namesrv exited with status {namesrv.proc.returncode}", namesrv, _PROG)
            return 1
        for member, child, _ in brokers:
            code = child.proc.poll()
            if code is not None and member.key not in reported:
                reported.add(member.key)
                click.echo(
                    f"{_PROG}: {member.key} exited with status {code}; the others keep running",
                    err=True,
                )
        sup.pump(0.2)
    return 0
