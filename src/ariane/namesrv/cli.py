"""``ariane namesrv``: start a NameServer (RocketMQ ``NamesrvStartup``).

Settings come from, in increasing priority: defaults, the ``-c`` properties file (RocketMQ's
NamesrvConfig/NettyServerConfig property names), then the command-line flags. A bad value
prints one line naming the key and exits with status 2. SIGTERM and SIGINT stop the server
gracefully (in-progress requests and KV writes finish) with exit status 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import click

from ariane.common.javaprops import parse_properties
from ariane.common.process import (
    configure_logging,
    log_options,
    open_log_file,
    raise_open_file_limit,
)
from ariane.errors import ConfigError, ConfigFileError
from ariane.namesrv.config import DEFAULT_HOME, NamesrvConfig
from ariane.observability.exporter import MetricsBindError
from ariane.remoting.eventloop import run

__all__ = ["load_config", "namesrv"]

logger = logging.getLogger(__name__)


def load_config(
    config_file: str | None,
    *,
    listen_port: int | None = None,
    host: str | None = None,
    data_dir: str | None = None,
    metrics_port: int | None = None,
) -> NamesrvConfig:
    """Build the effective config.

    Args:
        config_file: a Java properties file, or ``None``.
        listen_port: overrides ``listenPort``.
        host: overrides ``bindAddress``.
        data_dir: where kvConfig.json and namesrv.properties live unless the file names them.
        metrics_port: overrides ``metricsPromExporterPort`` (the ``/metrics`` port; 0 = off).

    Raises:
        ConfigError: a value is invalid or the file unreadable (names the key or file).
    """
    props: dict[str, str] = {}
    if config_file is not None:
        try:
            with open(config_file, encoding="utf-8") as f:
                props = parse_properties(f.read())
        except FileNotFoundError:
            raise ConfigFileError(config_file, "config file not found") from None
        except IsADirectoryError:
            raise ConfigFileError(config_file, "is a directory, not a config file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigFileError(config_file, f"cannot read config file: {exc}") from None
        # every value of the file must be valid, even one a flag overrides
        NamesrvConfig().with_properties(props)
    home = data_dir if data_dir is not None else DEFAULT_HOME
    props.setdefault("kvConfigPath", os.path.join(home, "kvConfig.json"))
    props.setdefault("configStorePath", os.path.join(home, "namesrv.properties"))
    if listen_port is not None:
        props["listenPort"] = str(listen_port)
    if host is not None:
        props["bindAddress"] = host
    if metrics_port is not None:
        props["metricsPromExporterPort"] = str(metrics_port)
    config, unknown = NamesrvConfig().with_properties(props)
    for key in unknown:
        logger.warning("unknown config key %r ignored", key)
    return config


async def _serve(config: NamesrvConfig) -> int:
    from ariane.namesrv.server import NameServer

    server = NameServer(config)
    try:
        port = await server.start()
    except ConfigError as exc:
        click.echo(f"ariane namesrv: bad config value: {exc}", err=True)
        return 2
    except MetricsBindError as exc:
        click.echo(f"ariane namesrv: {exc.strerror}", err=True)
        return 1
    except OSError as exc:
        click.echo(
            f"ariane namesrv: cannot listen on {config.bind_address}:{config.listen_port}: {exc}",
            err=True,
        )
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    click.echo(
        f"The Name Server boot success. serializeType=JSON, address {config.bind_address}:{port}"
    )
    metrics = server.metrics_server
    suffix = f" metrics={metrics.address}" if metrics is not None else ""
    click.echo(f"ready namesrv={config.bind_address}:{port}{suffix}")
    sys.stdout.flush()
    await stop.wait()
    logger.info("shutdown signal received")
    await server.stop()
    click.echo("The Name Server shut down.")
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-p",
    "--listen-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="TCP port to listen on (default 9876, or listenPort from -c; 0 picks a free port).",
)
@click.option(
    "--host",
    default=None,
    help="Address to bind (default 127.0.0.1, or bindAddress from -c).",
)
@click.option(
    "-c",
    "--config-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Java properties file with RocketMQ NamesrvConfig names "
    "(listenPort, scanNotActiveBrokerInterval, kvConfigPath, orderMessageEnable...).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help=f"Directory for kvConfig.json and namesrv.properties (default {DEFAULT_HOME}); "
    "kvConfigPath/configStorePath in -c take precedence.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus /metrics on this port (metricsPromExporterPort; default 0 = off).",
)
@log_options("<data-dir>/logs/namesrv.log")
def namesrv(
    listen_port: int | None,
    host: str | None,
    config_file: str | None,
    data_dir: str | None,
    metrics_port: int | None,
    log_level: str,
    log_file: str | None,
    log_max_bytes: int,
    log_backup_count: int,
    log_stderr: bool,
) -> None:
    """Run a RocketMQ-compatible NameServer until SIGTERM or SIGINT."""
    configure_logging(log_level, stderr=log_stderr)
    try:
        config = load_config(
            config_file,
            listen_port=listen_port,
            host=host,
            data_dir=data_dir,
            metrics_port=metrics_port,
        )
    except ConfigFileError as exc:
        click.echo(f"ariane namesrv: {exc}", err=True)
        sys.exit(2)
    except ConfigError as exc:
        click.echo(f"ariane namesrv: bad config value: {exc}", err=True)
        sys.exit(2)
    home = data_dir if data_dir is not None else DEFAULT_HOME
    default_log = os.path.join(home, "logs", "namesrv.log")
    open_log_file("ariane namesrv", log_file, default_log, log_max_bytes, log_backup_count)
    raise_open_file_limit()
    sys.exit(run(_serve(config)))
