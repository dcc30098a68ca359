"""A DLedger broker: its roles follow Raft (RocketMQ ``DLedgerRoleChangeHandler``).

How it works: with ``enableDLegerCommitLog=true`` the broker's store is a
:class:`~ariane.dledger.DLedgerMessageStore` and, in place of master/slave replication, this
module runs the node's Raft transport on the port ``dLegerPeers`` gives it. Role changes
reach a single task that handles them in order (RocketMQ's single-threaded executor):

* CANDIDATE and FOLLOWER: the broker becomes a SLAVE with broker id ``selfId digits + 1``
  (stops delay delivery, the transaction check and POP revive, copies the master's metadata
  every ``slaveSynchronizeInterval``) and registers at once with every NameServer; while it
  does not know the master's broker address (no leader yet when it registered, a new term,
  the known master stops answering the copies) it registers again every second, since the
  NameServer's answer names the master;
* LEADER: it waits, polling every 100 ms, until everything in its log is committed and
  dispatched, sets the next queue offsets from its ConsumeQueues (``recoverTopicQueueTable``),
  then becomes SYNC_MASTER with broker id 0 and registers at once. Until then it refuses
  sends as a slave does, so no message gets an offset another node also gives out.

A node whose peers disagree with the group's (or whose storage fails) stops: the broker
process exits with a clear message rather than serve a group it is not part of.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ariane.broker.slave_sync import SlaveSynchronize
from ariane.common.clock import Clock
from ariane.common.roles import MASTER_ID, BrokerRole
from ariane.dledger import DLedgerMessageStore, RaftTransport
from ariane.ha import ReplicaWait
from ariane.observability.families import Families
from ariane.raft import Code, NodeStatus, Role
from ariane.remoting.eventloop import cancel_and_wait
from ariane.store import PutResult, PutStatus, StoreConfig
from ariane.store.dispatch import ArrivingListener

if TYPE_CHECKING:
    from ariane.broker.config import BrokerConfig
    from ariane.remoting.client import RemotingClient

__all__ = ["DLedgerBroker", "DLedgerReplication", "new_dledger_store"]

logger = logging.getLogger(__name__)

#: how often a new leader checks that its log is committed and dispatched
_READY_POLL_S = 0.1
#: how often a follower without a known master registers again to learn it
_FIND_MASTER_S = 1.0


def new_dledger_store(
    config: BrokerConfig,
    store_config: StoreConfig,
    clock: Clock | None,
    arriving: ArrivingListener,
) -> DLedgerMessageStore:
    """The message store of a DLedger broker."""
    return DLedgerMessageStore(
        store_config, config.dledger(), clock=clock, arriving_listener=arriving
    )


class DLedgerBroker(Protocol):
    """What the DLedger role handling needs of the broker."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store_config(self) -> StoreConfig: ...
    @property
    def role(self) -> BrokerRole: ...

    namesrv_client: RemotingClient

    async def change_role(self, role: BrokerRole, broker_id: int | None = None) -> None: ...


class DLedgerReplication:
    """The replication seam of a DLedger broker (see module docs).

    Args:
        broker: the broker.
        store: its DLedger store.
        on_fatal: called when the node must stop (peers disagree, storage failed).
    """

    def __init__(
        self,
        broker: DLedgerBroker,
        store: DLedgerMessageStore,
        *,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.broker = broker
        self.store = store
        self.dledger = store.dledger
        self.on_fatal = on_fatal
        self.transport = RaftTransport(store.commit_log.replica, self.dledger, on_fatal=self._fatal)
        store.commit_log.work_listeners.append(self.transport.kick)
        self.slave_sync = SlaveSynchronize(broker, broker.namesrv_client)  # type: ignore[arg-type]
        self.role = BrokerRole.SLAVE
        self.master_addr = ""
        self.role_changes = 0
        self._events: asyncio.Queue[tuple[int, Role]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._term = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        #: asks the broker to register with the NameServers soon (set by the broker)
        self.request_registration: Callable[[], None] = lambda: None

    @property
    def slave_id(self) -> int:
        """This node's broker id while it is a slave."""
        return self.dledger.broker_id

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> int:
        """Start the Raft transport and the role handling; returns the Raft port.

        Raises:
            OSError: the Raft port cannot be bound.
            ConfigError: a peer says this node's group or peers differ from its own.
        """
        self._loop = asyncio.get_running_loop()
        self._events = asyncio.Queue()
        self.store.commit_log.role_listener = self._on_role
        self._task = self._loop.create_task(self._handle(), name="dledger-roles")
        self._watch = self._loop.create_task(self._find_master(), name="dledger-find-master")
        await self.set_role(BrokerRole.SLAVE)
        await self.transport.start()
        return self.dledger.self_peer.port

    async def stop(self) -> None:
        """Stop the role handling, the transport and the metadata copies."""
        self.store.commit_log.role_listener = None
        tasks, self._task, self._watch = (self._task, self._watch), None, None
        await cancel_and_wait(*tasks)
        await self.transport.stop()
        await self.slave_sync.stop()

    async def set_role(self, role: BrokerRole) -> None:
        """Act as ``role`` (a slave copies the master's metadata)."""
        self.role = role
        if role.is_slave:
            self.slave_sync.start()
        else:
            await self.slave_sync.stop()

    async def _find_master(self) -> None:
        """While this node follows without a master address to copy metadata from, register
        again every second (the NameServer's answer names the master); forget the address
        when the copies from it start failing (the master died: a new one will be named)."""
        failures = self.slave_sync.failures
        while True:
            await asyncio.sleep(_FIND_MASTER_S)
            if not self.role.is_slave:
                continue
            if self.slave_sync.failures != failures:
                failures = self.slave_sync.failures
                self._forget_master()
            if not self.master_addr:
                self.request_registration()

    def _forget_master(self) -> None:
        self.master_addr = ""
        self.slave_sync.master_addr = ""

    def _fatal(self, reason: str) -> None:
        if self.on_fatal is not None:
            self.on_fatal(reason)

    # -- role changes ---------------------------------------------------------------------------
    def _on_role(self, term: int, role: Role, leader_id: str | None) -> None:
        """Called by the replica (under its lock, maybe off the loop)."""
        loop, events = self._loop, self._events
        if loop is None or events is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(events.put_nowait, (term, role))

    async def _handle(self) -> None:
        events = self._events
        assert events is not None
        while True:
            term, role = await events.get()
            while not events.empty():  # only the newest change matters
                term, role = events.get_nowait()
            if term != self._term:  # a new term may have a new leader: learn it again
                self._term = term
                self._forget_master()
            try:
                if role is Role.LEADER:
                    await self._lead(term)
                else:
                    await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("handling the DLedger role change to %s failed", role.name)

    async def _follow(self) -> None:
        broker = self.broker
        if broker.role.is_master or broker.config.broker_id != self.slave_id:
            self.role_changes += 1
            await broker.change_role(BrokerRole.SLAVE, self.slave_id)

    async def _lead(self, term: int) -> None:
        store = self.store
        events = self._events
        assert events is not None
        while True:
            status = store.commit_log.replica.status()
            if status is None or status.role is not Role.LEADER or status.term != term:
                return  # lost it meanwhile: the next event says what we are
            if store.promote():
                break
            if not events.empty():
                return
            await asyncio.sleep(_READY_POLL_S)
        self.role_changes += 1
        await self.broker.change_role(BrokerRole.SYNC_MASTER, MASTER_ID)

    # -- the replication seam ---------------------------------------------------------------------
    def after_put(self, result: PutResult, wait: bool) -> PutStatus | ReplicaWait | None:
        """Puts complete on commit already: nothing to wait for."""
        return None

    @property
    def master_alive(self) -> bool:
        """Followers keep serving the pulls they get (consumers follow the route)."""
        return False

    def refuse_put(self, wait: bool) -> str | None:
        """The Raft quorum decides when a put is stored: never refused here."""
        return None

    def ha_server_addr(self, broker_addr: str) -> str:
        """The Raft address stands in for the HA address (nothing connects to it as HA)."""
        host, _, _ = broker_addr.rpartition(":")
        return f"{host}:{self.dledger.self_peer.port}"

    def on_registered(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        """A slave learns its master's address (for the metadata copies)."""
        if self.role.is_slave and master_addr:
            self.master_addr = master_addr
            self.slave_sync.master_addr = master_addr

    def status(self) -> NodeStatus | None:
        """The Raft node's status."""
        return self.store.commit_log.replica.status()

    def runtime_info(self) -> dict[str, str]:
        """The role part of GET_BROKER_RUNTIME_INFO (the store adds the dLeger* keys)."""
        info = {"brokerRole": self.role.value}
        if self.role.is_slave:
            info["masterAddr"] = self.master_addr
        return info

    def ha_status(self) -> dict[str, Any]:
        """``HARuntimeInfo`` of a DLedger node: its peers' replication state."""
        status = self.status()
        peers = status.peers if status is not None else ()
        return {
            "master": self.role.is_master,
            "masterCommitLogMaxOffset": self.store.max_phy_offset,
            "inSyncSlaveNums": sum(1 for p in peers if p.state == "APPEND"),
            "haConnectionInfo": [
                {"addr": p.peer, "slaveAckOffset": p.watermark, "inSync": p.state == "APPEND"}
                for p in peers
            ],
            "haClientRuntimeInfo": {},
        }

    def add_metrics(self, fam: Families) -> None:
        """The node's Raft state as Prometheus families (``ariane_dledger_*``)."""
        status = self.status()
        if status is None:
            return
        fam.gauge("ariane_dledger_term", "The node's Raft term").add([], status.term)
        role = fam.gauge(
            "ariane_dledger_role", "1 for the node's Raft role, 0 for the others", ["role"]
        )
        for r in Role:
            role.add([r.name], 1 if r is status.role else 0)
        for name, doc, value in (
            (
                "ariane_dledger_ledger_begin_index",
                "First entry in the node's log",
                status.ledger_begin_index,
            ),
            (
                "ariane_dledger_ledger_end_index",
                "Last entry in the node's log",
                status.ledger_end_index,
            ),
            (
                "ariane_dledger_committed_index",
                "Last entry known committed",
                status.committed_index,
            ),
        ):
            fam.gauge(name, doc).add([], value)
        fam.counter(
            "ariane_dledger_role_changes_total", "Broker role changes that followed Raft"
        ).add([], self.role_changes)
        lag = fam.gauge(
            "ariane_dledger_peer_lag_entries",
            "On the leader: entries each follower does not hold yet",
            ["peer"],
        )
        for peer in status.peers:
            lag.add([peer.peer], max(0, status.ledger_end_index - peer.watermark))

    def transfer_leadership(self, transferee: str) -> Code:
        """Hand leadership to ``transferee`` (this node must lead)."""
        code = self.store.commit_log.replica.transfer_leadership(transferee)
        self.transport.kick()
        return code
