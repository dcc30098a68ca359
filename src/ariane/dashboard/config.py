"""The dashboard's settings (RocketMQ dashboard's ``rocketmq.config.*``), one frozen record;
only the entry point (``ariane dashboard``) reads flags and files into it."""

from __future__ import annotations

from dataclasses import dataclass

from ariane.acl.credentials import SessionCredentials

__all__ = ["DashboardConfig"]

_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """Settings of one dashboard.

    Attributes:
        namesrv_addr: NameServer addresses, ``"host:port;host:port"``.
        host: address the web server binds to (loopback unless told otherwise).
        port: web port (0 picks a free one).
        auth_file: users file (``user=password[,1]``, 1 = admin) turning login on.
        request_timeout_ms: deadline of each broker request; a broker slower than this is
            shown as not answering, the page still renders.
        cache_fresh_ms: lists (topics, groups, brokers) are reused this long.
        cache_stale_ms: after that, an older list is still shown (and refreshed behind the
            scenes) up to this age.
        collect_interval_ms: how often the Dashboard page's charts take a sample.
        history_points: samples kept per broker (the charts' width).
        page_size: rows per page of every list.
        max_messages: most messages a time-range query returns (rocketmq-dashboard: 2,000).
        max_time_range_ms: widest time range a query accepts (7 days, rocketmq-dashboard#1026).
        body_preview_bytes: most body bytes shown of a message (64 KiB).
        trace_topic: the topic message traces are read from.
        credentials: the ACL account the dashboard signs its requests with (ACL on).
    """

    namesrv_addr: str
    host: str = "127.0.0.1"
    port: int = 8080
    auth_file: str | None = None
    request_timeout_ms: int = 3000
    cache_fresh_ms: int = 3000
    cache_stale_ms: int = 60_000
    collect_interval_ms: int = 10_000
    history_points: int = 360
    page_size: int = 50
    max_messages: int = 2000
    max_time_range_ms: int = 7 * _DAY_MS
    body_preview_bytes: int = 64 * 1024
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    credentials: SessionCredentials | None = None
