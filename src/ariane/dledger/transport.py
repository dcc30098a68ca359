"""The DLedger node's network and timers (DLedger's ``DLedgerRpcNettyService`` and the
``StateMaintainer`` thread's clock): the asyncio shell around a :class:`Replica`.

How it works: the node listens on its Raft port (from ``dLegerPeers``) and keeps one
outgoing connection per peer, reconnecting with a growing delay. Every frame a node has for a
peer, request or answer, goes on its own connection to that peer; the first frame is a Hello
naming the group, the sender and the peer list, which the receiver checks against its own:
a node whose peers or group differ is refused (HelloAck with the reason), and a node told so
stops (:attr:`RaftTransport.fatal`); a frame that does not decode closes its connection. After
each call into the replica the outbox is sent and one timer is set for the replica's next
deadline; a pump the puts kicked does the tick at once when it is due (new entries, a free
push slot), and the producers' answers a commit completes are flushed once per channel at
the end of the callback that saw it (``held_flushes``), so a put costs no extra loop turns.
A vote or heartbeat for a peer that is not connected is reported back at once as
undeliverable, as a failed RPC ends DLedger's wait. Pushes beyond a send buffer of
``max_buffer_bytes`` are dropped (the leader sends them again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import cast

from ariane.dledger.config import DLedgerConfig
from ariane.dledger.format import Peer
from ariane.dledger.replica import Replica
from ariane.dledger.wire import (
    PROTOCOL_VERSION,
    Hello,
    HelloAck,
    decode_frame,
    encode_frame,
)
from ariane.errors import RemoteProtocolError
from ariane.raft import HeartBeatRequest, Message, PushRequest, VoteRequest
from ariane.remoting.channel import flushes_held
from ariane.remoting.eventloop import cancel_and_wait

__all__ = ["RaftTransport"]

logger = logging.getLogger(__name__)

_HELLO_TIMEOUT_S = 3.0
_RETRY_MIN_S = 0.05
_RETRY_MAX_S = 1.0


class _Inbound(asyncio.Protocol):
    """A connection a peer opened to us: Hello, then messages for the replica."""

    def __init__(self, owner: RaftTransport) -> None:
        self.owner = owner
        self.buffer = bytearray()
        self.peer: str | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        with flushes_held():  # the commits' answers to producers leave at the end
            try:
                self._frames()
            except RemoteProtocolError as exc:
                logger.warning("closing Raft connection from %s: %s", self._who(), exc)
                self._close()

    def _who(self) -> str:
        if self.peer is not None:
            return self.peer
        transport = self.transport
        return str(transport.get_extra_info("peername")) if transport is not None else "?"

    def _frames(self) -> None:
        while self.transport is not None:
            decoded = decode_frame(self.buffer)
            if decoded is None:
                return
            frame, used = decoded
            del self.buffer[:used]
            if self.peer is None:
                self._hello(frame)
                continue
            if isinstance(frame, Hello | HelloAck) or frame.local_id != self.peer:
                raise RemoteProtocolError(f"unexpected frame {type(frame).__name__}")
            self.owner.deliver(frame)

    def _hello(self, frame: object) -> None:
        if not isinstance(frame, Hello):
            raise RemoteProtocolError("the first frame must be a Hello")
        reason = self.owner.check_hello(frame)
        assert self.transport is not None
        self.transport.write(encode_frame(HelloAck(reason is None, reason or "")))
        if reason is not None:
            logger.error("refused Raft peer %s: %s", frame.node_id, reason)
            self._close()
            return
        self.peer = frame.node_id

    def _close(self) -> None:
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.owner.inbound.discard(self)


class _Link(asyncio.Protocol):
    """Our connection to one peer (we write; the peer only answers the Hello)."""

    def __init__(self, owner: RaftTransport, peer: Peer) -> None:
        self.owner = owner
        self.peer = peer
        self.transport: asyncio.Transport | None = None
        self.ready = False
        self.buffer = bytearray()
        self.hello_done: asyncio.Future[str | None] | None = None
        self.closed: asyncio.Event = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        owner = self.owner
        hello = Hello(PROTOCOL_VERSION, owner.config.group, owner.config.self_id, owner.peers_text)
        self.transport.write(encode_frame(hello))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        try:
            decoded = decode_frame(self.buffer)
        except RemoteProtocolError as exc:
            self._fail(f"bad answer: {exc}")
            return
        if decoded is None:
            return
        frame, used = decoded
        del self.buffer[:used]
        if not isinstance(frame, HelloAck):
            self._fail(f"unexpected {type(frame).__name__} on an outgoing connection")
            return
        if self.hello_done is not None and not self.hello_done.done():
            self.hello_done.set_result(None if frame.ok else frame.reason)

    def _fail(self, why: str) -> None:
        logger.warning("closing Raft connection to %s: %s", self.peer.node_id, why)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.ready = False
        if self.hello_done is not None and not self.hello_done.done():
            # not a refusal: the peer (or something in between) went away; try again
            self.hello_done.set_exception(
                ConnectionResetError("connection closed before the Hello was answered")
            )
        self.closed.set()


class RaftTransport:
    """Connections and timers of one DLedger node.

    Args:
        replica: the node's replica.
        config: group and peers.
        on_fatal: called once with the reason when the node must stop (peers disagree,
            storage failed).
        max_buffer_bytes: unsent bytes per peer beyond which pushes are dropped.
    """

    def __init__(
        self,
        replica: Replica,
        config: DLedgerConfig,
        *,
        on_fatal: Callable[[str], None] | None = None,
        max_buffer_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.replica = replica
        self.config = config
        self.peers_text = config.peers_text
        self.on_fatal = on_fatal
        self.max_buffer_bytes = max_buffer_bytes
        self.links: dict[str, _Link] = {}
        self.inbound: set[_Inbound] = set()
        self.fatal: str | None = None
        self.frames_sent = 0
        self.frames_received = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._pump_scheduled = False
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self, *, verify_s: float = 2.0) -> None:
        """Listen, connect to the peers, and wait up to ``verify_s`` for the peers that are up
        to accept our Hello.

        Raises:
            OSError: the Raft port cannot be bound.
            ConfigError: a peer says our group or peer list differs from its own.
        """
        from ariane.errors import ConfigError

        loop = asyncio.get_running_loop()
        self._loop = loop
        me = self.config.self_peer
        self._server = await loop.create_server(
            lambda: self._new_inbound(), me.host, self.config.bind_port, reuse_address=True
        )
        first: list[asyncio.Future[str | None]] = []
        for peer in self.config.peers:
            if peer.node_id == self.config.self_id:
                continue
            verdict: asyncio.Future[str | None] = loop.create_future()
            first.append(verdict)
            self._tasks.append(loop.create_task(self._keep_linked(peer, verdict)))
        if first:
            await asyncio.wait(first, timeout=verify_s)
        for verdict in first:
            if verdict.done() and verdict.result():
                raise ConfigError("dLegerPeers", str(verdict.result()))
        self.kick()

    def _new_inbound(self) -> _Inbound:
        protocol = _Inbound(self)
        self.inbound.add(protocol)
        return protocol

    async def stop(self) -> None:
        """Close every connection and stop the timer."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = list(self._tasks)
        self._tasks.clear()
        await cancel_and_wait(*tasks)
        for link in self.links.values():
            if link.transport is not None:
                link.transport.close()
        for inbound in list(self.inbound):
            inbound._close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _keep_linked(self, peer: Peer, verdict: asyncio.Future[str | None]) -> None:
        loop = asyncio.get_running_loop()
        delay = _RETRY_MIN_S
        while not self._stopped:
            link = _Link(self, peer)
            link.hello_done = loop.create_future()
            try:
                await loop.create_connection(lambda link=link: link, peer.host, peer.port)  # type: ignore[misc]
                reason = await asyncio.wait_for(link.hello_done, _HELLO_TIMEOUT_S)
            except (TimeoutError, OSError) as exc:
                if not verdict.done():
                    verdict.set_result(None)
                if link.transport is not None:
                    link.transport.close()
                logger.debug("Raft peer %s not reachable: %s", peer.node_id, exc)
                await asyncio.sleep(delay)
                delay = min(_RETRY_MAX_S, delay * 2)
                continue
            if reason is not None:
                if not verdict.done():
                    verdict.set_result(f"peer {peer.node_id} refused us: {reason}")
                self._die(f"peer {peer.node_id} refused this node: {reason}")
                return
            if not verdict.done():
                verdict.set_result(None)
            delay = _RETRY_MIN_S
            link.ready = True
            self.links[peer.node_id] = link
            logger.info("Raft link to %s (%s) up", peer.node_id, peer.address)
            self.kick()
            await link.closed.wait()
            logger.info("Raft link to %s down", peer.node_id)
            await asyncio.sleep(delay)

    def check_hello(self, hello: Hello) -> str | None:
        """Why a peer's Hello is refused (None: accepted)."""
        cfg = self.config
        if hello.version != PROTOCOL_VERSION:
            return f"protocol version {hello.version}, this node speaks {PROTOCOL_VERSION}"
        if hello.group != cfg.group:
            return f"group {hello.group!r} differs from this node's {cfg.group!r}"
        if hello.peers != self.peers_text:
            return f"dLegerPeers {hello.peers!r} differ from this node's {self.peers_text!r}"
        if hello.node_id == cfg.self_id or all(p.node_id != hello.node_id for p in cfg.peers):
            return f"node {hello.node_id!r} is not another peer of {cfg.group!r}"
        return None

    def _die(self, reason: str) -> None:
        if self.fatal is not None:
            return
        self.fatal = reason
        logger.critical("DLedger node %s stops: %s", self.config.self_id, reason)
        if self.on_fatal is not None:
            self.on_fatal(reason)

    # -- driving the replica ------------------------------------------------------------------------
    def deliver(self, msg: Message) -> None:
        """A message from a peer."""
        self.frames_received += 1
        try:
            self.replica.step(msg)
        except Exception as exc:  # storage failure: the replica stopped
            self._die(f"replica failed: {exc}")
            return
        self._pump()

    def kick(self) -> None:
        """Send what the replica has (from any thread)."""
        loop = self._loop
        if loop is None or self._stopped or self._pump_scheduled:
            return
        self._pump_scheduled = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.call_soon(self._scheduled_pump)
        else:
            loop.call_soon_threadsafe(self._scheduled_pump)

    def _scheduled_pump(self) -> None:
        self._pump_scheduled = False
        if self._stopped:
            return
        with flushes_held():  # answers of puts a commit completes leave at the end
            replica = self.replica
            if replica.next_deadline_ms() <= replica.now_ms():
                # due now (the puts' new entries have a free push slot): the timer's work at
                # once, rather than a 0 s timer and one more loop turn before the push leaves
                self._tick()
            else:
                self._pump()

    def _pump(self) -> None:
        if self._stopped:
            return
        undeliverable: list[Message] = []
        try:
            outbox = self.replica.take_outbox()
            self.replica.complete()
        except Exception as exc:  # storage failure: the replica stopped
            self._die(f"replica failed: {exc}")
            return
        for msg in outbox:
            link = self.links.get(msg.remote_id)
            transport = link.transport if link is not None and link.ready else None
            if transport is None or transport.is_closing():
                if isinstance(msg, VoteRequest | HeartBeatRequest):
                    undeliverable.append(msg)
                continue
            full = transport.get_write_buffer_size() > self.max_buffer_bytes
            if full and isinstance(msg, PushRequest) and msg.payloads:
                continue
            try:
                transport.write(encode_frame(msg))
            except ValueError as exc:
                logger.error("cannot encode %s for %s: %s", type(msg).__name__, msg.remote_id, exc)
                continue
            self.frames_sent += 1
        for msg in undeliverable:
            self.replica.send_failed(msg)
        if undeliverable:
            self._pump()
            return
        self._arm_timer()

    def _arm_timer(self) -> None:
        loop = self._loop
        if loop is None or self._stopped:
            return
        delay_ms = self.replica.next_deadline_ms() - self.replica.now_ms()
        at = time.monotonic() + max(0.0, delay_ms) / 1000
        if self._timer is not None and self._timer_at <= at and not self._timer.cancelled():
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_later(max(0.0, delay_ms) / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        with flushes_held():
            self._tick()

    def _tick(self) -> None:
        if self._timer is not None:  # a due pump came first
            self._timer.cancel()
            self._timer = None
        try:
            self.replica.tick()
        except Exception as exc:
            self._die(f"replica failed: {exc}")
            return
        self._pump()
