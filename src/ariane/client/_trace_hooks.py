"""Capture points of message trace (RocketMQ ``SendMessageTraceHookImpl``,
``ConsumeMessageTraceHookImpl``, ``EndTransactionTraceHookImpl``).

How it works: a producer or consumer built with ``enable_trace=True`` holds a tracer; the
send and consume paths call it only when it exists (``if tracer is not None``), so tracing
off costs one attribute test. The tracer writes what happened straight into encoded records
(``ariane.common.trace``'s record functions: no intermediate objects, these run once or twice
per message) and hands them with their index keys to its ``AsyncTraceDispatcher``
(``append_encoded`` never blocks). Nothing here raises into the business path: a failure to
build a record is logged and the record dropped.

* ``SendTracer.pub``: after a send the broker stored (``SendResult``), unless the broker
  answered ``TRACE_ON=false``: one Pub record, queued as its values and encoded by the
  dispatcher's worker (``encode_pairs``); a batch request gives one record whose msgId is
  the comma-joined ids, as upstream; cost = the send's duration, success = ``SEND_OK``,
  storeTime estimated as start + cost / 2. One-way sends have no answer and no record.
* ``SendTracer.end_transaction``: after END_TRANSACTION went out, from the local transaction
  or from a check-back.
* ``ConsumeTracer.before`` / ``after``: around one listener call: one SubBefore per message
  (skipping messages the storing broker marked ``TRACE_ON=false``) sharing a request id, then
  one SubAfter per message with the listener's time divided by the number of messages and
  its ``ConsumeReturnType``. Both go as one queue item, encoded by the dispatcher's worker
  (``ConsumeTracer``).

Absent tags and keys are written as Java writes them (``null``); topics that start with the
trace topic are never traced (the trace producer's own messages).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from types import NotImplementedType
from typing import Any

from ariane.client._send import PreparedSend
from ariane.client._trace_dispatch import TAKEN, AsyncTraceDispatcher, EncodedTrace, OpenTrace
from ariane.client._trace_records import (
    AfterData,
    Call,
    EntryBuffer,
    bind,
    call_data,
    hook_after,
    hook_before,
    hook_capture,
    hook_end,
    new_counter,
    new_entries,
    sub_after,
    sub_before,
    sub_pairs,
    sub_records,
)
from ariane.client.consumer_types import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from ariane.client.message import SendResult, SendStatus
from ariane.common import properties as props
from ariane.common.clock import Clock, SystemClock
from ariane.common.message import Message, MessageExt
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from ariane.common.trace import (
    DEFAULT_REGION_ID,
    JAVA_NULL,
    MAX_TRACE_KEY_CHARS,
    MAX_TRACE_MESSAGE_CHARS,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceMessageType,
    TraceType,
    index_keys,
    message_type_of,
)
from ariane.remoting.protocol import headers as h

__all__ = [
    "ConsumeTracer",
    "SendTracer",
    "TraceBefore",
    "batch_sources",
    "consume_outcome",
    "request_id",
]

logger = logging.getLogger(__name__)


#: ``encode_pairs`` of both tracers closes an item at a quarter of a trace message's characters
#: or an eighth of its keys, so ``pack`` fills each trace message with a few of them: a
#: traced message adds ~33 characters of keys and ~250 of records, and with quarters of the
#: keys the fourth item never fitted (3 items, ~360 deliveries per trace message; now ~420).
_ITEM_CHARS = MAX_TRACE_MESSAGE_CHARS // 4
_ITEM_KEY_CHARS = MAX_TRACE_KEY_CHARS // 8


_SUCCESS = ConsumeReturnType.SUCCESS


def _b(value: bool) -> str:
    return "true" if value else "false"


def _text(value: str | None) -> str:
    return value if value else JAVA_NULL


class _Tracer:
    """What both tracers hold.

    Args:
        dispatcher: where records go.
        group: the producer or consumer group.
        clock: wall-clock source.
    """

    __slots__ = ("clock", "dispatcher", "group", "now_ms", "now_ns", "trace_topic")

    def __init__(
        self, dispatcher: AsyncTraceDispatcher, group: str, clock: Clock | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.clock = clock or SystemClock()
        #: the clock's wall time in milliseconds
        self.now_ms = self.clock.now_ms
        #: the same in nanoseconds (``time.time_ns`` itself for the system clock: the
        #: consume hooks store it and the worker divides)
        self.now_ns: Callable[[], int] = (
            time.time_ns if type(self.clock) is SystemClock else self._clock_ns
        )
        self.trace_topic = dispatcher.trace_topic

    def _clock_ns(self) -> int:
        return self.now_ms() * 1_000_000


class SendTracer(_Tracer):
    """Pub and EndTransaction records of one producer group (see ``_Tracer``)."""

    __slots__ = ()

    async def around(
        self,
        sending: Awaitable[SendResult],
        source: Message | Sequence[Message],
        body_length: int,
        store_host: Callable[[str], str],
    ) -> SendResult:
        """Await a send and record its Pub (``store_host(broker_name)``: the address)."""
        begin = self.now_ms()
        result = await sending
        self.pub(source, result, begin, store_host(result.message_queue.broker_name), body_length)
        return result

    def traced(self, topic: str) -> bool:
        """Whether sends to ``topic`` are traced (not the trace topic itself)."""
        return not topic.startswith(self.trace_topic)

    def pub(
        self,
        source: Message | Sequence[Message],
        result: SendResult,
        begin_ms: int,
        store_host: str,
        body_length: int,
    ) -> None:
        """Record a send the broker answered (``source``: the message, or a batch's)."""
        try:
            topic = result.message_queue.topic
            if not result.trace_on or topic.startswith(self.trace_topic):
                return
            cost = self.now_ms() - begin_ms
            msg_id = result.msg_id
            if isinstance(source, Message):
                p = source.properties
                tags, keys = p.get(props.TAGS) or JAVA_NULL, p.get(props.KEYS) or JAVA_NULL
                msg_type = message_type_of(p)
                index: tuple[str, ...] = (msg_id,) if keys == JAVA_NULL else (msg_id, keys)
            else:
                tags, msg_type = JAVA_NULL, TraceMessageType.Normal_Msg
                keys = " ".join(dict.fromkeys(k for m in source for k in m.keys)) or JAVA_NULL
                index = tuple(index_keys(msg_id, keys))
            data = (
                begin_ms,
                result.region_id or DEFAULT_REGION_ID,
                topic,
                msg_id,
                tags,
                keys,
                store_host,
                body_length,
                cost if cost > 0 else 0,
                msg_type,
                result.offset_msg_id,
                result.status is SendStatus.SEND_OK,
                index,
            )
            self.dispatcher.append_open([self, data, None])  # complete: nothing to attach
        except Exception:
            logger.warning("recording the Pub trace of %s failed", result.msg_id, exc_info=True)

    def encode_pairs(self, pairs: list[OpenTrace]) -> list[EncodedTrace]:
        """The worker's side: the Pub records of ``pairs`` (``PairEncoder``), written as
        ``pub_record`` writes them, the parts neighbouring sends share formatted once, cut
        into items of about a quarter of a trace message (``_ITEM_CHARS``)."""
        group = self.group
        out: list[EncodedTrace] = []
        texts: list[str] = []
        index: list[str] = []
        size = key_size = 0
        topic = head = mid = region = store = ""
        begin = length = cost = kind = -1
        for pair in pairs:  # complete from the start: nothing to claim
            (at, where, to, msg_id, tags, keys, host, size_of, took, type_of, offset_id, ok,
             keys_of) = pair[1]  # fmt: skip
            if at != begin or to != topic or where != region:
                begin, region, topic = at, where, to
                head = f"Pub\x01{begin}\x01{region}\x01{group}\x01{topic}\x01"
            if took != cost or size_of != length or host != store or type_of != kind:
                cost, length, store, kind = took, size_of, host, type_of
                mid = f"\x01{store}\x01{length}\x01{cost}\x01{int(kind)}\x01"
            record = f"{head}{msg_id}\x01{tags}\x01{keys}{mid}{offset_id}\x01{_b(ok)}\x02"
            texts.append(record)
            size += len(record)
            index += keys_of
            key_size += (
                len(msg_id) + 1 if len(keys_of) == 1 else sum(map(len, keys_of)) + len(keys_of)
            )
            if key_size >= _ITEM_KEY_CHARS or size >= _ITEM_CHARS:
                out.append((topic, "".join(texts), len(texts), tuple(index)))
                texts, index, size, key_size = [], [], 0, 0
        if texts:
            out.append((topic, "".join(texts), len(texts), tuple(index)))
        return out

    def end_transaction(
        self,
        msg: Message,
        end: h.EndTransactionRequestHeader,
        state: str,
        store_host: str,
        region_id: str | None,
    ) -> None:
        """Record the decision ``end`` (END_TRANSACTION, sent to ``store_host``) for the half
        message ``msg``."""
        try:
            if not self.traced(msg.topic):
                return
            bean = TraceBean(
                topic=msg.topic,
                msg_id=end.msg_id or "",
                tags=_text(msg.tags),
                keys=_text(msg.properties.get(props.KEYS)),
                store_host=store_host,
                msg_type=TraceMessageType.Trans_msg_Commit,
                transaction_id=_text(end.transaction_id),
                transaction_state=state,
                from_transaction_check=bool(end.from_transaction_check),
            )
            ctx = TraceContext(
                TraceType.EndTransaction,
                timestamp_ms=self.now_ms(),
                region_id=region_id or DEFAULT_REGION_ID,
                group=self.group,
                beans=(bean,),
            )
            self.dispatcher.append(ctx)
        except Exception:
            logger.warning(
                "recording the EndTransaction trace of %s failed", end.msg_id, exc_info=True
            )


def batch_sources(messages: list[Message], batches: Sequence[PreparedSend]) -> list[list[Message]]:
    """The messages of each prepared batch request (``prepare_batches`` cuts in order)."""
    out, start = [], 0
    for prepared in batches:
        out.append(messages[start : start + prepared.count])
        start += prepared.count
    return out


def consume_outcome(
    status: Any, raised: bool, elapsed_ms: int, timeout_ms: int
) -> tuple[bool, ConsumeReturnType]:
    """``(success, ConsumeReturnType)`` of one listener call, as the consume services
    classify it: no status is EXCEPTION (it raised) or RETURNNULL; a call longer than the
    consume timeout is TIME_OUT; RECONSUME_LATER / SUSPEND are FAILED."""
    success = status in (
        ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
        ConsumeOrderlyStatus.SUCCESS,
        ConsumeOrderlyStatus.COMMIT,
    )
    if status is None:
        kind = ConsumeReturnType.EXCEPTION if raised else ConsumeReturnType.RETURNNULL
    elif elapsed_ms >= timeout_ms:
        kind = ConsumeReturnType.TIME_OUT
    elif success or status is ConsumeOrderlyStatus.ROLLBACK:
        kind = ConsumeReturnType.SUCCESS
    else:
        kind = ConsumeReturnType.FAILED
    return success, kind


#: What ``ConsumeTracer.before`` recorded, for its ``after``: the handle of the call's entry in
#: the tracer's entry buffer (an int: the hooks' usual call), or the open pair
#: (``_trace_dispatch.OpenTrace``) ``[tracer, (start ns, region, request number, topic,
#: ((msgId, retry times, KEYS or None) per traced message))]``.
TraceBefore = OpenTrace | int

#: Request ids: a per-process random prefix and a counter (32 hex digits like Java's).
_REQUEST_PREFIX = os.urandom(8).hex().upper()
_request_counter = new_counter(int.from_bytes(os.urandom(3), "big"))


def request_id(number: int) -> str:
    """The request id of a listener call's records (``_REQUEST_PREFIX`` + 16 hex digits)."""
    return f"{_REQUEST_PREFIX}{number:016X}"


class ConsumeTracer(_Tracer):
    """SubBefore and SubAfter records of one consumer group (callable from listener
    threads; see ``_Tracer``).

    The consume services call ``hook_before`` / ``hook_after``: a listener call of one message
    is one compact entry of the tracer's entry buffer (``entries``), whose records the
    dispatcher's worker writes in one call; the end of an entry the worker already took goes in
    a later round (``entry_late``). The coroutine service reads a pulled list's SubBefore
    values once, in one loop, when it queues the list (``hook_capture``: captured entries, not
    written before their delivery); a delivery then only stamps its start and ends its entry
    with it (``hook_end``, ``end_captured``), and a chunk never delivered is ``cancel``-ed. Otherwise (several messages, unusual values, another
    dispatcher) a listener call is one queue item holding both records: ``before`` queues an open pair
    with what it read from the messages (no encoding), ``after`` completes it, and the
    dispatcher's worker has ``encode_pairs`` write the records of every pair of its round in
    one loop. When the worker took a pair before its listener returned (a call longer than
    the linger), the SubBefore went alone and ``after`` ships the SubAfter itself. The
    values come from stored messages' properties, which were split on the record
    separators, so records are written without the separator check; ``encode_pairs`` writes
    exactly what ``sub_before_record`` and ``sub_after_record`` write.
    """

    __slots__ = ("entries", "hook_after", "hook_before", "hook_capture", "hook_end")

    def __init__(
        self, dispatcher: AsyncTraceDispatcher, group: str, clock: Clock | None = None
    ) -> None:
        super().__init__(dispatcher, group, clock)
        #: ``before(msgs)`` as the consume service calls it: one compiled call when built
        #: (``_trace_records.hook_before``: the call's entry added to ``entries``, the
        #: dispatcher's counting and wake-up included), for the dispatcher itself; ``before``
        #: for any other (a subclass may queue differently)
        self.hook_before: Callable[[Sequence[MessageExt]], TraceBefore | None] = self.before
        #: ``after(before, count, True, SUCCESS)``: the usual end, likewise
        self.hook_after: Callable[[TraceBefore, int], None] = self._after_usual
        #: ``chunks`` -> per chunk a captured entry's handle, None (not traced) or
        #: NotImplemented (``hook_before`` at the delivery) (``_trace_records.hook_capture``);
        #: None with any other dispatcher (nothing is captured)
        self.hook_capture: (
            Callable[[list[list[MessageExt]]], list[int | NotImplementedType | None]] | None
        ) = None
        #: ``(handle, count, began_ns)``: the usual end of a captured entry
        #: (``_trace_records.hook_end``)
        self.hook_end: Callable[[int, int, int], None] = self._end_usual
        #: the hooks' entries (one compact entry per listener call of one message, written
        #: by the dispatcher's worker: ``attach_entries``); None with any other dispatcher
        self.entries: EntryBuffer | None = None
        if type(dispatcher) is AsyncTraceDispatcher:
            entries = self.entries = new_entries()
            dispatcher.attach_entries(
                entries,
                functools.partial(
                    entries.take, group, _REQUEST_PREFIX, _ITEM_CHARS, _ITEM_KEY_CHARS
                ),
                functools.partial(
                    entries.pack, group, _REQUEST_PREFIX, _ITEM_CHARS, _ITEM_KEY_CHARS
                ),
            )
            self.hook_before = bind(
                hook_before,
                self,
                self.trace_topic,
                self.now_ns,
                _request_counter,
                DEFAULT_REGION_ID,
                dispatcher,
                dispatcher._queue,
                entries,
                vars(dispatcher),  # _room and _wake_at, read as dict items
                dispatcher.stats,
            )
            self.hook_after = bind(
                hook_after, self, self.now_ns, _SUCCESS, dispatcher.stats, entries
            )
            if hasattr(entries, "capture"):  # not a stale build's buffer (no captured entries)
                self.hook_capture = bind(
                    hook_capture,
                    self,
                    self.trace_topic,
                    _request_counter,
                    DEFAULT_REGION_ID,
                    entries,
                )
            self.hook_end = bind(
                hook_end,
                self,
                self.now_ns,
                dispatcher.stats,
                entries,
                dispatcher,
                dispatcher._queue,
                vars(dispatcher),
            )

    def _after_usual(self, before: TraceBefore, count: int) -> None:
        self.after(before, count, True, _SUCCESS)

    def _end_usual(self, handle: int, count: int, began_ns: int) -> None:
        self.end_captured(handle, began_ns, count, True, _SUCCESS)

    def end_captured(
        self, handle: int, began_ns: int, count: int, success: bool, outcome: ConsumeReturnType
    ) -> None:
        """Record the listener call of the captured entry ``handle``, started at ``began_ns``
        and ended now: both its records at once, as ``before`` and ``after`` would have
        recorded them (the room test, counted two, the worker woken as for an append)."""
        entries = self.entries
        if entries is None:
            return
        try:
            dispatcher = self.dispatcher
            if dispatcher._queued() >= dispatcher._room:  # full, or closed
                if entries.cancel(handle):
                    dispatcher._drop(None)
                else:
                    self.entry_late(-1)
                return
            if entries.end(handle, self.now_ns(), count, success, int(outcome), began_ns) != 2:
                self.entry_late(-1)  # unknown: the buffer was cleared (the dispatcher closed)
                return
            dispatcher.stats.appended += 2
            dispatcher.wake_if_due()
        except Exception:
            entries.cancel(handle)
            logger.warning("recording a SubAfter trace failed", exc_info=True)

    def cancel(self, handle: int) -> None:
        """Drop the captured entry ``handle``: its chunk is never delivered (a dropped queue,
        the service stopped); nothing is written or counted for it."""
        entries = self.entries
        if entries is None:
            return
        try:
            entries.cancel(handle)
        except Exception:
            logger.warning("dropping a captured trace entry failed", exc_info=True)

    def entry_late(self, answer: int) -> None:
        """The end of an entry the worker had taken (``answer`` 1: its SubBefore went, the
        SubAfter is pending: counted, the worker woken as for an append), or of an unknown
        entry (-1: dropped when the dispatcher closed, or ended twice: counted as discarded)."""
        dispatcher = self.dispatcher
        if answer > 0:
            dispatcher.stats.appended += 1
            dispatcher.wake_if_due()
        else:
            dispatcher.stats.discarded += 1

    def hook_failed(self, what: str, exc: BaseException) -> None:
        """Log a hook's failure (``what``: SubBefore or SubAfter): the record is dropped."""
        logger.warning("recording a %s trace failed", what, exc_info=exc)

    def before(self, msgs: Sequence[MessageExt]) -> TraceBefore | None:
        """Record that ``msgs`` go to the listener now; what to pass to ``after`` (``None``
        when nothing was recorded)."""
        try:
            # the usual case (consume_message_batch_max_size = 1), compiled when built
            pair = sub_before(
                self, msgs, self.trace_topic, self.now_ns, _request_counter, DEFAULT_REGION_ID
            )
            if pair is NotImplemented:
                return self._before_many(msgs)
            if pair is not None:
                self.dispatcher.append_open(pair)
            return pair
        except Exception:
            logger.warning("recording a SubBefore trace failed", exc_info=True)
            return None

    def _before_many(self, msgs: Sequence[MessageExt]) -> TraceBefore | None:
        trace_topic = self.trace_topic
        traced = [
            m
            for m in msgs
            if m.properties.get(TRACE_SWITCH) != "false" and not m.topic.startswith(trace_topic)
        ]
        if not traced:
            return None
        regions = [r for r in (m.properties.get(MSG_REGION) for m in traced) if r]
        entries = tuple(
            [
                (
                    m.properties.get(UNIQ_KEY) or m.offset_msg_id,
                    m.reconsume_times,
                    m.properties.get(KEYS),
                )
                for m in traced
            ]
        )
        region = regions[-1] if regions else DEFAULT_REGION_ID
        data = (self.now_ns(), region, next(_request_counter), msgs[0].topic, entries)
        pair = [self, data]
        self.dispatcher.append_open(pair)
        return pair

    def after(
        self, before: TraceBefore, count: int, success: bool, outcome: ConsumeReturnType
    ) -> None:
        """Record the end of the listener call ``before`` started (``count`` messages)."""
        try:
            if before.__class__ is int:  # an entry of the hooks' buffer
                assert self.entries is not None
                answer = self.entries.end(
                    before,
                    self.now_ns(),
                    count,
                    success,
                    int(outcome),
                )
                if answer == 0:
                    self.dispatcher.stats.appended += 1
                else:
                    self.entry_late(answer)
                return
            # the usual end as its time alone (``AfterData``), appended to the pair (the
            # dispatcher's ``attach``, inlined), compiled when built: one call per delivery
            done: AfterData | None = sub_after(
                before,  # type: ignore[arg-type]
                count,
                success,
                outcome,
                self.now_ns,
                _SUCCESS,
            )
            if done is None:
                self.dispatcher.stats.appended += 1
            else:  # the worker took the pair first, or it was dropped
                self.after_late(before, done)
        except Exception:
            logger.warning("recording a SubAfter trace failed", exc_info=True)

    def after_late(self, before: TraceBefore, done: AfterData) -> None:
        """Ship the SubAfter of a call whose pair the worker took first (or was dropped)."""
        (item,) = self._encode([(call_data(before[1]), done)], sub_before=False)  # type: ignore[index]
        self.dispatcher.append_encoded(item)

    def encode_pairs(self, pairs: list[OpenTrace]) -> list[EncodedTrace]:
        """The worker's side: claim ``pairs`` and write their records (``PairEncoder``)."""
        return sub_pairs(pairs, self.group, _REQUEST_PREFIX, TAKEN, _ITEM_CHARS, _ITEM_KEY_CHARS)

    def _encode(self, calls: list[Call], *, sub_before: bool = True) -> list[EncodedTrace]:
        """The records of listener calls (``_trace_records.sub_records``), cut into items of
        about a quarter of a trace message, with their index keys."""
        return sub_records(
            calls, self.group, _REQUEST_PREFIX, sub_before, _ITEM_CHARS, _ITEM_KEY_CHARS
        )
