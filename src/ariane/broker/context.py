"""What the broker's processors and services may use of the broker (the seam that keeps
``controller`` out of their imports).

How it works: :class:`~ariane.broker.controller.BrokerController` builds the components
(topic and group tables, offsets, clients, locks, statistics, the pull hold service, the
store, the delay service, the remoting server) and hands *itself* to each processor typed as
:class:`BrokerContext`, a protocol listing only those components and a few broker-wide
operations. Processors and services import this module, never the controller, so the
controller can import them without an import circle, and a test can hand a processor any
object that has these attributes. A processor that needs one more component (the
transaction service, the pull processor) extends the protocol in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from ariane.broker.client_manager import ClientManager
from ariane.broker.config import BrokerConfig
from ariane.broker.consumer_offset import ConsumerOffsetManager
from ariane.broker.long_polling import PullRequestHoldService
from ariane.broker.metrics_hook import BrokerRpcMetrics
from ariane.broker.rebalance_lock import RebalanceLockManager
from ariane.broker.schedule import ScheduleMessageService
from ariane.broker.stats import BrokerStats
from ariane.broker.subscription_group import SubscriptionGroupManager
from ariane.broker.timer import TimerFeature
from ariane.broker.topic_config import TopicConfigManager
from ariane.common.clock import Clock
from ariane.common.message import HostPort
from ariane.common.roles import BrokerRole
from ariane.ha import ReplicaWait
from ariane.remoting.server import RemotingServer
from ariane.store import MessageStore, PutResult, PutStatus, StoreConfig

__all__ = ["BrokerContext", "ReplicationCounters", "ReplicationSeam"]


class ReplicationCounters(NamedTuple):
    """Replication state and counters of a broker (for ``/metrics``)."""

    role: str
    connected_slaves: int
    in_sync_slaves: int
    sync_waiting: int
    sync_acked: int
    sync_timeouts: int
    sync_not_available: int
    sync_refused: int
    slave_state: str
    replicated_records: int
    replicated_bytes: int
    master_connections: int


class ReplicationSeam(Protocol):
    """What processors use of replication
    (:class:`~ariane.broker.replication.BrokerReplication` implements it)."""

    def after_put(self, result: PutResult, wait: bool) -> PutStatus | ReplicaWait | None:
        """After a put on the loop: wake the transfer; a SYNC_MASTER's wait, if any."""
        ...

    @property
    def master_alive(self) -> bool:
        """A slave copying from its master right now (so consumers can reach the master)."""
        ...

    def refuse_put(self, wait: bool) -> str | None:
        """Before a put: why a SYNC_MASTER refuses it (too few replicas in sync), else None."""
        ...

    def ha_server_addr(self, broker_addr: str) -> str:
        """This broker's HA address as announced."""
        ...

    def on_registered(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        """A NameServer answered a registration."""
        ...

    def runtime_info(self) -> dict[str, str]:
        """The replication part of GET_BROKER_RUNTIME_INFO."""
        ...

    def ha_status(self) -> dict[str, Any]:
        """``HARuntimeInfo`` JSON."""
        ...


class BrokerContext(Protocol):
    """The broker as its processors see it (``BrokerController`` implements it)."""

    config: BrokerConfig
    store_config: StoreConfig
    clock: Clock
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientManager
    locks: RebalanceLockManager
    stats: BrokerStats
    hold: PullRequestHoldService
    store: MessageStore
    schedule: ScheduleMessageService
    timer: TimerFeature
    remoting: RemotingServer
    rpc_metrics: BrokerRpcMetrics
    #: ``host:port`` clients reach this broker at.
    broker_addr: str
    #: the address stored in every record (and in offset message ids).
    store_host: HostPort

    @property
    def replication(self) -> ReplicationSeam:
        """Master/slave replication (issue 13)."""
        ...

    @property
    def role(self) -> BrokerRole:
        """The broker's current role (it may change while the broker runs)."""
        ...

    async def update_config(self, props: Mapping[str, str]) -> list[str]:
        """Apply UPDATE_BROKER_CONFIG properties; returns the unknown keys."""
        ...

    def all_properties(self) -> dict[str, str]:
        """Broker and store configuration as RocketMQ properties."""
        ...

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO table."""
        ...

    def earliest_message_time(self) -> int:
        """Store time of the oldest message in the CommitLog (ms), -1 when empty."""
        ...
