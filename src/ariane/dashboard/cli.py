"""``ariane dashboard``: serve the web dashboard for one cluster.

How it works: the flags become a :class:`DashboardConfig`; the socket is bound here (so a
busy port is one readable line, and port 0 picks a free one) and handed to uvicorn, which
serves the Starlette app on this process's event loop until SIGINT/SIGTERM. Once it accepts
connections it prints ``ready dashboard=HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys

import click

from ariane.common.cli_bounds import FiniteFloatRange
from ariane.common.process import configure_logging, log_level_option

__all__ = ["dashboard", "parse_namesrv"]


def parse_namesrv(text: str) -> str:
    """Check ``host:port[;host:port]``; returns it stripped.

    Raises:
        click.BadParameter: malformed.
    """
    parts = [p.strip() for p in text.replace(",", ";").split(";") if p.strip()]
    if not parts:
        raise click.BadParameter("give the NameServer as HOST:PORT")
    for part in parts:
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"{part!r} is not HOST:PORT")
    return ";".join(parts)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(config: object, sock: socket.socket) -> None:
    """Serve the dashboard on ``sock`` until a signal stops uvicorn."""
    import uvicorn

    from ariane.dashboard.app import create_app
    from ariane.dashboard.config import DashboardConfig

    assert isinstance(config, DashboardConfig)
    app = create_app(config)
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    # uvicorn offers a flag, not an event, for "serving"
    while not server.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    if server.started:
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"ready dashboard={shown}:{port}")
        sys.stdout.flush()
    await task


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-n",
    "--namesrv",
    "namesrv",
    default="127.0.0.1:9876",
    show_default=True,
    help="NameServer address(es), HOST:PORT[;HOST:PORT].",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to serve on (loopback by default; 0.0.0.0 exposes it to the network).",
)
@click.option("-p", "--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--auth",
    "auth_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Require a login; users file with one user=password[,1] line each (1 = admin).",
)
@click.option(
    "--request-timeout-ms",
    type=click.IntRange(100, 120_000),
    default=3000,
    show_default=True,
    help="Deadline of each broker request; slower brokers are shown as not answering.",
)
@click.option(
    "--collect-interval-s",
    type=FiniteFloatRange(0.5, 3600),
    default=10.0,
    show_default=True,
    help="Seconds between the Dashboard page's chart samples.",
)
@click.option("--page-size", type=click.IntRange(5, 1000), default=50, show_default=True)
@click.option(
    "--access-key",
    envvar="ARIANE_ACCESS_KEY",
    default=None,
    help="ACL account the dashboard signs its requests with (env ARIANE_ACCESS_KEY).",
)
@click.option(
    "--secret-key",
    envvar="ARIANE_SECRET_KEY",
    default=None,
    help="Its secret (env ARIANE_SECRET_KEY).",
)
@log_level_option("Logging threshold.")
def dashboard(
    namesrv: str,
    host: str,
    port: int,
    auth_file: str | None,
    request_timeout_ms: int,
    collect_interval_s: float,
    page_size: int,
    access_key: str | None,
    secret_key: str | None,
    log_level: str,
) -> None:
    """Serve the web dashboard (rocketmq-dashboard's pages) for the cluster at NAMESRV."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs the 'dashboard' extra ({exc.name} is missing): "
            "pip install 'ariane[dashboard]'"
        ) from None
    from ariane.dashboard.config import DashboardConfig
    from ariane.dashboard.security import UserStore
    from ariane.errors import ConfigError
    from ariane.remoting.eventloop import run

    configure_logging(log_level)
    try:
        addr = parse_namesrv(namesrv)
    except click.BadParameter as exc:
        raise click.UsageError(f"--namesrv: {exc.message}") from None
    if auth_file is not None:
        try:
            UserStore(auth_file)
        except ConfigError as exc:
            raise click.UsageError(f"--auth: {exc}") from None
    if (access_key is None) != (secret_key is None):
        raise click.UsageError("--access-key and --secret-key go together")
    from ariane.acl.credentials import SessionCredentials

    credentials = SessionCredentials(access_key, secret_key) if access_key and secret_key else None
    config = DashboardConfig(
        namesrv_addr=addr,
        host=host,
        port=port,
        auth_file=auth_file,
        request_timeout_ms=request_timeout_ms,
        collect_interval_ms=int(collect_interval_s * 1000),
        page_size=page_size,
        credentials=credentials,
    )
    try:
        sock = _bind(host, port)
    except OSError as exc:
        raise click.ClickException(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}"
        ) from None
    with contextlib.suppress(KeyboardInterrupt):
        run(serve(config, sock))
