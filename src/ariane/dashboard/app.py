"""The dashboard application: one Starlette app over one ``Admin``, its pages, templates and
static files (rocketmq-dashboard's Spring Boot app).

How it works: ``create_app`` builds the routes of every page module (each page served as HTML
and as JSON under ``/api``, every change a checked POST, see :mod:`ariane.dashboard.web`).
On start-up (the ASGI lifespan) it starts the ``Admin`` (unless one was handed in), the
cached cluster lists (:class:`~ariane.dashboard.data.ClusterData`) and the chart sampler;
on shutdown it stops them. Templates are Jinja2 files shipped in the package, the front end
is one stylesheet, one script and Chart.js (vendored, MIT), so nothing needs Node.js.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ariane.client import Admin, ClientConfig, Producer
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.dashboard import (
    pages_acl,
    pages_cluster,
    pages_consumers,
    pages_messages,
    pages_topics,
)
from ariane.dashboard.collector import Collector
from ariane.dashboard.config import DashboardConfig
from ariane.dashboard.data import ClusterData
from ariane.dashboard.forms import fmt_time
from ariane.dashboard.security import SessionSigner, UserStore
from ariane.dashboard.web import login_routes

__all__ = ["DashboardApp", "create_app"]

logger = logging.getLogger(__name__)
_PRODUCER_GROUP = "ariane_dashboard_producer"


def _perm(value: int) -> str:
    """``PermName`` bits as rocketmq-dashboard writes them (6 = RW)."""
    return ("R" if value & PERM_READ else "-") + ("W" if value & PERM_WRITE else "-")


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}" if isinstance(value, float) else f"{value:,}"


def _dtlocal(ms: int | None) -> str:
    """A ``datetime-local`` input value (local time) for ``ms``; empty for none."""
    if not ms:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M:%S")


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("ariane.dashboard", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ts"] = fmt_time
    env.filters["num"] = _num
    env.filters["perm"] = _perm
    env.filters["dtlocal"] = _dtlocal
    return env


class DashboardApp:
    """Everything the pages share: settings, the admin client, cached lists, the sampler.

    Args:
        config: the settings.
        admin: an admin client to use (started by the caller); default: one of our own.
    """

    def __init__(self, config: DashboardConfig, admin: Admin | None = None) -> None:
        self.config = config
        self._own_admin = admin is None
        self.admin = admin or Admin(
            client_config=ClientConfig(
                namesrv_addr=config.namesrv_addr,
                instance_name="ariane-dashboard",
                api_timeout_ms=config.request_timeout_ms,
                credentials=config.credentials,
            ),
            timeout_ms=config.request_timeout_ms,
        )
        self.data = ClusterData(self.admin, config)
        self.collector = Collector(
            self.data, config.collect_interval_ms / 1000, config.history_points
        )
        self.users = UserStore(config.auth_file) if config.auth_file else None
        self.signer = SessionSigner()
        self.env = _env()
        self._producer: Producer | None = None
        self._producer_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []

    def nav(self) -> list[tuple[str, str]]:
        """The navigation bar: (path, label), rocketmq-dashboard's page names."""
        items = [
            ("/", "Dashboard"),
            ("/cluster", "Cluster"),
            ("/topic", "Topic"),
            ("/consumer", "Consumer"),
            ("/producer", "Producer"),
            ("/message", "Message"),
            ("/dlqMessage", "DLQ Message"),
            ("/messageTrace", "Message Trace"),
            ("/acl", "ACL"),
        ]
        return items

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the admin client and the chart sampler."""
        if self._own_admin:
            await self.admin.start()
        self._tasks.append(asyncio.create_task(self.collector.run()))

    async def stop(self) -> None:
        """Stop everything started."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._producer is not None:
            await self._producer.close()
        if self._own_admin:
            await self.admin.close()

    async def producer(self) -> Producer:
        """The dashboard's producer (test messages, resends), started on first use."""
        async with self._producer_lock:
            if self._producer is None:
                producer = Producer(
                    _PRODUCER_GROUP,
                    client_config=self.admin.client_config,
                    send_timeout_ms=self.config.request_timeout_ms,
                    enable_trace=True,
                    trace_topic=self.config.trace_topic,
                )
                await producer.start()
                self._producer = producer
        return self._producer


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _favicon(request: Request) -> Response:
    return Response(status_code=204)


def create_app(config: DashboardConfig, admin: Admin | None = None) -> Starlette:
    """The dashboard as an ASGI app.

    Args:
        config: the settings.
        admin: an admin client to use (already started); default: one of its own.
    """
    dash = DashboardApp(config, admin)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await dash.start()
        try:
            yield
        finally:
            await dash.stop()

    routes: list[BaseRoute] = [
        Route("/healthz", _health),
        Route("/favicon.ico", _favicon),
        Mount("/static", StaticFiles(packages=[("ariane.dashboard", "static")]), name="static"),
        *login_routes(),
    ]
    for module in (pages_cluster, pages_topics, pages_consumers, pages_messages, pages_acl):
        routes.extend(module.routes())
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.dash = dash
    return app
