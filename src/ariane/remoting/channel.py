"""One remoting connection (RocketMQ's Netty ``Channel`` plus the response table of
``NettyRemotingAbstract``), used by both the server and the client.

How it works: ``Channel`` is an ``asyncio.Protocol``. Received bytes go through a
``FrameDecoder``; each response completes the future registered under its opaque, each request
goes to the ``RequestHandler`` (the dispatcher), inline and in arrival order; consecutive
requests of the handler's ``run_codes`` go to its ``handle_run`` together (a read's single
sends in one pass; while the handler's ``raw_sends`` is set, the decoder leaves their plain
frames undecoded, ``rawsend.RawSend``, and one not taken as a run is decoded here). Frames written
while a read is being handled are buffered and sent with one vectored write at the end of the
read; frames written at other times are flushed once per loop iteration, or at the end of a
``held_flushes()`` block (a DLedger leader's commit answering many puts: their answers leave
in the same iteration, without a loop turn per batch). Requests whose code is in the
channel's ``write_at_once`` (a client's pulls) are written at once instead: a consumer that
queued its next pull behind the listener work of the batch it just received kept the broker
idle meanwhile, and the two sides ran in turn instead of side by side (the peer harness's
drain: 72-78k msg/s with the pull queued, 158-165k written at once). A request waits on a
plain future (``invoke_future``) or a callback (``invoke_callback``), so invoking costs no task.
Timeouts are not one timer per request (a ``call_later`` costs more than the rest of a send):
each waiting request records its deadline and one sweep per channel, re-armed while requests
wait, fails the overdue ones with ``RequestTimeoutError``; the sweep period grows with the
number waiting (``_SWEEP_MIN_S`` .. ``_SWEEP_MAX_S``), so a timeout fires at most that much
late (RocketMQ scans its response table once a second). When the connection goes, every
request still waiting fails with ``ConnectionClosedError``.

A malformed frame closes only this connection (after answering the good frames before it).
Server channels stop reading while the transport's write buffer is full or too many requests
are in progress, so a slow or hostile peer cannot make the server buffer without bound.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol, cast

from ariane.errors import ConnectionClosedError, InvalidArgumentError, RequestTimeoutError
from ariane.remoting.protocol.codec import (
    MAX_FRAME_BYTES,
    FrameDecodeError,
    FrameDecoder,
    encode_parts,
)
from ariane.remoting.protocol.command import FLAG_RESPONSE, RemotingCommand, next_opaque
from ariane.remoting.protocol.rawsend import RAW_CLASS, RAW_CODES

__all__ = [
    "Channel",
    "ReadBufferChannel",
    "RequestHandler",
    "ResponseCallback",
    "Waiter",
    "flushes_held",
    "format_address",
    "held_flushes",
    "release_flushes",
]

logger = logging.getLogger(__name__)

_channel_ids = itertools.count(1)
_NO_RUNS: frozenset[int] = frozenset()
#: a read whose frames are all RawSends (codes RAW_CODES, flag 0) is one run (data_received)
_RAW_CODES = RAW_CODES
_ONLY_RAW: set[type] = {RAW_CLASS}
_CLOSE_LINGER_S = 10.0
#: Sweep period bounds for request timeouts; the period is ``pending / _SWEEP_RATE`` within them.
_SWEEP_MIN_S = 0.05
_SWEEP_MAX_S = 1.0
_SWEEP_RATE = 100_000.0


class _Held(threading.local):
    """Per thread (one event loop per thread): the channels written to inside a
    ``held_flushes()`` block, or None outside one. Per thread, so that a block on one loop
    never collects (and flushes from its thread) a channel of another loop in the process."""

    channels: list[Channel] | None = None


_held = _Held()


def held_flushes() -> bool:
    """Start holding the flushes of frames written outside a read (on the event loop's
    thread); returns True if this call started it, which then owes :func:`release_flushes`."""
    if _held.channels is not None:
        return False
    _held.channels = []
    return True


def release_flushes() -> None:
    """End the block :func:`held_flushes` started: flush every channel written to in it."""
    held, _held.channels = _held.channels, None
    if held:
        for channel in held:
            channel._flush_held = False
            channel._flush()


class flushes_held:
    """``with flushes_held():`` runs its block inside :func:`held_flushes` /
    :func:`release_flushes` (a nested block leaves the release to the outer one)."""

    __slots__ = ("_owner",)

    def __enter__(self) -> None:
        self._owner = held_flushes()

    def __exit__(self, *exc: object) -> None:
        if self._owner:
            release_flushes()


#: ``callback(response, error)``: exactly one of the two is set.
ResponseCallback = Callable[[RemotingCommand | None, BaseException | None], None]


class _Waiter:
    """One request waiting for its response: a future or a callback, and its deadline."""

    __slots__ = ("callback", "deadline", "future", "timeout_ms")

    def __init__(
        self,
        future: asyncio.Future[RemotingCommand] | None,
        callback: ResponseCallback | None,
        deadline: float,
        timeout_ms: int,
    ) -> None:
        self.future = future
        self.callback = callback
        self.deadline = deadline
        self.timeout_ms = timeout_ms

    def complete(self, response: RemotingCommand) -> None:
        future = self.future
        if future is not None:
            if not future.done():
                future.set_result(response)
        elif self.callback is not None:
            self.callback(response, None)

    def fail(self, error: BaseException) -> None:
        future = self.future
        if future is not None:
            if not future.done():
                future.set_exception(error)
        elif self.callback is not None:
            self.callback(None, error)


class Waiter(Protocol):
    """What ``invoke_frame`` registers: ``_Waiter`` or an object of the caller's that is its
    own waiter (an asynchronous send), saving one object and one call per response."""

    deadline: float
    timeout_ms: int

    def complete(self, response: RemotingCommand) -> None:
        """The response arrived."""

    def fail(self, error: BaseException) -> None:
        """No response: a timeout or the connection went."""


class RequestHandler(Protocol):
    """Receives the requests a channel decodes (the dispatcher)."""

    def handle_request(self, channel: Channel, request: RemotingCommand) -> None:
        """Handle one request; must not raise."""
        ...


def format_address(address: Any) -> str:
    """``"host:port"`` from a socket address tuple (``"?"`` if unknown)."""
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return "?" if address is None else str(address)


class Channel(asyncio.Protocol):
    """A remoting connection.

    Args:
        handler: where decoded requests go.
        max_frame_bytes: largest frame accepted from the peer.
        pause_reading_on_backpressure: stop reading while writes are backed up (servers).
        max_inflight: asynchronous requests in progress before reading pauses.
        max_write_buffer_bytes: bytes waiting to be sent before the connection is closed
            (0: no limit).
        write_at_once: request codes written as soon as they are sent instead of at the next
            flush (a client's pulls: the peer starts on them while we handle what came in).

    Attributes:
        id: unique id of this channel within the process.
        remote_addr: the peer as ``"host:port"``.
        local_addr: our end as ``"host:port"``.
        attributes: free slots for upper layers (client id, language...).
        last_active: loop time of the last read or write.
        max_frame_bytes: largest frame accepted from the peer (and written to it).
    """

    def __init__(
        self,
        handler: RequestHandler,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        pause_reading_on_backpressure: bool = False,
        max_inflight: int = 10_000,
        max_write_buffer_bytes: int = 0,
        write_at_once: frozenset[int] = frozenset(),
    ) -> None:
        self.id = next(_channel_ids)
        self.remote_addr = "?"
        self.local_addr = "?"
        self.attributes: dict[str, Any] = {}
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        self._handler = handler
        self._decoder = FrameDecoder(max_frame_bytes)
        self._max_frame_bytes = max_frame_bytes
        self.max_frame_bytes = max_frame_bytes
        self._transport: asyncio.Transport | None = None
        self._closing = False
        self._pending: dict[int, Waiter] = {}
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._flush_held = False
        self._in_read = False
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self._close_listeners: list[Callable[[Channel], None]] = []
        self._pause_on_backpressure = pause_reading_on_backpressure
        self._write_paused = False
        self._reading_paused = False
        self._inflight = 0
        self._max_inflight = max_inflight
        self._max_write_buffer = max_write_buffer_bytes
        self._write_at_once = write_at_once
        self._backlog: collections.deque[RemotingCommand] = collections.deque()

    def __repr__(self) -> str:
        return f"<Channel #{self.id} {self.remote_addr}>"

    # -- state ----------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """Whether the connection is open and not closing."""
        return self._transport is not None and not self._closing

    @property
    def pending_requests(self) -> int:
        """Requests sent on this channel still waiting for a response."""
        return len(self._pending)

    def add_close_listener(self, listener: Callable[[Channel], None]) -> None:
        """Call ``listener(channel)`` once when the connection is gone."""
        if self._closed.done():
            listener(self)
        else:
            self._close_listeners.append(listener)

    def close(self) -> None:
        """Close gracefully: buffered frames are still written (for up to 10 s, then abort)."""
        if self._transport is not None and not self._closing:
            self._closing = True
            self._flush()
            self._transport.close()
            # a peer that stops reading would keep a closing transport open forever
            self._loop.call_later(_CLOSE_LINGER_S, self._abort_if_open)

    def _abort_if_open(self) -> None:
        if self._transport is not None:
            logger.info("%r: peer did not drain before close, aborting", self)
            self._transport.abort()

    def abort(self) -> None:
        """Close at once, dropping buffered frames."""
        if self._transport is not None:
            self._closing = True
            self._transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the connection is gone."""
        await asyncio.shield(self._closed)

    # -- sending --------------------------------------------------------------------------------

    def send(self, cmd: RemotingCommand) -> bool:
        """Queue a command for writing; ``False`` if the connection is closed (dropped).

        Raises:
            LocalProtocolError: the command cannot be encoded.
        """
        if self._transport is None or self._closing:
            return False
        head, body = encode_parts(cmd, max_frame_bytes=self._max_frame_bytes)
        out = self._out
        out.append(head)
        if body is not None:
            out.append(body)
        if self._write_at_once and cmd.code in self._write_at_once and self._may_write_now(cmd):
            handle = self._flush_handle
            if handle is not None:
                handle.cancel()
            self._flush()
            return True
        if not self._in_read and self._flush_handle is None and not self._flush_held:
            held = _held.channels
            if held is not None:
                self._flush_held = True
                held.append(self)
            else:
                self._flush_handle = self._loop.call_soon(self._flush)
        return True

    def send_frames(self, frames: list[bytes]) -> bool:
        """Queue encoded frames for writing (answers a run processor built itself), as
        :meth:`send` queues a command's; ``False`` if the connection is closed (dropped)."""
        if self._transport is None or self._closing:
            return False
        self._out += frames
        if not self._in_read and self._flush_handle is None and not self._flush_held:
            held = _held.channels
            if held is not None:
                self._flush_held = True
                held.append(self)
            else:
                self._flush_handle = self._loop.call_soon(self._flush)
        return True

    def _may_write_now(self, cmd: RemotingCommand) -> bool:
        """A request outside a read and outside a ``held_flushes()`` block."""
        return (
            not cmd.flag & FLAG_RESPONSE
            and not self._in_read
            and not self._flush_held
            and _held.channels is None
        )

    def _flush(self) -> None:
        self._flush_handle = None
        out = self._out
        if not out:
            return
        self._out = []
        transport = self._transport
        if transport is None:
            return
        if len(out) == 1:
            transport.write(out[0])
        else:
            transport.writelines(out)
        self.last_active = self._loop.time()
        limit = self._max_write_buffer
        if limit and transport.get_write_buffer_size() > limit:
            logger.warning(
                "%r: closing, %d bytes wait to be sent (more than %d): the peer stopped reading",
                self, transport.get_write_buffer_size(), limit,
            )  # fmt: skip
            self.abort()

    def invoke_future(
        self, request: RemotingCommand, timeout_ms: int
    ) -> asyncio.Future[RemotingCommand]:
        """Send a request and return the future of its response (no task is created).

        The future fails with ``RequestTimeoutError`` after ``timeout_ms`` and with
        ``ConnectionClosedError`` if the connection goes first.

        Raises:
            ConnectionClosedError: the connection is already closed.
            InvalidArgumentError: ``timeout_ms`` is not positive.
            LocalProtocolError: the request cannot be encoded.
        """
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._register(request, _Waiter(future, None, 0.0, timeout_ms))
        return future

    def invoke_callback(
        self, request: RemotingCommand, timeout_ms: int, callback: ResponseCallback
    ) -> None:
        """Send a request; ``callback(response, None)`` or ``callback(None, error)`` runs once
        when the response arrives, ``timeout_ms`` passes (``RequestTimeoutError``) or the
        connection goes (``ConnectionClosedError``). Cheaper than a future on hot paths.

        Raises:
            ConnectionClosedError: the connection is already closed.
            InvalidArgumentError: ``timeout_ms`` is not positive.
            LocalProtocolError: the request cannot be encoded.
        """
        self._register(request, _Waiter(None, callback, 0.0, timeout_ms))

    def new_opaque(self) -> int:
        """A request id no request waiting on this channel has (for ``invoke_frame``)."""
        pending = self._pending
        opaque = next_opaque()
        while opaque in pending:
            opaque = next_opaque()
        return opaque

    def invoke_frame(self, opaque: int, head: bytes, body: bytes | None, waiter: Waiter) -> None:
        """``invoke_callback`` of a request its caller encoded (``head``: length field, header
        word and header; ``body``) under ``opaque`` from ``new_opaque`` in the same loop turn:
        ``waiter.complete(response)`` or ``waiter.fail(error)`` runs once, as for a callback
        (``RequestTimeoutError`` once ``waiter.timeout_ms`` passed, found by the sweep). The
        frame is queued as ``send`` queues one. The caller skips this path when requests are
        signed or hooked (``RemotingClient.signer``, the dispatcher's hooks): they amend a
        command, not bytes.

        Raises:
            ConnectionClosedError: the connection is already closed.
            InvalidArgumentError: ``waiter.timeout_ms`` is not positive.
        """
        timeout_ms = waiter.timeout_ms
        if timeout_ms <= 0:
            raise InvalidArgumentError(f"timeout_ms must be positive, got {timeout_ms}")
        if self._transport is None or self._closing:
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed")
        waiter.deadline = self._loop.time() + timeout_ms / 1000.0
        self._pending[opaque] = waiter
        out = self._out
        out.append(head)
        if body is not None:
            out.append(body)
        if not self._in_read and self._flush_handle is None and not self._flush_held:
            held = _held.channels
            if held is not None:
                self._flush_held = True
                held.append(self)
            else:
                self._flush_handle = self._loop.call_soon(self._flush)
        if self._sweep_handle is None:
            self._arm_sweep()

    def _register(self, request: RemotingCommand, waiter: _Waiter) -> None:
        timeout_ms = waiter.timeout_ms
        if timeout_ms <= 0:
            raise InvalidArgumentError(f"timeout_ms must be positive, got {timeout_ms}")
        if not self.is_active:
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed")
        pending = self._pending
        opaque = request.opaque
        while opaque in pending:  # a reused command object must not steal another's slot
            opaque = next_opaque()
        request.opaque = opaque
        waiter.deadline = self._loop.time() + timeout_ms / 1000.0
        pending[opaque] = waiter
        try:
            self.send(request)
        except BaseException:
            del pending[opaque]
            raise
        if self._sweep_handle is None:
            self._arm_sweep()

    def _arm_sweep(self) -> None:
        period = min(_SWEEP_MAX_S, max(_SWEEP_MIN_S, len(self._pending) / _SWEEP_RATE))
        self._sweep_handle = self._loop.call_later(period, self._sweep)

    def _sweep(self) -> None:
        self._sweep_handle = None
        pending = self._pending
        if not pending:
            return
        now = self._loop.time()
        overdue = [(o, w) for o, w in pending.items() if w.deadline <= now]
        for opaque, waiter in overdue:
            del pending[opaque]
            waiter.fail(
                RequestTimeoutError(
                    f"no response from {self.remote_addr} within {waiter.timeout_ms} ms "
                    f"(opaque {opaque})"
                )
            )
        if pending and self.is_active:
            self._arm_sweep()

    async def invoke(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send a request and wait for its response.

        Raises:
            RequestTimeoutError: no response within ``timeout_ms``.
            ConnectionClosedError: the connection closed first (or was closed).
            LocalProtocolError: the request cannot be encoded.
        """
        future = self.invoke_future(request, timeout_ms)
        try:
            return await future
        except asyncio.CancelledError:
            self._forget(request.opaque, future)
            raise

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a one-way request (no response will come).

        Raises:
            ConnectionClosedError: the connection is closed.
            LocalProtocolError: the request cannot be encoded.
        """
        request.mark_oneway()
        if not self.send(request):
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed")

    def _forget(self, opaque: int, future: asyncio.Future[RemotingCommand]) -> None:
        waiter = self._pending.get(opaque)
        if isinstance(waiter, _Waiter) and waiter.future is future:
            del self._pending[opaque]

    # -- server-side flow control ---------------------------------------------------------------

    def begin_async(self) -> None:
        """Count a request whose processing continues in the background."""
        self._inflight += 1

    def end_async(self) -> None:
        """The counterpart of ``begin_async``; resumes queued requests below the limit."""
        self._inflight -= 1
        if self._backlog and self._inflight < self._max_inflight:
            self._drain_backlog()

    def _drain_backlog(self) -> None:
        backlog = self._backlog
        self._in_read = True
        try:
            while backlog and self._inflight < self._max_inflight and self._transport is not None:
                self._dispatch(backlog.popleft())
        finally:
            self._in_read = False
            if self._out:
                self._flush()
        self._update_reading()

    def _dispatch(self, request: RemotingCommand) -> None:
        try:
            self._handler.handle_request(self, request)
        except Exception:
            logger.exception("%r: request handler failed on %s", self, request.describe())

    def _dispatch_run(self, run: list[RemotingCommand]) -> None:
        """A read's consecutive requests of the handler's ``run_codes`` in one call."""
        if len(run) == 1:
            self._dispatch(run[0])
            return
        try:
            self._handler.handle_run(self, run)  # type: ignore[attr-defined]
        except Exception:
            logger.exception("%r: run handler failed on %d requests", self, len(run))

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        pause = self._write_paused or bool(self._backlog)
        if pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, but implement it
        self._transport = cast(asyncio.Transport, transport)
        self.remote_addr = format_address(transport.get_extra_info("peername"))
        self.local_addr = format_address(transport.get_extra_info("sockname"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):
                pass

    def data_received(self, data: bytes) -> None:
        self.last_active = self._loop.time()
        bad: FrameDecodeError | None = None
        run_codes: frozenset[int] = getattr(self._handler, "run_codes", _NO_RUNS)
        decoder = self._decoder
        # the handler's send pass reads plain single sends from their bytes (rawsend.py)
        decoder.raw_sends = bool(run_codes) and getattr(self._handler, "raw_sends", False)
        try:
            commands = decoder.feed(data)
        except FrameDecodeError as exc:
            commands, bad = exc.decoded, exc
        self._in_read = True
        try:
            pending = self._pending
            backlog = self._backlog
            if (
                run_codes
                and commands
                and not backlog
                and self._inflight < self._max_inflight
                and run_codes >= _RAW_CODES
                and set(map(type, commands)) == _ONLY_RAW
            ):
                # every frame a plain single send left raw (requests of run codes): the loop
                # below would make them one run, as nothing is dispatched while it gathers one
                self._dispatch_run(commands)
                commands = []
            run: list[RemotingCommand] = []
            for cmd in commands:
                if (
                    run_codes
                    and cmd.code in run_codes
                    and not cmd.flag & FLAG_RESPONSE
                    and not backlog
                    and self._inflight < self._max_inflight
                ):
                    run.append(cmd)
                    continue
                if run:
                    self._dispatch_run(run)
                    run = []
                if cmd.__class__ is RAW_CLASS:  # a frame left raw, not taken as a run here
                    cmd = cast(Any, cmd).command()
                if cmd.flag & FLAG_RESPONSE:
                    waiter = pending.pop(cmd.opaque, None)
                    if waiter is None:
                        logger.debug(
                            "%r: response without a waiting request: %s", self, cmd.describe()
                        )
                        continue
                    try:
                        waiter.complete(cmd)
                    except Exception:
                        logger.exception("%r: response callback failed", self)
                elif backlog or self._inflight >= self._max_inflight:
                    backlog.append(cmd)  # over the in-flight limit: wait, in order
                else:
                    self._dispatch(cmd)
            if run:
                self._dispatch_run(run)
        finally:
            self._in_read = False
            if self._out:
                self._flush()
        if self._backlog:
            self._update_reading()
        if bad is not None:
            logger.warning("%r: closing after a malformed frame: %s", self, bad)
            self.close()

    def eof_received(self) -> bool | None:
        return None  # let the transport close

    def pause_writing(self) -> None:
        if self._pause_on_backpressure:
            self._write_paused = True
            self._update_reading()

    def resume_writing(self) -> None:
        if self._pause_on_backpressure:
            self._write_paused = False
            self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._transport = None
        self._out = []
        self._backlog.clear()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        pending, self._pending = self._pending, {}
        reason = f": {exc}" if exc is not None else ""
        for waiter in pending.values():
            try:
                waiter.fail(
                    ConnectionClosedError(f"connection to {self.remote_addr} closed{reason}")
                )
            except Exception:
                logger.exception("%r: response callback failed", self)
        if not self._closed.done():
            self._closed.set_result(None)
        listeners, self._close_listeners = self._close_listeners, []
        for listener in listeners:
            try:
                listener(self)
            except Exception:
                logger.exception("%r: close listener failed", self)


#: ``ReadBufferChannel``'s buffer: what one read takes at most (asyncio's own reads take 256 KiB)
READ_BUFFER_BYTES = 256 * 1024


class ReadBufferChannel(Channel, asyncio.BufferedProtocol):
    """A ``Channel`` whose transport reads into one buffer of its own, reused by every read
    (``asyncio.BufferedProtocol``: ``recv_into``), each read's bytes then copied out for the
    decoder. A plain protocol's transport makes a new 256 KiB ``bytes`` per read and shrinks it
    to what came: glibc serves that size with ``mmap`` until some larger block was freed, so a
    process that never reads much (a consumer or producer at a few thousand messages a second)
    paid mmap + mremap + munmap and a page fault on every read. The client's connections."""

    def __init__(self, handler: RequestHandler, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._read_view = memoryview(bytearray(READ_BUFFER_BYTES))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read_view[:nbytes].tobytes())
