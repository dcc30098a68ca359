"""Client configuration (RocketMQ ``ClientConfig``): what one ``ClientInstance`` needs.

Only entry points read files, flags or the environment; the SDK's classes take these values
as keyword arguments and build a ``ClientConfig`` from them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TypedDict

from ariane.acl.credentials import SessionCredentials
from ariane.common.clock import Clock, SystemClock
from ariane.errors import ConfigError

__all__ = [
    "DEFAULT_INSTANCE_NAME",
    "ClientConfig",
    "ProducerOptions",
    "local_ip",
    "parse_namesrv_addr",
]

#: The instance name that means "use the process id" (RocketMQ ``ClientConfig.instanceName``).
DEFAULT_INSTANCE_NAME = "DEFAULT"


def parse_namesrv_addr(text: str) -> tuple[str, ...]:
    """``"h1:9876;h2:9876"`` (``;`` or ``,`` separated) -> ``("h1:9876", "h2:9876")``.

    Raises:
        ConfigError: empty, or an entry is not ``host:port``.
    """
    addrs = tuple(a.strip() for a in text.replace(",", ";").split(";") if a.strip())
    if not addrs:
        raise ConfigError("namesrvAddr", "no NameServer address given")
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError("namesrvAddr", f"{addr!r} is not host:port")
    return addrs


def local_ip() -> str:
    """This host's address as RocketMQ's ``RemotingUtil.getLocalAddress`` would pick it: the
    first non-loopback IPv4 address of the host name, else ``127.0.0.1``. Sends nothing."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return "127.0.0.1"
    for info in infos:
        addr = str(info[4][0])
        if not addr.startswith("127."):
            return addr
    return "127.0.0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Settings shared by every producer, consumer and admin of one ``ClientInstance``.

    Attributes:
        namesrv_addr: NameServer addresses, ``"host:port;host:port"``.
        instance_name: part of the client id; ``"DEFAULT"`` becomes the process id, so two
            processes on one host never share an id. Clients with equal NameServers and
            instance names in one process (and event loop) share one instance.
        client_ip: the address in the client id and message ids (default: ``local_ip()``).
        unit_name: optional third part of the client id.
        poll_name_server_interval_ms: route refresh period (``pollNameServerInterval``).
        heartbeat_broker_interval_ms: heartbeat period (``heartbeatBrokerInterval``).
        persist_consumer_offset_interval_ms: consumer offset commit period.
        rebalance_interval_ms: consumer rebalance period (``rocketmq.client.rebalance.
            waitInterval``).
        api_timeout_ms: timeout of route, heartbeat and admin requests (``mqClientApiTimeout``).
        connect_timeout_ms: time allowed to open a connection.
        route_refresh_on_failure_ms: least time between two route fetches of one topic that a
            failure triggers (a send refused by a slave, a broker connection lost).
        credentials: ACL account that signs every request (``AclClientRPCHook``); None
            sends requests unsigned.
        route_wait_initial_ms: a subscribed topic without a route (a new group's retry topic,
            a topic created a moment ago) is looked up again after this...
        route_wait_max_ms: ...then twice as long each time, up to this, until it has one.
        gc_freeze_on_start: when the first client instance of the process starts, collect
            once and freeze what is alive then (``gc.freeze``) out of every later collection,
            as the broker does after its start-up (:func:`ariane.common.gc_policy.
            settle_client_process`). CPython's full collections walk every tracked object of
            the process; without this, each one walks the ~30,000 objects of the imports and
            the application's start-up state (20-40 ms with the GIL held: end-to-end latency
            spikes of that size). The cost: the objects alive at that moment (modules,
            classes, whatever the application built before starting its first client) become
            permanent: a reference cycle among them that becomes garbage later is never
            collected (plain reference counting still frees what is not in a cycle). Once per
            process (again in a forked child); nothing when the collector is disabled; the
            collector's thresholds are left alone. False leaves the process's collector
            exactly as the application set it. Not part of the instance's identity.
        clock: where the clients of the instance read time (send deadlines, broker fault
            isolation, queue lock and pull expiry, consume timeouts); tests pass a
            ``ManualClock``. Not part of the instance's identity.
    """

    namesrv_addr: str
    instance_name: str = DEFAULT_INSTANCE_NAME
    client_ip: str | None = None
    unit_name: str | None = None
    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    rebalance_interval_ms: int = 20_000
    api_timeout_ms: int = 3_000
    connect_timeout_ms: int = 3_000
    #: after a failed send or pull (a refused send, a lost connection) a topic's route is
    #: fetched again at once, at most this often (DLedger failover, issue 14)
    route_refresh_on_failure_ms: int = 500
    # ACL (issue 11)
    credentials: SessionCredentials | None = None
    # issue 20: subscriptions without a route yet are retried quickly, backing off
    route_wait_initial_ms: int = 200
    route_wait_max_ms: int = 5_000
    # issue 18: the client process's full collections skip the start-up objects
    gc_freeze_on_start: bool = field(default=True, compare=False)
    clock: Clock = field(default_factory=SystemClock, compare=False, repr=False)

    def __post_init__(self) -> None:
        parse_namesrv_addr(self.namesrv_addr)
        if not self.instance_name or "@" in self.instance_name:
            raise ConfigError(
                "instanceName", f"must be non-empty without '@': {self.instance_name!r}"
            )
        for key, value in (
            ("pollNameServerInterval", self.poll_name_server_interval_ms),
            ("heartbeatBrokerInterval", self.heartbeat_broker_interval_ms),
            ("persistConsumerOffsetInterval", self.persist_consumer_offset_interval_ms),
            ("rebalanceInterval", self.rebalance_interval_ms),
            ("mqClientApiTimeout", self.api_timeout_ms),
            ("connectTimeoutMillis", self.connect_timeout_ms),
            ("routeRefreshOnFailureMillis", self.route_refresh_on_failure_ms),
            ("routeWaitInitialMillis", self.route_wait_initial_ms),
            ("routeWaitMaxMillis", self.route_wait_max_ms),
        ):
            if value <= 0:
                raise ConfigError(key, f"must be > 0, got {value}")

    @property
    def namesrv_addrs(self) -> tuple[str, ...]:
        """The NameServer addresses as a tuple."""
        return parse_namesrv_addr(self.namesrv_addr)

    @property
    def resolved_instance_name(self) -> str:
        """The instance name, with ``DEFAULT`` replaced by the process id."""
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            return str(os.getpid())
        return self.instance_name

    def build_client_id(self) -> str:
        """``ip@instanceName[@unitName]``, RocketMQ's ``buildMQClientId``."""
        client_id = f"{self.client_ip or local_ip()}@{self.resolved_instance_name}"
        if self.unit_name:
            client_id += f"@{self.unit_name}"
        return client_id


class ProducerOptions(TypedDict, total=False):
    """The keyword options of ``Producer`` (for wrappers that pass them on)."""

    namesrv_addr: str | None
    instance_name: str
    client_ip: str | None
    send_timeout_ms: int
    retry_times: int
    retry_times_async: int
    retry_another_broker_when_not_store_ok: bool
    retry_response_codes: Collection[int]
    send_latency_fault_enable: bool
    compress_over_bytes: int
    compress_level: int
    max_message_bytes: int
    create_topic_key: str
    default_topic_queue_nums: int
    client_config: ClientConfig | None
    credentials: SessionCredentials | None
    # message trace (issue 15)
    enable_trace: bool
    trace_topic: str | None
