"""The broker's replication role (RocketMQ ``BrokerController`` HA wiring, ``handleHA``,
``changeToSlave`` / ``changeToMaster``, ``prepareRuntimeInfo`` and GET_BROKER_HA_STATUS).

How it works: every broker binds the HA port at start (``haListenPort``, by default
``listenPort + 1``) and announces it to the NameServers. The role decides the rest:

* a master (ASYNC_MASTER, SYNC_MASTER) accepts slaves (:class:`~ariane.ha.HAMaster`); after
  each send it tells the replication service there is new data, and a SYNC_MASTER answers
  the send only once enough slaves hold the message (:meth:`BrokerReplication.after_put`);
* a slave puts its store in replica mode (puts refused), replicates from the master's HA
  address (``haMasterAddress``, else the one each NameServer registration returns, see
  :meth:`on_registered`) with :class:`~ariane.ha.HAClient`, and copies the master's metadata
  (:class:`~ariane.broker.slave_sync.SlaveSynchronize`).

:meth:`set_role` switches between the two at run time (the broker calls it at start and from
``BrokerController.change_role``). Runtime info and the HA status (``HARuntimeInfo``) are
built here, as is the per-slave lag the metrics export.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ariane.broker.context import BrokerContext, ReplicationCounters
from ariane.broker.slave_sync import SlaveSynchronize
from ariane.common.roles import BrokerRole
from ariane.ha import (
    HAClient,
    HAConfig,
    HAMaster,
    ReplicaPolicy,
    ReplicaWait,
    SlaveLag,
    SlaveState,
)
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import cancel_and_wait
from ariane.store import PutResult, PutStatus
from ariane.store.format import BLANK_MAGIC_CODE, SIZE_MAGIC

if TYPE_CHECKING:
    from ariane.broker.config import BrokerConfig
    from ariane.store import StoreConfig

__all__ = ["BrokerReplication", "ReplicationBroker", "SlaveLag", "ha_config"]

logger = logging.getLogger(__name__)

#: How many records the message lag counts exactly before it extrapolates.
_COUNT_LIMIT = 20_000


def ha_config(config: BrokerConfig, store: StoreConfig) -> HAConfig:
    """The replication settings of ``broker.conf``."""
    return HAConfig(
        heartbeat_interval_ms=config.ha_send_heartbeat_interval_ms,
        housekeeping_interval_ms=config.ha_housekeeping_interval_ms,
        transfer_batch_size=config.ha_transfer_batch_size,
        sync_timeout_ms=store.sync_flush_timeout_ms,
        sync_from_last_file=config.sync_from_last_file,
        policy=ReplicaPolicy(
            in_sync_replicas=config.in_sync_replicas,
            min_in_sync_replicas=config.min_in_sync_replicas,
            auto_in_sync_replicas=config.enable_auto_in_sync_replicas,
            all_ack_in_sync=config.all_ack_in_sync_state_set,
            slave_fallbehind_max=config.ha_slave_fallbehind_max,
            max_gap_not_in_sync=config.ha_max_gap_not_in_sync,
        ),
    )


class ReplicationBroker(BrokerContext, Protocol):
    """What replication needs of the broker: the processors' view plus the client that
    reaches other servers."""

    namesrv_client: RemotingClient


class BrokerReplication:
    """Replication for one broker.

    Args:
        broker: the broker (its store, configuration and clients).
    """

    def __init__(self, broker: ReplicationBroker) -> None:
        self.broker = broker
        self.store = broker.store
        self.config = ha_config(broker.config, broker.store_config)
        self.master = HAMaster(self.store, self.config, accepting=lambda: self.role.is_master)
        self.client = HAClient(self.store, self.config)
        self.slave_sync = SlaveSynchronize(broker, broker.namesrv_client)
        self.role = broker.config.role
        #: the master's broker address (learned from registrations), for a slave
        self.master_addr = ""
        self.ha_port = 0
        self._sync_master = self.role is BrokerRole.SYNC_MASTER
        #: asks the broker to register with the NameServers soon (set by the broker)
        self.request_registration: Callable[[], None] = lambda: None
        self._watch_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> int:
        """Bind the HA port and take up the configured role; returns the HA port.

        Raises:
            OSError: the HA port cannot be bound.
        """
        cfg = self.broker.config
        self.ha_port = await self.master.start(cfg.bind_address, cfg.effective_ha_listen_port)
        if cfg.ha_master_address:
            self.client.set_master_address(cfg.ha_master_address)
        await self.set_role(self.role)
        self._watch_task = asyncio.get_running_loop().create_task(
            self._find_master(), name="ha-find-master"
        )
        return self.ha_port

    async def _find_master(self) -> None:
        """While a slave has no master to replicate from (it started first, or the master
        moved), register again every ``haSendHeartbeatInterval`` (at least every second): the
        NameServer's answer names the master and its HA address."""
        period = max(1.0, self.config.heartbeat_interval_ms / 1000)
        while True:
            await asyncio.sleep(period)
            client = self.client
            if self.role.is_slave and client.state is not SlaveState.TRANSFER:
                self.request_registration()

    async def stop(self) -> None:
        """Stop both sides (waiting sends are answered FLUSH_SLAVE_TIMEOUT)."""
        task, self._watch_task = self._watch_task, None
        await cancel_and_wait(task)
        await self.slave_sync.stop()
        await self.client.stop()
        await self.master.stop()

    async def set_role(self, role: BrokerRole) -> None:
        """Act as ``role`` from now on (the store's replica mode, the client, the copies)."""
        self.role = role
        self._sync_master = role is BrokerRole.SYNC_MASTER
        if role.is_slave:
            for conn in list(self.master.connections):
                conn.abort()
            self.master.fail_waiting()
            self.store.set_replica_mode(True)
            self.client.start()
            self.slave_sync.start()
        else:
            await self.slave_sync.stop()
            await self.client.stop()
            self.store.set_replica_mode(False)

    # -- the send path --------------------------------------------------------------------------

    def after_put(self, result: PutResult, wait: bool) -> PutStatus | ReplicaWait | None:
        """After a put on the event loop: wake the transfer; for a SYNC_MASTER send that
        waits (``WAIT`` not ``false``) return the replication outcome, a status now or a
        future; None when the answer need not wait."""
        master = self.master
        if master.connections:
            master.notify()
        if not self._sync_master or not wait or result.msg_num == 0:
            return None
        if result.status is not PutStatus.PUT_OK:
            return None
        return master.replicate(result.wrote_offset + result.wrote_bytes)

    @property
    def master_alive(self) -> bool:
        """A slave whose replication connection to its master transfers now."""
        return self.role.is_slave and self.client.state is SlaveState.TRANSFER

    def refuse_put(self, wait: bool) -> str | None:
        """Before a put: with ``enableAutoInSyncReplicas`` or ``allAckInSyncStateSet`` (the
        modes where the replicas waited for follow the slaves in sync), a SYNC_MASTER send
        that waits is refused when fewer replicas than ``minInSyncReplicas`` (the master's copy
        included) are in sync; nothing is stored. RocketMQ 5's ``IN_SYNC_REPLICAS_NOT_ENOUGH``,
        which its send processor answers SYSTEM_ERROR with this text (producers try another
        broker)."""
        policy = self.config.policy
        adaptive = policy.auto_in_sync_replicas or policy.all_ack_in_sync
        if not self._sync_master or not wait or not adaptive:
            return None
        if 1 + self.master.in_sync_slaves() >= policy.min_in_sync_replicas:
            return None
        self.master.sync_refused += 1
        return "in-sync replicas not enough"

    # -- registration ---------------------------------------------------------------------------

    def ha_server_addr(self, broker_addr: str) -> str:
        """This broker's HA address as announced (the broker's host, the bound HA port)."""
        host, _, port = broker_addr.rpartition(":")
        return f"{host}:{self.ha_port or int(port) + 1}"

    def on_registered(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        """A NameServer answered a registration: a slave learns its master from it (unless
        ``haMasterAddress`` is configured)."""
        if not self.role.is_slave:
            return
        if master_addr:
            if master_addr != self.master_addr:
                logger.info("master of this slave: %s", master_addr)
            self.master_addr = master_addr
            self.slave_sync.master_addr = master_addr
        if ha_server_addr and not self.broker.config.ha_master_address:
            self.client.set_master_address(ha_server_addr)

    # -- introspection --------------------------------------------------------------------------

    def slave_lags(self) -> list[SlaveLag]:
        """Each connected slave's lag behind this master."""
        store = self.store
        end = store.max_phy_offset
        gap = self.config.policy.max_gap_not_in_sync
        out = []
        for conn in list(self.master.connections):
            ack = conn.ack_offset
            start = max(ack, store.min_phy_offset)
            lag = max(0, end - start) if ack >= 0 else end
            out.append(
                SlaveLag(
                    conn.address,
                    ack,
                    lag,
                    self._count_records(start, end) if lag else 0,
                    self._lag_seconds(start) if lag else 0.0,
                    ack >= 0 and end - ack < gap,
                )
            )
        return out

    def _record_start(self, offset: int) -> int:
        """``offset``, or the next file's start when a BLANK filler sits there."""
        head = self.store.get_commit_log_data(offset, 8)
        if head is not None and len(head) == 8:
            _, magic = SIZE_MAGIC.unpack(head)
            if magic == BLANK_MAGIC_CODE:
                return self.store.commit_log.roll_next_file(offset)
        return offset

    def _lag_seconds(self, ack: int) -> float:
        """How long ago the oldest message the slave lacks was stored."""
        start = self._record_start(ack)
        if start >= self.store.max_phy_offset:
            return 0.0
        stored = self.store.commit_log.pickup_store_timestamp(start, 100)
        if stored <= 0:
            return 0.0
        return max(0.0, (self.broker.clock.now_ms() - stored) / 1000)

    def _count_records(self, start: int, end: int) -> int:
        """Records in [start, end): counted up to a limit, then extrapolated by size."""
        store = self.store
        pos = start
        count = 0
        while pos < end and count < _COUNT_LIMIT:
            head = store.get_commit_log_data(pos, 8)
            if head is None or len(head) < 8:
                break
            size, magic = SIZE_MAGIC.unpack(head)
            if size <= 0:
                break
            if magic == BLANK_MAGIC_CODE:
                pos = store.commit_log.roll_next_file(pos)
                continue
            count += 1
            pos += size
        if pos < end and pos > start:
            count = int(count * (end - start) / (pos - start))
        return count

    def metrics(self) -> ReplicationCounters:
        """Counters and states for ``/metrics``."""
        master = self.master
        writer = self.store.replica_writer
        return ReplicationCounters(
            role=self.role.value,
            connected_slaves=len(master.connections),
            in_sync_slaves=master.in_sync_slaves(),
            sync_waiting=len(master.waits),
            sync_acked=master.sync_acked,
            sync_timeouts=master.sync_timeouts,
            sync_not_available=master.sync_not_available,
            sync_refused=master.sync_refused,
            slave_state=self.client.state.value if self.role.is_slave else "",
            replicated_records=writer.records,
            replicated_bytes=writer.bytes,
            master_connections=self.client.connections,
        )

    def runtime_info(self) -> dict[str, str]:
        """The replication part of GET_BROKER_RUNTIME_INFO."""
        store = self.store
        end = store.max_phy_offset
        info = {
            "brokerRole": self.role.value,
            "haListenPort": str(self.ha_port),
        }
        if self.role.is_master:
            lags = self.slave_lags()
            info["haConnectionCount"] = str(len(lags))
            info["inSyncSlaveNums"] = str(sum(1 for s in lags if s.in_sync))
            behind = end - self.master.push_max_offset if lags else 0
            info["slaveFallBehindMuch"] = str(max(0, behind))
            for i, lag in enumerate(lags):
                info[f"slave{i}Addr"] = lag.address
                info[f"slave{i}AckOffset"] = str(lag.ack_offset)
                info[f"slave{i}BehindBytes"] = str(lag.lag_bytes)
        else:
            client = self.client
            info["masterAddr"] = self.master_addr
            info["haMasterAddress"] = client.master_address
            info["haClientState"] = client.state.value
            if client.refused_reason:
                info["haClientRefused"] = client.refused_reason
            info["slaveSyncLastTimestamp"] = str(self.slave_sync.last_sync_ms)
        return info

    def ha_status(self) -> dict[str, Any]:
        """``HARuntimeInfo`` JSON (GET_BROKER_HA_STATUS, ``mqadmin haStatus``)."""
        end = self.store.max_phy_offset
        if self.role.is_slave:
            return {
                "master": False,
                "masterCommitLogMaxOffset": 0,
                "inSyncSlaveNums": 0,
                "haConnectionInfo": [],
                "haClientRuntimeInfo": self.client.runtime_info(),
            }
        connections = []
        in_sync = 0
        by_addr = {conn.address: conn for conn in self.master.connections}
        for lag in self.slave_lags():
            conn = by_addr.get(lag.address)
            in_sync += lag.in_sync
            connections.append(
                {
                    "addr": lag.address,
                    "slaveAckOffset": lag.ack_offset,
                    "diff": end - lag.ack_offset if lag.ack_offset >= 0 else end,
                    "inSync": lag.in_sync,
                    "transferredByteInSecond": conn.transferred_per_second if conn else 0,
                    "transferFromWhere": conn.next_offset if conn else -1,
                    "framesSent": conn.frames_sent if conn else 0,
                    "reportsReceived": conn.reports if conn else 0,
                    "lagMessages": lag.lag_messages,
                    "lagSeconds": round(lag.lag_seconds, 3),
                }
            )
        return {
            "master": True,
            "masterCommitLogMaxOffset": end,
            "inSyncSlaveNums": in_sync,
            "haConnectionInfo": connections,
            "haClientRuntimeInfo": {},
            "timestamp": int(time.time() * 1000),
        }
