"""The slave's side of replication (RocketMQ ``HAService.HAClient``), an asyncio protocol on
the broker's event loop.

How it works: :class:`HAClient` connects to the master's HA address (``haMasterAddress``, or
the one the NameServer returns to the slave's registration) and keeps reconnecting every
``haSendHeartbeatInterval`` while it cannot. On each connection it first checks that the
master has the same history: an empty slave reports 0; any other reports its end minus
``history_check_bytes`` (at least 1), so the master sends those last bytes again and the
slave compares them with its own (:meth:`MessageStore.confirm_replica`) before appending
anything. A master whose bytes differ (a different or rewritten CommitLog), or that answers
with an empty frame for another offset (it ends before this slave's end, or no longer has the
data this slave needs), is refused: the slave logs why, stops replicating and tries again
only after ``haHousekeepingInterval``, so it never mixes two histories.

After the check every frame is appended where the log ends (the store validates the bytes
and dispatches complete records); the slave reports its new end after each read that
completed records, and at least every ``haSendHeartbeatInterval``. A frame for another
offset, undecodable bytes, bytes the store refuses, or ``haHousekeepingInterval`` without
anything from the master close the connection (with a log line); the next connection resends
from the last complete record, so nothing bad ever reaches the files.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from ariane.errors import InvalidArgumentError, RemoteProtocolError
from ariane.ha.config import HAConfig
from ariane.ha.master import no_delay
from ariane.ha.wire import Frame, FrameDecoder, encode_report
from ariane.remoting.client import parse_address
from ariane.remoting.eventloop import cancel_and_wait

if TYPE_CHECKING:
    from ariane.store.message_store import MessageStore

__all__ = ["HAClient", "SlaveState"]

logger = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _wall_ms(monotonic_ms: int) -> int:
    """The wall-clock time of a monotonic instant (0 stays 0)."""
    if not monotonic_ms:
        return 0
    return int(time.time() * 1000) - (_now_ms() - monotonic_ms)


class SlaveState(enum.Enum):
    """Where a slave's replication stands."""

    IDLE = "IDLE"  # no master address, or stopped
    CONNECTING = "CONNECTING"
    CHECKING = "CHECKING"  # comparing the master's history with ours
    TRANSFER = "TRANSFER"
    REFUSED = "REFUSED"  # the master's history differs: not replicating


class _Refused(Exception):
    """The master cannot be replicated from (the message says why)."""


class _MasterConnection(asyncio.Protocol):
    """One connection to the master."""

    def __init__(self, client: HAClient) -> None:
        self.client = client
        self.store = client.store
        self.decoder = FrameDecoder(client.config.max_frame_body)
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.expect = 0
        self.confirm_until = 0
        self.empty = False
        self.reported = -1
        self.last_read_ms = _now_ms()
        self.last_report_ms = 0
        self.bytes_received = 0
        self.closing = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        no_delay(transport)
        store = self.store
        store.replica_writer.reset()
        end = store.max_phy_offset
        self.empty = end == 0 and not store.commit_log.queue.files
        if self.empty:
            check = 0
        else:
            back = min(self.client.config.history_check_bytes, end - store.min_phy_offset)
            check = max(1, end - back)
        self.expect = check
        self.confirm_until = end
        self.client.state = SlaveState.CHECKING if check < end else SlaveState.TRANSFER
        self._report(check)
        logger.info(
            "connected to master %s: this slave ends at %d, asking from %d",
            self.client.master_address, end, check,
        )  # fmt: skip

    def data_received(self, data: bytes) -> None:
        self.last_read_ms = _now_ms()
        self.bytes_received += len(data)
        try:
            frames = self.decoder.feed(data)
            for frame in frames:
                self._on_frame(frame)
        except _Refused as exc:
            self.client._refuse(str(exc))
            self.close()
            return
        except RemoteProtocolError as exc:
            logger.error(
                "closing the replication connection to %s: %s", self.client.master_address, exc
            )
            self.close()
            return
        if self.client.state is SlaveState.TRANSFER:
            end = self.store.max_phy_offset
            if end > self.reported:
                self._report(end)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    # -- frames -------------------------------------------------------------------------------

    def _on_frame(self, frame: Frame) -> None:
        offset, body = frame
        if offset != self.expect:
            if self.empty and offset % self.store.config.mapped_file_size_commit_log == 0:
                self.expect = offset  # an empty slave starts where the master's data does
            elif not body:
                raise _Refused(self._heartbeat_refusal(offset))
            else:
                raise RemoteProtocolError(
                    f"the master sent data for offset {offset}, expected {self.expect}"
                )
        if not body:
            if self.expect < self.confirm_until:
                raise _Refused(
                    f"the master's CommitLog ends at {offset}, before this slave's end "
                    f"{self.confirm_until}: the slave is ahead of its master"
                )
            return
        self.empty = False
        if self.expect < self.confirm_until:
            body = self._confirm(offset, body)
            if not body:
                return
            offset = self.expect
        result = self.store.append_replica(offset, body)
        if not result.ok:
            hint = ""
            if result.reason and "BLANK" in result.reason:
                hint = " (is mappedFileSizeCommitLog the same on master and slave?)"
            raise RemoteProtocolError(
                f"the store refused replicated bytes at {offset}: {result.status.value} "
                f"{result.reason}{hint}"
            )
        self.expect = offset + len(body)
        self.client.records += result.records

    def _confirm(self, offset: int, body: bytes) -> bytes:
        """Compare the part of ``body`` this slave already has; return the rest."""
        known = min(len(body), self.confirm_until - offset)
        if not self.store.confirm_replica(offset, body[:known]):
            raise _Refused(
                f"the master's CommitLog differs from this slave's between {offset} and "
                f"{offset + known}: a different or rewritten history"
            )
        self.expect = offset + known
        if self.expect >= self.confirm_until:
            self.client.state = SlaveState.TRANSFER
            logger.info("the master has this slave's history up to %d: replicating", self.expect)
        return body[known:]

    def _heartbeat_refusal(self, offset: int) -> str:
        if offset < self.expect:
            return (
                f"the master's CommitLog ends at {offset}, before this slave's {self.expect}: "
                "the slave is ahead of its master"
            )
        return (
            f"the master keeps data from {offset} only, this slave needs {self.expect}: "
            "it cannot catch up (rebuild it)"
        )

    # -- writing ------------------------------------------------------------------------------

    def _report(self, offset: int) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(encode_report(offset))
        self.reported = offset
        self.last_report_ms = _now_ms()

    def tick(self, now_ms: int) -> None:
        """Heartbeat report and housekeeping (about every 100 ms)."""
        if self.closing:
            return
        config = self.client.config
        if now_ms - self.last_read_ms > config.housekeeping_interval_ms:
            logger.warning(
                "nothing from master %s for %d ms: reconnecting",
                self.client.master_address, now_ms - self.last_read_ms,
            )  # fmt: skip
            self.close()
            return
        if now_ms - self.last_report_ms >= config.heartbeat_interval_ms:
            if self.client.state is SlaveState.TRANSFER:
                self._report(self.store.max_phy_offset)
            else:
                self._report(max(self.reported, 0))

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.abort()
        elif not self.lost.done():
            self.lost.set_result(None)


class HAClient:
    """Keeps a slave replicating from its master.

    Args:
        store: the slave's message store (in replica mode while this runs).
        config: replication settings.
    """

    def __init__(self, store: MessageStore, config: HAConfig) -> None:
        self.store = store
        self.config = config
        self.master_address = ""
        self.state = SlaveState.IDLE
        self.refused_reason: str | None = None
        self.records = 0
        self.connections = 0
        self.last_connected_ms = 0
        self._conn: _MasterConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()

    @property
    def running(self) -> bool:
        """Whether the client task runs."""
        return self._task is not None

    def set_master_address(self, address: str) -> None:
        """Replicate from ``address`` (``host:port`` of the master's HA port; empty: none).
        A new address closes the current connection."""
        address = address.strip()
        if address == self.master_address:
            return
        logger.info("master HA address %r -> %r", self.master_address, address)
        self.master_address = address
        self.refused_reason = None
        if self._conn is not None:
            self._conn.close()
        self._wakeup.set()

    def start(self) -> None:
        """Start replicating (the store must be in replica mode)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        """Stop replicating and close the connection."""
        task, self._task = self._task, None
        if self._conn is not None:
            self._conn.close()
        await cancel_and_wait(task)
        self.state = SlaveState.IDLE

    def _refuse(self, reason: str) -> None:
        logger.error(
            "not replicating from master %s: %s; retrying in %d ms",
            self.master_address, reason, self.config.housekeeping_interval_ms,
        )  # fmt: skip
        self.refused_reason = reason
        self.state = SlaveState.REFUSED

    async def _run(self) -> None:
        while True:
            if not self.master_address:
                self.state = SlaveState.IDLE
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            self._wakeup.clear()
            await self._connect_once()
            if self.state is SlaveState.REFUSED:
                delay = self.config.housekeeping_interval_ms
            else:
                self.state = SlaveState.CONNECTING
                delay = self.config.heartbeat_interval_ms
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay / 1000)
            except TimeoutError:
                pass

    async def _connect_once(self) -> None:
        address = self.master_address
        try:
            host, port = parse_address(address)
        except InvalidArgumentError as exc:  # a bad address from a NameServer
            logger.error("bad master HA address %r: %s", address, exc)
            return
        self.state = SlaveState.CONNECTING
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _MasterConnection(self), host, port),
                self.config.housekeeping_interval_ms / 1000,
            )
        except (OSError, TimeoutError) as exc:
            logger.info("cannot connect to master %s: %s", address, exc)
            return
        self._conn = conn
        self.connections += 1
        self.last_connected_ms = int(time.time() * 1000)
        try:
            await self._watch(conn)
        finally:
            conn.close()
            self._conn = None
            if self.state is not SlaveState.REFUSED:
                self.refused_reason = None
            logger.info("replication connection to master %s closed", address)

    async def _watch(self, conn: _MasterConnection) -> None:
        while not conn.lost.done():
            done, _ = await asyncio.wait({conn.lost}, timeout=0.1)
            if done:
                return
            conn.tick(_now_ms())

    def runtime_info(self) -> dict[str, Any]:
        """``HARuntimeInfo.HAClientRuntimeInfo`` (for GET_BROKER_HA_STATUS)."""
        conn = self._conn
        return {
            "masterAddr": self.master_address,
            "transferredByteInSecond": 0,
            "maxOffset": self.store.max_phy_offset,
            "lastReadTimestamp": _wall_ms(conn.last_read_ms) if conn is not None else 0,
            "lastWriteTimestamp": _wall_ms(conn.last_report_ms) if conn is not None else 0,
            "masterFlushOffset": 0,
            "isActivated": conn is not None and self.state is SlaveState.TRANSFER,
            "state": self.state.value,
            "refusedReason": self.refused_reason or "",
        }
