"""The master's side of replication (RocketMQ ``HAService.AcceptSocketService``,
``HAConnection`` with its read and write services, and the SYNC_MASTER wait of
``GroupTransferService``), as asyncio protocols on the broker's event loop.

How it works: :class:`HAMaster` listens on the HA port; each slave gets a
:class:`SlaveConnection`. The slave's first report says where to start (0, an empty slave: the
master's first retained byte, or with ``syncFromLastFile`` the start of its last CommitLog file
as RocketMQ 4.x does); later reports acknowledge what it holds. The connection then
pumps CommitLog bytes from that offset in frames of at most ``haTransferBatchSize`` while the
socket takes them (asyncio's write-buffer limits pause it), whenever :meth:`HAMaster.notify`
says there is new data (sends call it; a 100 ms poll catches writers that do not) and after
each acknowledgement; with nothing to send for ``haSendHeartbeatInterval`` it writes an empty
frame. A connection that read nothing for ``haHousekeepingInterval`` is closed. A slave
asking for data this master does not have (it is ahead, or the data was deleted) gets one
empty frame carrying this master's end or start offset and the connection is closed: the
slave stops rather than mixing two histories (see :mod:`ariane.ha.wire`).

A SYNC_MASTER send registers the end offset of its message with :meth:`HAMaster.replicate`,
which answers at once (nothing to wait for, or SLAVE_NOT_AVAILABLE when too few slaves are
close enough) or returns a :class:`ReplicaWait` finished with PUT_OK once enough slaves
acknowledged, or FLUSH_SLAVE_TIMEOUT after ``syncFlushTimeout``. Everything runs on one event loop; the store
is read synchronously (a frame is one copy out of the mapped file).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, cast

from ariane.errors import RemoteProtocolError
from ariane.ha.config import HAConfig
from ariane.ha.transfer import GroupTransfer, needed_slave_acks
from ariane.ha.wire import ReportDecoder, encode_frame_header
from ariane.remoting.eventloop import cancel_and_wait
from ariane.store.results import PutStatus

if TYPE_CHECKING:
    from ariane.store.message_store import MessageStore

__all__ = ["HAMaster", "ReplicaWait", "SlaveConnection", "SlaveLag"]

logger = logging.getLogger(__name__)

_TICK_S = 0.1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class SlaveLag(NamedTuple):
    """How far one connected slave is behind its master."""

    address: str
    ack_offset: int
    lag_bytes: int
    lag_messages: int
    lag_seconds: float
    in_sync: bool


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Send small writes (reports, heartbeats) at once (TCP_NODELAY)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


class ReplicaWait:
    """A SYNC_MASTER send waiting for its slaves: the owner sets ``callback``, called once
    with PUT_OK or FLUSH_SLAVE_TIMEOUT on the event loop (no future, no extra loop turn)."""

    __slots__ = ("callback", "status")

    def __init__(self) -> None:
        self.callback: Callable[[PutStatus], None] | None = None
        self.status: PutStatus | None = None

    def finish(self, status: PutStatus) -> None:
        """Complete the wait (once)."""
        if self.status is not None:
            return
        self.status = status
        callback = self.callback
        if callback is not None:
            try:
                callback(status)
            except Exception:
                logger.exception("answering a replicated send failed")


class SlaveConnection(asyncio.Protocol):
    """One slave (``HAConnection``): reads its reports, writes frames.

    Attributes:
        address: the slave's ``host:port``.
        request_offset: where the slave asked to start (-1 until its first report).
        ack_offset: what the slave acknowledged last (-1 until its first report).
        next_offset: the next byte to send (-1 until the transfer starts).
        bytes_sent: CommitLog bytes sent.
    """

    def __init__(self, master: HAMaster) -> None:
        self.master = master
        self.address = "?"
        self.request_offset = -1
        self.ack_offset = -1
        self.next_offset = -1
        self.bytes_sent = 0
        self.frames_sent = 0
        self.reports = 0
        self.connected_ms = _now_ms()
        self.last_read_ms = self.connected_ms
        self.last_write_ms = self.connected_ms
        self.closing = False
        self._decoder = ReportDecoder()
        self._paused = False
        self._transport: asyncio.Transport | None = None
        self._rate_mark = (self.connected_ms, 0)
        self.transferred_per_second = 0

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.address = f"{peer[0]}:{peer[1]}"
        no_delay(transport)
        batch = self.master.config.transfer_batch_size
        self._transport.set_write_buffer_limits(high=max(256 * 1024, 4 * batch))
        self.master._add(self)

    def data_received(self, data: bytes) -> None:
        self.last_read_ms = _now_ms()
        try:
            offset = self._decoder.feed(data)
        except RemoteProtocolError as exc:
            logger.warning("closing replication connection of %s: %s", self.address, exc)
            self.close()
            return
        if offset is None or self.closing:
            return
        self.reports += 1
        self.ack_offset = offset
        if self.request_offset < 0:
            self.request_offset = offset
            self._begin(offset)
        self.master._on_ack(self)
        self.pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.master._remove(self)
        if exc is not None:
            logger.info("replication connection of slave %s lost: %s", self.address, exc)
        else:
            logger.info("replication connection of slave %s closed", self.address)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.pump()

    # -- transfer -----------------------------------------------------------------------------

    def _begin(self, request: int) -> None:
        """The first report: decide where the transfer starts."""
        store = self.master.store
        end = store.max_phy_offset
        if request == 0:  # an empty slave
            if self.master.config.sync_from_last_file:
                start = end - end % store.config.mapped_file_size_commit_log
            else:
                start = store.min_phy_offset
        elif request > end:
            self._refuse(
                end, f"slave {self.address} asks for offset {request} but this master's "
                f"CommitLog ends at {end}: the slave is ahead (this master lost data or is "
                "not its master); it will not replicate",
            )  # fmt: skip
            return
        elif request < store.min_phy_offset:
            first = store.min_phy_offset
            self._refuse(
                first, f"slave {self.address} needs offset {request} but this master keeps "
                f"data from {first} only; the slave cannot catch up (rebuild it)",
            )  # fmt: skip
            return
        else:
            start = request
        self.next_offset = start
        logger.info(
            "slave %s connected: request offset %d, transfer from %d (master at %d)",
            self.address, request, start, end,
        )  # fmt: skip

    def _refuse(self, offset: int, reason: str) -> None:
        logger.error("%s", reason)
        self._write(encode_frame_header(offset, 0))
        self.close()

    def pump(self) -> None:
        """Send frames while there is data and the socket takes it."""
        if self._paused or self.closing or self.next_offset < 0:
            return
        store = self.master.store
        batch = self.master.config.transfer_batch_size
        transport = self._transport
        assert transport is not None
        sent = False
        while not self._paused:
            data = store.get_commit_log_data(self.next_offset, batch)
            if not data:
                break
            transport.writelines((encode_frame_header(self.next_offset, len(data)), data))
            self.next_offset += len(data)
            self.bytes_sent += len(data)
            self.frames_sent += 1
            sent = True
        if sent:
            self.last_write_ms = _now_ms()

    def tick(self, now_ms: int) -> None:
        """Housekeeping and heartbeat (called about every 100 ms)."""
        config = self.master.config
        if now_ms - self.last_read_ms > config.housekeeping_interval_ms:
            logger.warning(
                "slave %s sent nothing for %d ms: closing its replication connection",
                self.address, now_ms - self.last_read_ms,
            )  # fmt: skip
            self.close()
            return
        self.pump()
        if (
            self.next_offset >= 0
            and not self._paused
            and now_ms - self.last_write_ms > config.heartbeat_interval_ms
        ):
            self._write(encode_frame_header(self.next_offset, 0))
        mark_ms, mark_bytes = self._rate_mark
        if now_ms - mark_ms >= 1000:
            elapsed = (now_ms - mark_ms) / 1000
            self.transferred_per_second = int((self.bytes_sent - mark_bytes) / elapsed)
            self._rate_mark = (now_ms, self.bytes_sent)

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self.closing:
            self._transport.write(data)
            self.last_write_ms = _now_ms()

    def close(self) -> None:
        """Close the connection (buffered frames are still sent)."""
        self.closing = True
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection at once."""
        self.closing = True
        if self._transport is not None:
            self._transport.abort()


class HAMaster:
    """Serves slaves and answers SYNC_MASTER waits.

    Args:
        store: the broker's message store (read only).
        config: replication settings.
        accepting: returns whether slaves may replicate now (False while this broker is a
            slave: their connections are closed at once).
    """

    def __init__(
        self,
        store: MessageStore,
        config: HAConfig,
        accepting: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.config = config
        self.accepting = accepting
        self.connections: list[SlaveConnection] = []
        #: the largest offset any slave acknowledged (``push2SlaveMaxOffset``)
        self.push_max_offset = 0
        self.waits: GroupTransfer[ReplicaWait] = GroupTransfer()
        self._server: asyncio.Server | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._notified = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: set when a slave connects; the housekeeping loop clears it and sleeps on it while
        #: no slave is connected
        self._has_slaves = asyncio.Event()
        self.port = 0
        #: SYNC_MASTER outcomes: answered after slaves acknowledged, timed out, no slave,
        #: refused before the put (fewer than ``minInSyncReplicas`` in sync; counted by the broker)
        self.sync_acked = 0
        self.sync_timeouts = 0
        self.sync_not_available = 0
        self.sync_refused = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port); returns the bound port.

        Raises:
            OSError: the port cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._server = await loop.create_server(
            lambda: SlaveConnection(self), host, port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._tick_task = loop.create_task(self._tick_loop(), name="ha-master-tick")
        logger.info("replication service listening on %s:%d", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening, close every slave connection, fail what still waits."""
        task, self._tick_task = self._tick_task, None
        await cancel_and_wait(task)
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.abort()
        self.fail_waiting()

    def fail_waiting(self) -> None:
        """Answer every waiting send FLUSH_SLAVE_TIMEOUT (shutdown, no longer a master)."""
        for wait in self.waits.drain():
            wait.finish(PutStatus.FLUSH_SLAVE_TIMEOUT)

    # -- connections ----------------------------------------------------------------------------

    def _add(self, conn: SlaveConnection) -> None:
        if not self.accepting():
            logger.warning("refusing replication connection from %s: not a master", conn.address)
            conn.abort()
            return
        self.connections.append(conn)
        self._has_slaves.set()

    def _remove(self, conn: SlaveConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)

    def _on_ack(self, conn: SlaveConnection) -> None:
        if conn.ack_offset > self.push_max_offset:
            self.push_max_offset = conn.ack_offset
        if len(self.waits):
            acks = [c.ack_offset for c in self.connections if c.ack_offset >= 0]
            for wait in self.waits.on_acks(acks):
                self.sync_acked += 1
                wait.finish(PutStatus.PUT_OK)

    def notify(self) -> None:
        """New data in the CommitLog: send it soon (coalesced; call on the loop)."""
        if self._notified or not self.connections:
            return
        self._notified = True
        loop = self._loop
        if loop is not None:
            loop.call_soon(self._pump_all)

    def _pump_all(self) -> None:
        self._notified = False
        for conn in self.connections:
            conn.pump()

    async def _tick_loop(self) -> None:
        next_poll = 0.0
        poll_s = self.config.idle_poll_ms / 1000
        while True:
            if not self.connections:  # nothing to tick or pump until a slave connects
                self._has_slaves.clear()
                await self._has_slaves.wait()
            await asyncio.sleep(min(_TICK_S, poll_s))
            now_ms = _now_ms()
            try:
                for conn in list(self.connections):
                    conn.tick(now_ms)
                if time.monotonic() >= next_poll:
                    next_poll = time.monotonic() + poll_s
                    self._pump_all()
            except Exception:
                logger.exception("replication housekeeping failed")

    # -- SYNC_MASTER ----------------------------------------------------------------------------

    def replicate(self, end_offset: int) -> PutStatus | ReplicaWait:
        """Wait for slaves to hold everything below ``end_offset`` (the end of a message
        just stored): PUT_OK or SLAVE_NOT_AVAILABLE at once, or a :class:`ReplicaWait` that
        finishes with PUT_OK / FLUSH_SLAVE_TIMEOUT. Call on the loop."""
        acks = [c.ack_offset for c in self.connections]
        need = needed_slave_acks(self.config.policy, end_offset, acks)
        if need == 0:
            return PutStatus.PUT_OK
        if need < 0:
            self.sync_not_available += 1
            return PutStatus.SLAVE_NOT_AVAILABLE
        if sum(1 for a in acks if a >= end_offset) >= need:
            return PutStatus.PUT_OK
        wait = ReplicaWait()
        deadline = time.monotonic() + self.config.sync_timeout_ms / 1000
        self.waits.add(end_offset, need, deadline, wait)
        self._arm_expiry()
        self.notify()
        return wait

    def _arm_expiry(self) -> None:
        if self._expiry is not None:
            return
        when = self.waits.next_deadline()
        if when is None:
            return
        loop = self._loop or asyncio.get_running_loop()
        self._expiry = loop.call_at(loop.time() + max(0.0, when - time.monotonic()), self._expire)

    def _expire(self) -> None:
        self._expiry = None
        for wait in self.waits.expire(time.monotonic()):
            self.sync_timeouts += 1
            wait.finish(PutStatus.FLUSH_SLAVE_TIMEOUT)
        self._arm_expiry()

    # -- introspection --------------------------------------------------------------------------

    def in_sync_slaves(self) -> int:
        """Slaves whose acknowledged offset is within ``haMaxGapNotInSync`` of the end."""
        end = self.store.max_phy_offset
        gap = self.config.policy.max_gap_not_in_sync
        return sum(1 for c in self.connections if c.ack_offset >= 0 and end - c.ack_offset < gap)
