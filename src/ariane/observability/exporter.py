"""The ``/metrics`` HTTP endpoint (RocketMQ 5's ``PrometheusHttpServer``).

How it works: prometheus-client's threaded WSGI server runs on its own daemon thread and
serves a private registry holding the process, platform and GC collectors and one
``LoopCollector``. At each scrape that collector asks the event loop to build the server's
metric families (``build``), so broker state is only ever read on the loop thread and
nothing is recorded per message for Prometheus. A ``build`` may return a function instead of
families: it runs on the HTTP thread, for the parts that may block on the disk (message
timestamps, file system statistics); the text encoding happens there too. A loop that does not answer within ``timeout_s`` makes the scrape fail (HTTP 500)
instead of hanging it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TypeAlias
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    start_http_server,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["LoopCollector", "MetricsBindError", "MetricsServer", "new_registry"]

logger = logging.getLogger(__name__)


class MetricsBindError(OSError):
    """The metrics endpoint's address cannot be bound."""


#: What a collector's ``build`` returns: the families, or a function finishing them off the
#: loop (for work that may block, such as disk reads).
Built: TypeAlias = list[Metric] | Callable[[], list[Metric]]


class LoopCollector(Collector):
    """A collector whose families are built on an asyncio loop.

    Args:
        loop: the loop that owns the state read by ``build``.
        build: returns the families, or a function that finishes them on the HTTP thread
            (called on ``loop``).
        timeout_s: how long a scrape waits for the loop.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        build: Callable[[], Built],
        timeout_s: float = 10.0,
    ) -> None:
        self.loop = loop
        self.build = build
        self.timeout_s = timeout_s

    def collect(self) -> Iterable[Metric]:
        """Build the families on the loop (called on the HTTP thread).

        The build runs as a plain callback, not a task: a scrape that gave up (timeout) leaves
        nothing behind on the loop but a callback that sees the cancellation and returns.

        Raises:
            TimeoutError: the loop did not answer in time.
        """
        future: concurrent.futures.Future[Built] = concurrent.futures.Future()

        def build_on_loop() -> None:
            if not future.set_running_or_notify_cancel():
                return  # the scrape gave up waiting
            try:
                future.set_result(self.build())
            except Exception as exc:
                logger.exception("building the metrics failed")
                future.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(build_on_loop)
        except RuntimeError:  # the loop is closed: nothing to report
            return []
        try:
            built = future.result(self.timeout_s)
        except TimeoutError:
            future.cancel()
            raise
        return built() if callable(built) else built

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: the families are only known at scrape time."""
        return []


def new_registry(*collectors: Collector) -> CollectorRegistry:
    """A registry with process, platform and GC metrics plus ``collectors``."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, *collectors):
        registry.register(collector)
    return registry


class MetricsServer:
    """Serves ``registry`` over HTTP on ``host:port`` until ``stop()``.

    Args:
        registry: what to expose.
        host: the address to bind (127.0.0.1 unless configured otherwise).
        port: the port (0 picks a free one).
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.requested_port = port
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        if self._httpd is None:
            return self.requested_port
        return int(self._httpd.server_address[1])

    @property
    def address(self) -> str:
        """``host:port`` served."""
        return f"{self.host}:{self.port}"

    def start(self) -> int:
        """Start listening.

        Returns:
            The bound port.

        Raises:
            MetricsBindError: the address cannot be bound.
        """
        try:
            self._httpd, self._thread = start_http_server(
                self.requested_port, addr=self.host, registry=self.registry
            )
        except OSError as exc:
            raise MetricsBindError(
                exc.errno, f"cannot serve metrics on {self.address}: {exc.strerror or exc}"
            ) from exc
        logger.info("metrics served on http://%s/metrics", self.address)
        return self.port

    def stop(self) -> None:
        """Stop serving and close the socket (waits for the serving thread)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
