"""``ariane broker``: start a broker (RocketMQ ``BrokerStartup``).

Settings come from, in increasing priority: defaults, the ``-c`` properties file (RocketMQ's
BrokerConfig/MessageStoreConfig/NettyServerConfig property names), the environment variable
``NAMESRV_ADDR`` when the file names no NameServer, changes saved at runtime by
UPDATE_BROKER_CONFIG (``<storePathRootDir>/config/broker.properties``), then the command-line
flags. A bad value prints one line naming the key and exits with status 2; a busy port or an
unusable store exits with status 1. Once the broker accepts connections and has registered
with its NameServers it prints ``ready broker=HOST:PORT ha=HOST:HAPORT`` (the replication port). SIGTERM and SIGINT stop it
gracefully (unregister, finish requests, flush, remove the abort file) with exit status 0.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

import click

from ariane.broker.config import LoadedConfig, load_properties
from ariane.broker.runtime_config import safe_overrides
from ariane.common.gc_policy import settle_after_start
from ariane.common.javaprops import parse_properties
from ariane.common.process import (
    configure_logging,
    log_options,
    open_log_file,
    raise_open_file_limit,
)
from ariane.errors import ConfigError, ConfigFileError, StoreError
from ariane.observability.exporter import MetricsBindError
from ariane.remoting.eventloop import run
from ariane.store import StoreConfig

if TYPE_CHECKING:
    from ariane.broker.controller import BrokerController
    from ariane.broker.services import BrokerService

__all__ = ["broker", "load_config"]

logger = logging.getLogger(__name__)


def _read_properties(path: str, key: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except FileNotFoundError:
        if key == "config":
            raise ConfigFileError(path, "config file not found") from None
        return {}
    except IsADirectoryError:
        raise ConfigFileError(path, "is a directory, not a config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(path, f"cannot read config file: {exc}") from None


def load_config(
    config_file: str | None,
    flags: dict[str, str],
    environ: dict[str, str] | None = None,
) -> LoadedConfig:
    """Build the effective configuration.

    Args:
        config_file: a Java properties file, or ``None``.
        flags: properties set on the command line (they win).
        environ: the environment (``NAMESRV_ADDR``); defaults to ``os.environ``.

    Raises:
        ConfigError: a value is invalid or a file unreadable (names the key or file).
    """
    env = os.environ if environ is None else environ
    props = _read_properties(config_file, "config") if config_file else {}
    # every value of the file must be valid, even one a flag overrides
    load_properties(props)
    if "namesrvAddr" not in props and env.get("NAMESRV_ADDR"):
        props["namesrvAddr"] = env["NAMESRV_ADDR"]
    if "rocketmqHome" not in props and env.get("ROCKETMQ_HOME"):
        props["rocketmqHome"] = env["ROCKETMQ_HOME"]
    root = flags.get("storePathRootDir") or props.get("storePathRootDir")
    root = root or StoreConfig().store_path_root_dir
    from ariane.broker.controller import OVERRIDES_FILE

    overrides_path = os.path.join(root, "config", OVERRIDES_FILE)
    overrides, dropped = safe_overrides(_read_properties(overrides_path, "overrides"))
    if dropped:
        # written by a version that stored any key from the wire: never let them reach the
        # store (a changed file size would set every CommitLog file aside)
        logger.warning(
            "ignoring %s in %s: only broker.conf may set them", ", ".join(dropped), overrides_path
        )
    merged = {**props, **overrides, **flags}
    return load_properties(merged)


async def _serve(loaded: LoadedConfig) -> int:
    from ariane.broker.controller import BrokerController

    controller = BrokerController(loaded.broker, loaded.store)
    try:
        await controller.start()
    except ConfigError as exc:
        click.echo(f"ariane broker: bad config value: {exc}", err=True)
        await controller.shutdown()
        return 2
    except StoreError as exc:
        click.echo(f"ariane broker: cannot start the message store: {exc}", err=True)
        return 1
    except MetricsBindError as exc:
        click.echo(f"ariane broker: {exc.strerror}", err=True)
        return 1
    except OSError as exc:
        click.echo(
            f"ariane broker: cannot listen: {exc} (the ports come from "
            "listenPort, haListenPort, dLegerPeers/dLegerListenPort and grpcServerPort; "
            "free the port or pick another)",
            err=True,
        )
        return 1
    services = await _start_services(controller)
    if services is None:
        await controller.shutdown()
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    controller.on_fatal = lambda reason: stop.set()
    name = loaded.broker.broker_name
    namesrv = loaded.broker.namesrv_addr or "(none)"
    click.echo(
        f"The broker[{name}, {controller.broker_addr}] boot success. serializeType=JSON "
        f"and name server is {namesrv}"
    )
    metrics = controller.metrics_server
    suffix = f" metrics={metrics.address}" if metrics is not None else ""
    suffix += "".join(f" {service.ready_field}" for service in services)
    ha = controller.replication.ha_server_addr(controller.broker_addr)
    if loaded.broker.enable_dleger_commit_log:
        suffix += f" raft={ha} dledger={loaded.broker.dleger_self_id}"
    frozen = settle_after_start(loaded.broker.gc_young_threshold)
    logger.info("garbage collector: %d objects frozen after start-up, thresholds %s", frozen,
                gc.get_threshold())  # fmt: skip
    click.echo(f"ready broker={controller.broker_addr} ha={ha}{suffix}")
    sys.stdout.flush()
    await stop.wait()
    logger.info("shutdown signal received")
    for service in reversed(services):
        await service.stop()
    await controller.shutdown()
    click.echo(f"The broker[{name}, {controller.broker_addr}] shut down.")
    if controller.fatal_reason is not None:
        click.echo(f"ariane broker: {controller.fatal_reason}", err=True)
        return 1
    return 0


async def _start_services(controller: BrokerController) -> list[BrokerService] | None:
    """Start the services registered in :mod:`ariane.broker.services` (the gRPC proxy);
    ``None`` after printing why one could not start (those started are stopped)."""
    from ariane.broker.services import factories

    started: list[BrokerService] = []
    for factory in factories():
        try:
            service = factory(controller)
            if service is None:
                continue
            await service.start()
        except (OSError, ConfigError) as exc:
            click.echo(f"ariane broker: cannot start a service: {exc}", err=True)
            for running in reversed(started):
                await running.stop()
            return None
        started.append(service)
    return started


def _option_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, "expected KEY=VALUE after -o/--option")
        out[key.strip()] = value
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c",
    "--config-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="broker.conf: Java properties with RocketMQ names (brokerClusterName, brokerName, "
    "brokerId, namesrvAddr, listenPort, storePathRootDir, flushDiskType, "
    "autoCreateTopicEnable, deleteWhen, fileReservedTime...; see docs/broker.md).",
)
@click.option(
    "-n",
    "--namesrv-addr",
    default=None,
    help="NameServer addresses, HOST:PORT separated by ';' (namesrvAddr; default: the "
    "NAMESRV_ADDR environment variable).",
)
@click.option(
    "-p",
    "--listen-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="TCP port for clients (listenPort, default 10911; 0 picks a free port).",
)
@click.option(
    "--host",
    default=None,
    help="Address to bind (bindAddress, default 127.0.0.1); also announced to clients "
    "unless brokerIP1 is set.",
)
@click.option(
    "--store-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Store root directory (storePathRootDir, default ~/store); metadata files go to "
    "its config/ subdirectory.",
)
@click.option("--broker-name", default=None, help="Broker name (brokerName, default: host name).")
@click.option(
    "--cluster-name", default=None, help="Cluster name (brokerClusterName, default DefaultCluster)."
)
@click.option(
    "--flush-disk-type",
    type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"], case_sensitive=False),
    default=None,
    help="When a send counts as stored (flushDiskType, default ASYNC_FLUSH).",
)
@click.option(
    "-o",
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set any RocketMQ property, e.g. -o autoCreateTopicEnable=false (repeatable; "
    "wins over the file).",
)
@log_options("<storePathRootDir>/logs/broker.log")
def broker(
    config_file: str | None,
    namesrv_addr: str | None,
    listen_port: int | None,
    host: str | None,
    store_dir: str | None,
    broker_name: str | None,
    cluster_name: str | None,
    flush_disk_type: str | None,
    options: tuple[str, ...],
    log_level: str,
    log_file: str | None,
    log_max_bytes: int,
    log_backup_count: int,
    log_stderr: bool,
) -> None:
    """Run a RocketMQ-compatible broker until SIGTERM or SIGINT."""
    configure_logging(log_level, stderr=log_stderr)
    try:
        flags = _option_pairs(options)
        named = {
            "namesrvAddr": namesrv_addr,
            "listenPort": None if listen_port is None else str(listen_port),
            "bindAddress": host,
            "storePathRootDir": store_dir,
            "brokerName": broker_name,
            "brokerClusterName": cluster_name,
            "flushDiskType": flush_disk_type.upper() if flush_disk_type else None,
        }
        flags.update({k: v for k, v in named.items() if v is not None})
        loaded = load_config(config_file, flags)
    except ConfigFileError as exc:
        click.echo(f"ariane broker: {exc}", err=True)
        sys.exit(2)
    except ConfigError as exc:
        click.echo(f"ariane broker: bad config value: {exc}", err=True)
        sys.exit(2)
    default_log = os.path.join(loaded.store.store_path_root_dir, "logs", "broker.log")
    open_log_file("ariane broker", log_file, default_log, log_max_bytes, log_backup_count)
    for key in loaded.unknown:
        logger.warning("unknown config key %r ignored", key)
    for key in loaded.ignored:
        logger.info("config key %r is accepted but has no effect here", key)
    raise_open_file_limit()
    sys.exit(run(_serve(loaded)))
