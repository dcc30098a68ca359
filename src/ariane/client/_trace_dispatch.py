"""Shipping trace records off the business paths (RocketMQ ``AsyncTraceDispatcher``).

How it works: hooks on the send and consume paths queue their records, which never blocks
and never raises: ``append_encoded`` takes encoded records (``ariane.common.trace``),
``append`` a ``TraceContext``, and ``append_open`` an open pair (``OpenTrace``): the values
of a Pub, or of a listener call's SubBefore that the call's end completes with its SubAfter
(``attach``), encoded later by their owner (``PairEncoder.encode_pairs``) when the worker
takes them. The queue is a bounded deque (``queue_size`` entries, 10000; when full new ones
are dropped and ``stats.discarded`` counted), and at most once per round an append wakes
the worker (``call_soon_threadsafe`` when called from a listener thread). The worker task
runs on the host client's event loop: it lingers ``linger_ms`` (50 ms) after the first
entry of a round, or until ``batch_size`` (2000) entries are queued, then takes everything
queued, has the open pairs encoded in one loop per owner, has a consume tracer's entry buffer
(``attach_entries``: one compact entry per traced delivery, filled by the tracer's hooks,
whose pending entries count as queued) write its records in one call, and packs the records into trace
messages of at most ~118000 characters whose ``KEYS`` are the traced msgIds and business
keys (a round of entries alone: the buffer writes the messages whole, bodies already UTF-8).
Big trace messages matter: a send costs the client as much as encoding a hundred records.
Each trace message is sent by the dispatcher's own producer (group
``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>``, client instance
``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>``, so trace traffic has its own connections)
with a 5 s timeout; at most ``max_in_flight`` sends run at once. The producer is the normal
send path, so ACL signing and routing apply as for any message: the trace topic's route
decides which broker gets the records (a dedicated trace broker works as it does upstream).

Delivery is best effort, as upstream: a failed send is logged (rate-limited) and its records
counted in ``stats.lost_records``; nothing is retried beyond the producer's own retries. While
sends are slow the worker waits for a free slot, the deque fills and new contexts are dropped,
so a dead trace broker never slows a business send or consume. ``close`` flushes what is
queued for at most ``flush_timeout_ms`` and closes the trace producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ariane.client.config import ClientConfig
from ariane.client.message import Message, SendResult
from ariane.common import native
from ariane.common import properties as props
from ariane.common.topics import GROUP_MAX_LENGTH, validate_topic
from ariane.common.trace import (
    DEFAULT_TRACE_TOPIC,
    MAX_TRACE_KEY_CHARS,
    MAX_TRACE_MESSAGE_CHARS,
    TRACE_INSTANCE_NAME,
    TRACE_PRODUCER_GROUP_PREFIX,
    TraceContext,
    encode_context,
)
from ariane.errors import InvalidArgumentError

__all__ = [
    "TAKEN",
    "AsyncTraceDispatcher",
    "EncodedTrace",
    "OpenTrace",
    "PairEncoder",
    "SenderFactory",
    "TraceSender",
    "TraceSettings",
    "TraceStats",
    "claim",
    "encoded",
    "join_keys",
    "join_keys_py",
    "key_chars",
    "key_chars_py",
    "pack",
    "trace_topic_name",
]

logger = logging.getLogger(__name__)

_COUNTER = itertools.count(1)
#: ``_wake_at`` when no append is to wake the worker (longer than any queue)
_NEVER = 1 << 62
#: Failures logged at most this often (seconds).
_LOG_EVERY_S = 10.0


class TraceSender(Protocol):
    """What the dispatcher needs from its producer."""

    async def start(self) -> None:
        """Start (idempotent)."""
        ...

    async def close(self) -> None:
        """Stop."""
        ...

    async def send(self, msg: Message, *, timeout_ms: int | None = None) -> SendResult:
        """Send one message and wait for the broker's answer."""
        ...


#: ``factory(client_config, group)``: a started-on-demand producer for trace messages.
SenderFactory = Callable[[ClientConfig, str], TraceSender]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSettings:
    """Dispatcher limits (RocketMQ's fixed values, adjustable here).

    Attributes:
        queue_size: queue entries (a context, or an open pair) buffered before new ones are
            dropped (Java 2048 contexts; more here because a round takes everything queued).
        batch_size: with this many entries queued a round starts at once (no lingering,
            or the lingering ends).
        max_message_chars: a trace message body is closed at this size (Java 118000).
        linger_ms: how long a round waits for more contexts before sending.
        max_in_flight: trace messages being sent at once.
        send_timeout_ms: timeout of one trace message (Java 5000).
        flush_timeout_ms: how long ``close`` waits for queued records to be sent.
    """

    queue_size: int = 10_000
    batch_size: int = 2000
    max_message_chars: int = MAX_TRACE_MESSAGE_CHARS
    linger_ms: int = 50
    max_in_flight: int = 16
    send_timeout_ms: int = 5000
    flush_timeout_ms: int = 3000

    def __post_init__(self) -> None:
        for name in ("queue_size", "batch_size", "max_message_chars", "max_in_flight"):
            if getattr(self, name) <= 0:
                raise InvalidArgumentError(f"trace {name} must be > 0")
        if self.linger_ms < 0 or self.send_timeout_ms <= 0 or self.flush_timeout_ms < 0:
            raise InvalidArgumentError("trace timeouts must be >= 0 (send timeout > 0)")


@dataclass(slots=True)
class TraceStats:
    """What the dispatcher did (counters only grow).

    Attributes:
        appended: contexts accepted (a completed SubBefore/SubAfter pair counts two).
        discarded: contexts dropped because the queue was full or the dispatcher closed
            (Java's ``discardCount``).
        sent_messages: trace messages the broker stored.
        sent_records: records in them.
        failed_messages: trace messages that could not be sent.
        lost_records: records in those, plus contexts that could not be encoded.
    """

    appended: int = 0
    discarded: int = 0
    sent_messages: int = 0
    sent_records: int = 0
    failed_messages: int = 0
    lost_records: int = 0


def trace_topic_name(trace_topic: str | None) -> str:
    """The trace topic to use: ``trace_topic``, or ``RMQ_SYS_TRACE_TOPIC`` when blank.

    Raises:
        InvalidArgumentError: not a legal topic name.
    """
    name = (trace_topic or "").strip() or DEFAULT_TRACE_TOPIC
    validate_topic(name)
    return name


def _producer_group(host_group: str, kind: str) -> str:
    suffix = f"-{kind}-{next(_COUNTER)}"
    room = GROUP_MAX_LENGTH - len(TRACE_PRODUCER_GROUP_PREFIX) - 1 - len(suffix)
    return f"{TRACE_PRODUCER_GROUP_PREFIX}-{host_group[: max(room, 0)]}{suffix}"


#: Records ready to ship: (traced topic, encoded records, how many there are, their index
#: keys: msgIds and business keys; a key text may hold several space-separated keys, as
#: ``KEYS`` does). A plain tuple: hooks build one or two per message.
EncodedTrace = tuple[str, str, int, tuple[str, ...]]


#: A record pair whose encoding waits for the worker: ``[owner, data]``, a list so that both
#: sides claim it with one atomic ``append``: the end of the listener call appends its data
#: (``attach``), the worker appends ``_TAKEN`` when it takes the pair (``claim``); whichever
#: lands at index 2 first wins. No lock, from any thread. ``owner.encode_pairs`` turns the
#: pairs of a round into ``EncodedTrace`` items.
OpenTrace = list[Any]
_TAKEN = object()
#: what ``claim`` appends (for owners that claim pairs themselves, in bulk)
TAKEN = _TAKEN


class PairEncoder(Protocol):
    """The owner of open pairs (``ConsumeTracer``)."""

    def encode_pairs(self, pairs: list[OpenTrace]) -> list[EncodedTrace]:
        """Claim (``claim``) and encode ``pairs``, as few items as the limits allow."""
        ...


def claim(pair: OpenTrace) -> Any:
    """The worker takes ``pair``: its ``after`` data, or ``None`` when it came too late (the
    caller of ``attach`` then ships that part itself)."""
    pair.append(_TAKEN)
    after = pair[2]
    return None if after is _TAKEN else after


def encoded(items: list[EncodedTrace | OpenTrace]) -> list[EncodedTrace]:
    """The items of a round, open pairs encoded by their owners (in bulk; grouped by owner
    without a Python frame per pair, the records kept when the round is only pairs)."""
    pairs = [i for i in items if i.__class__ is list]
    if not pairs:
        return items  # type: ignore[return-value]
    out: list[EncodedTrace] = (
        [] if len(pairs) == len(items) else [i for i in items if i.__class__ is not list]  # type: ignore[misc]
    )
    for owner, group in itertools.groupby(pairs, key=_OWNER):
        out.extend(owner.encode_pairs(list(group)))
    return out


#: A pair's owner (``pair[0]``), without a Python frame per pair.
_OWNER = operator.itemgetter(0)


def _take(queue: deque[Any], n: int) -> list[Any]:
    """The first ``n`` entries of ``queue``, popped (``popleft`` called from C: no Python frame
    per entry; entries appended meanwhile, from any thread, stay queued)."""
    return list(itertools.starmap(queue.popleft, itertools.repeat((), n)))


class _Packed(NamedTuple):
    data: str | bytes  # bytes: already UTF-8 (an entry buffer's ``pack``)
    records: int
    keys: str


def join_keys_py(keys: list[str]) -> str:
    """A trace message's ``KEYS``: ``keys`` without repeats, in order, space-separated."""
    return " ".join(dict.fromkeys(keys))


def key_chars_py(keys: tuple[str, ...]) -> int:
    """The characters ``keys`` add to a ``KEYS`` text (each with its separator)."""
    return sum(map(len, keys)) + len(keys)


_join_keys_c: Callable[[list[str]], str | None] | None = getattr(
    native.speedups, "trace_join_keys", None
)  # absent: the pure build, or a stale compiled one
_key_chars_c: Callable[[tuple[str, ...]], int | None] | None = getattr(
    native.speedups, "trace_key_chars", None
)


def join_keys(keys: list[str]) -> str:
    """``join_keys_py``, compiled when built (a cheap hash instead of a dict of SipHashes)."""
    if _join_keys_c is not None:
        out = _join_keys_c(keys)
        if out is not None:
            return out
    return join_keys_py(keys)


def key_chars(keys: tuple[str, ...]) -> int:
    """``key_chars_py``, compiled when built."""
    if _key_chars_c is not None:
        out = _key_chars_c(keys)
        if out is not None:
            return out
    return key_chars_py(keys)


def _close(data: list[str], records: int, keys: list[str]) -> _Packed:
    return _Packed("".join(data), records, join_keys(keys))


def pack(
    items: list[EncodedTrace],
    max_chars: int = MAX_TRACE_MESSAGE_CHARS,
    max_key_chars: int = MAX_TRACE_KEY_CHARS,
) -> list[_Packed]:
    """``flushData``: concatenate encoded records into message bodies. A body is closed as
    soon as it reaches ``max_chars`` (so it may exceed it by one item), and before its
    ``KEYS`` text would pass ``max_key_chars`` (the record's properties must fit in 32767
    bytes); one item with more keys than that keeps the first ones that fit."""
    out: list[_Packed] = []
    data: list[str] = []
    keys: list[str] = []
    size = key_size = records = 0
    for _topic, text, count, item_keys in items:
        extra = key_chars(item_keys)
        if data and key_size + extra > max_key_chars:
            out.append(_close(data, records, keys))
            data, keys, size, key_size, records = [], [], 0, 0, 0
        if extra > max_key_chars:
            kept = _fitting(item_keys, max_key_chars)
            keys.extend(kept)
            key_size += sum(len(k) + 1 for k in kept)
        else:
            keys.extend(item_keys)
            key_size += extra
        data.append(text)
        size += len(text)
        records += count
        if size >= max_chars:
            out.append(_close(data, records, keys))
            data, keys, size, key_size, records = [], [], 0, 0, 0
    if data:
        out.append(_close(data, records, keys))
    return out


def _fitting(keys: tuple[str, ...], budget: int) -> list[str]:
    kept = []
    for text in keys:
        for key in text.split(props.KEY_SEPARATOR):
            if key and len(key) + 1 <= budget:
                kept.append(key)
                budget -= len(key) + 1
    return kept


class AsyncTraceDispatcher:
    """Batches trace contexts and sends them to the trace topic (see the module docstring).

    Args:
        trace_topic: the trace topic (blank: ``RMQ_SYS_TRACE_TOPIC``).
        host_config: the traced client's settings (NameServers, credentials...); the trace
            producer uses them with its own instance name.
        host_group: the traced producer or consumer group (names the trace producer).
        kind: ``PRODUCE`` or ``CONSUME``.
        sender_factory: builds the trace producer.
        settings: limits.

    Raises:
        InvalidArgumentError: a bad trace topic or setting.
    """

    def __init__(
        self,
        *,
        trace_topic: str | None,
        host_config: ClientConfig,
        host_group: str,
        kind: str,
        sender_factory: SenderFactory,
        settings: TraceSettings | None = None,
    ) -> None:
        self.trace_topic = trace_topic_name(trace_topic)
        self.settings = settings or TraceSettings()
        self.group = _producer_group(host_group, kind)
        self.sender_config = dataclasses.replace(
            host_config, instance_name=f"{TRACE_INSTANCE_NAME}_{host_config.namesrv_addr}"
        )
        self.stats = TraceStats()
        self._factory = sender_factory
        self._sender: TraceSender | None = None
        self._queue: deque[EncodedTrace | OpenTrace] = deque()
        #: a consume tracer's entry buffer (``_trace_records.EntryBuffer``; its ``len``: the
        #: entries with records to write) and its ``take`` with the tracer's arguments bound
        self._entries: Sized | None = None
        self._take_entries: Callable[[], list[EncodedTrace]] | None = None
        #: its ``pack`` with the tracer's arguments bound: ``(max_chars, max_key_chars)`` ->
        #: whole trace messages ``(UTF-8 body, records, KEYS)``, or None (``take`` then)
        self._pack_entries: Callable[[int, int], list[tuple[bytes, int, str]] | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._wake: asyncio.Event | None = None
        #: the queue length at which an append wakes the worker: 1 while no wake-up is pending,
        #: ``batch_size`` while the worker lingers, else ``_NEVER`` (one test per append)
        self._wake_at = 1
        #: entries the queue takes (``queue_size``; 0 once closed)
        self._room = self.settings.queue_size
        self._worker: asyncio.Task[None] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._last_log = 0.0

    # -- the hot side -----------------------------------------------------------------------------

    def append(self, ctx: TraceContext) -> bool:
        """Encode ``ctx`` and queue it (see ``append_encoded``); ``False`` (and counted) when
        it was dropped or does not encode. Never blocks or raises."""
        if not ctx.beans:
            return False
        try:
            transfer = encode_context(ctx)
        except InvalidArgumentError as exc:
            self.stats.lost_records += len(ctx.beans)
            logger.warning("trace context of %s not encodable: %s", ctx.beans[0].msg_id, exc)
            return False
        keys = tuple(transfer.keys)
        return self.append_encoded((ctx.beans[0].topic, transfer.data, len(ctx.beans), keys))

    def attach_entries(
        self,
        entries: Sized,
        take: Callable[[], list[EncodedTrace]],
        pack_whole: Callable[[int, int], list[tuple[bytes, int, str]] | None] | None = None,
    ) -> None:
        """Have the worker write the records of ``entries`` (an entry buffer its owner's hooks
        fill, counting their appends and waking the worker as ``_enqueue`` does) with ``take()``
        in each round, after the queued items; its pending entries count as queued. With
        ``pack_whole``, a round with no queued item has it write whole trace messages instead
        (``pack_whole(max_chars, max_key_chars)``: what ``pack`` makes of ``take()``'s items,
        or None to take them)."""
        self._entries = entries
        self._take_entries = take
        self._pack_entries = pack_whole

    def _queued(self) -> int:
        entries = self._entries
        return len(self._queue) + (len(entries) if entries is not None else 0)

    def _enqueue(self, item: EncodedTrace | OpenTrace) -> bool:
        """``append_encoded`` and ``append_open`` (one function: one call per hook)."""
        queue = self._queue
        entries = self._entries
        if len(queue) + (len(entries) if entries is not None else 0) >= self._room:
            return self._drop(item)  # full, or closed
        queue.append(item)
        self.stats.appended += 1
        self.wake_if_due()
        return True

    def wake_if_due(self) -> None:
        """Wake the worker when what is queued reached ``_wake_at`` (the first of a round, or a
        round's worth lingering)."""
        if self._queued() >= self._wake_at:
            self._wake_at = _NEVER  # the worker re-arms it
            self._notify()

    def _drop(self, item: EncodedTrace | OpenTrace | None) -> bool:
        self.stats.discarded += 1
        if item.__class__ is list:  # an open pair is claimed at once: ``attach`` fails
            item.append(_TAKEN)
        self._log_sometimes("trace queue full or dispatcher closed: context dropped")
        return False

    #: Queue encoded records for sending; ``False`` (and counted) when they were dropped.
    #: Never blocks or raises; callable from any thread.
    append_encoded = _enqueue
    #: Queue an open pair (``[owner, data]``, see ``OpenTrace``) as ``append_encoded`` queues
    #: records; a dropped pair is claimed at once (the caller gets it only after this: nothing
    #: races it), so ``attach`` answers ``False``. Never blocks or raises; any thread.
    append_open = _enqueue

    def attach(self, pair: OpenTrace, after: Any) -> bool:
        """Complete a queued pair with ``after`` (counted as a context); ``False`` when the
        worker took it first or it was dropped: the caller ships that part itself."""
        pair.append(after)
        if pair[2] is after:
            self.stats.appended += 1
            return True
        return False

    def _notify(self) -> None:
        wake = self._wake
        if wake is None:
            return
        if threading.get_ident() == self._loop_thread:
            wake.set()
            return
        loop = self._loop
        assert loop is not None
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing to wake
            loop.call_soon_threadsafe(wake.set)

    @property
    def queued(self) -> int:
        """Contexts waiting to be sent."""
        return self._queued()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the worker on the running loop (idempotent). The trace producer starts
        with the first send."""
        if self._worker is not None or self._closed:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(self.settings.max_in_flight)
        self._worker = asyncio.create_task(self._run(), name=f"trace-{self.group}")
        if self._queued():
            self._wake_at = _NEVER
            self._wake.set()

    async def flush(self, timeout_ms: int | None = None) -> bool:
        """Wait until every queued context is sent (or failed); ``False`` on timeout."""
        wait_ms = self.settings.flush_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + wait_ms / 1000
        while self._queued() or self._sending:
            if self._wake is not None and self._queued():
                self._wake.set()
            left = deadline - time.monotonic()
            if left <= 0 or self._worker is None:
                return False
            if self._sending:
                await asyncio.wait(set(self._sending), timeout=min(left, 0.05))
            else:
                await asyncio.sleep(min(left, 0.005))
        return True

    async def close(self) -> None:
        """Flush (at most ``flush_timeout_ms``), stop the worker, close the trace producer;
        what is still queued is counted as discarded. Idempotent."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await self.flush()
        self._closed = True
        self._room = 0
        tasks = [t for t in (self._worker, *self._sending) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        entries = self._entries
        clear = getattr(entries, "clear", None)
        self.stats.discarded += len(self._queue) + (clear() if clear is not None else 0)
        self._queue.clear()
        sender, self._sender = self._sender, None
        if sender is not None:
            try:
                await sender.close()
            except Exception as exc:
                logger.warning("closing the trace producer %s failed: %s", self.group, exc)

    # -- the worker -----------------------------------------------------------------------------

    async def _run(self) -> None:
        wake, queue, settings = self._wake, self._queue, self.settings
        assert wake is not None
        while True:
            await wake.wait()
            wake.clear()
            if self._queued() < settings.batch_size and settings.linger_ms:
                # appends do not wake us while we linger, unless a round's worth is queued
                self._wake_at = settings.batch_size
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), settings.linger_ms / 1000)
                wake.clear()
            self._wake_at = 1  # before draining: later appends wake us again
            while self._queued():
                await self._dispatch(_take(queue, len(queue)))

    async def _dispatch(self, items: list[EncodedTrace | OpenTrace]) -> None:
        slots = self._slots
        assert slots is not None
        for packed in self._packed(items):
            await slots.acquire()
            task = asyncio.create_task(self._send(packed))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    def _packed(self, items: list[EncodedTrace | OpenTrace]) -> list[_Packed]:
        """The trace messages of a round: ``items`` encoded, then the pending entries' records
        (the items first: the order of the old queue), packed; with no item, the entry buffer
        writes whole messages itself when it can (``_packed_entries``)."""
        ready = self._encoded(items)
        if self._entries:
            if not ready and self._pack_entries is not None:
                whole = self._packed_entries(self._pack_entries)
                if whole is not None:
                    return whole
            ready = ready + self._taken_entries()
        return pack(ready, self.settings.max_message_chars)

    def _packed_entries(
        self, pack_whole: Callable[[int, int], list[tuple[bytes, int, str]] | None]
    ) -> list[_Packed] | None:
        entries = self._entries
        assert entries is not None
        pending = len(entries)
        try:
            whole = pack_whole(self.settings.max_message_chars, MAX_TRACE_KEY_CHARS)
        except Exception:  # a bug: the entries are lost, and counted
            self._entries_lost(entries, pending)
            return []
        return None if whole is None else [_Packed._make(one) for one in whole]

    def _encoded(self, items: list[EncodedTrace | OpenTrace]) -> list[EncodedTrace]:
        try:
            return encoded(items)
        except Exception:  # an encoder failed (a bug): the round is lost, and counted
            logger.warning("encoding trace records failed", exc_info=True)
            self.stats.lost_records += len(items)
            return []

    def _taken_entries(self) -> list[EncodedTrace]:
        take, entries = self._take_entries, self._entries
        assert take is not None
        assert entries is not None
        pending = len(entries)
        try:
            return take()
        except Exception:  # a bug: the entries are lost, and counted
            self._entries_lost(entries, pending)
            return []

    def _entries_lost(self, entries: object, pending: int) -> None:
        """Called in the handler of a failed ``take`` or ``pack``: log it, count the pending
        entries as lost and clear the buffer (never taken again: the worker would spin)."""
        logger.warning("encoding trace entries failed", exc_info=True)
        self.stats.lost_records += pending
        with contextlib.suppress(Exception):
            entries.clear()  # type: ignore[attr-defined]

    async def _send(self, packed: _Packed) -> None:
        try:
            sender = await self._started_sender()
            data = packed.data
            body = data if isinstance(data, bytes) else data.encode("utf-8")
            msg = Message(self.trace_topic, body, properties={props.KEYS: packed.keys})
            await sender.send(msg, timeout_ms=self.settings.send_timeout_ms)
        except asyncio.CancelledError:
            self.stats.failed_messages += 1
            self.stats.lost_records += packed.records
            raise
        except Exception as exc:
            self.stats.failed_messages += 1
            self.stats.lost_records += packed.records
            self._log_sometimes(f"sending trace data to {self.trace_topic} failed ({exc!r})")
        else:
            self.stats.sent_messages += 1
            self.stats.sent_records += packed.records
        finally:
            assert self._slots is not None
            self._slots.release()

    async def _started_sender(self) -> TraceSender:
        if self._sender is not None:
            return self._sender
        async with self._start_lock:
            if self._sender is None:
                sender = self._factory(self.sender_config, self.group)
                await sender.start()
                self._sender = sender
            return self._sender

    def _log_sometimes(self, what: str) -> None:
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            self._last_log = now
            logger.warning(
                "%s (trace %s so far: %d contexts discarded, %d records lost)",
                what,
                self.group,
                self.stats.discarded,
                self.stats.lost_records,
            )
