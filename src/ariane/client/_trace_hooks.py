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
  answered ``TRACE_ON=false``: one Pub record (a batch request gives one record whose msgId is
  the comma-joined ids, as upstream), cost = the send's duration, success = ``SEND_OK``,
  storeTime estimated as start + cost / 2. One-way sends have no answer and no record.
* ``SendTracer.end_transaction``: after END_TRANSACTION went out, from the local transaction
  or from a check-back.
* ``ConsumeTracer.before`` / ``after``: around one listener call: one SubBefore per message
  (skipping messages the storing broker marked ``TRACE_ON=false``) sharing a request id, then
  one SubAfter per message with the listener's time divided by the number of messages and
  its ``ConsumeReturnType``.

Absent tags and keys are written as Java writes them (``null``); topics that start with the
trace topic are never traced (the trace producer's own messages).
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ariane.client._send import PreparedSend
from ariane.client._trace_dispatch import AsyncTraceDispatcher
from ariane.client.consumer_types import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from ariane.client.message import SendResult, SendStatus
from ariane.common import properties as props
from ariane.common.clock import Clock, SystemClock
from ariane.common.message import Message, MessageExt
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from ariane.common.trace import (
    DEFAULT_REGION_ID,
    JAVA_NULL,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceMessageType,
    TraceType,
    index_keys,
    message_type_of,
    pub_record,
    sub_after_record,
    sub_before_record,
)
from ariane.remoting.protocol import headers as h

__all__ = ["ConsumeTracer", "SendTracer", "TraceBefore", "batch_sources", "consume_outcome"]

logger = logging.getLogger(__name__)


def _text(value: str | None) -> str:
    return value if value else JAVA_NULL


class _Tracer:
    """What both tracers hold.

    Args:
        dispatcher: where records go.
        group: the producer or consumer group.
        clock: wall-clock source.
    """

    __slots__ = ("clock", "dispatcher", "group", "now_ms", "trace_topic")

    def __init__(
        self, dispatcher: AsyncTraceDispatcher, group: str, clock: Clock | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.clock = clock or SystemClock()
        #: the clock's wall time in milliseconds
        self.now_ms = self.clock.now_ms
        self.trace_topic = dispatcher.trace_topic


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
            data = pub_record(
                begin_ms,
                result.region_id or DEFAULT_REGION_ID,
                self.group,
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
                check=False,
            )
            self.dispatcher.append_encoded((topic, data, 1, index))
        except Exception:
            logger.warning("recording the Pub trace of %s failed", result.msg_id, exc_info=True)

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


#: What ``ConsumeTracer.before`` recorded, for its ``after``: (request id, start ms,
#: traced topic, (msgId, keys text) per traced message, index keys).
TraceBefore = tuple[str, int, str, tuple[tuple[str, str], ...], tuple[str, ...]]

#: Request ids: a per-process random prefix and a counter (32 hex digits like Java's).
_REQUEST_PREFIX = os.urandom(8).hex().upper()
_request_counter = itertools.count(int.from_bytes(os.urandom(3), "big"))


class ConsumeTracer(_Tracer):
    """SubBefore and SubAfter records of one consumer group (callable from listener
    threads; see ``_Tracer``). The values recorded come from stored messages' properties,
    which were split on the record separators, so records are written without the
    separator check.
    """

    __slots__ = ()

    def before(self, msgs: Sequence[MessageExt]) -> TraceBefore | None:
        """Record that ``msgs`` go to the listener now; what to pass to ``after`` (``None``
        when nothing was recorded)."""
        try:
            if len(msgs) == 1:  # the usual case (consume_message_batch_max_size = 1)
                return self._before_one(msgs[0])
            trace_topic = self.trace_topic
            traced: list[tuple[str, str]] = []
            retries: list[int] = []
            keys: list[str] = []
            region = ""
            for msg in msgs:
                p = msg.properties
                if p.get(TRACE_SWITCH) == "false" or msg.topic.startswith(trace_topic):
                    continue
                region = p.get(MSG_REGION) or region
                msg_id = p.get(UNIQ_KEY) or msg.offset_msg_id
                text = p.get(KEYS)
                traced.append((msg_id, text or JAVA_NULL))
                retries.append(msg.reconsume_times)
                keys.append(msg_id)
                if text:
                    keys.append(text)
            if not traced:
                return None
            now = self.now_ms()
            request_id = f"{_REQUEST_PREFIX}{next(_request_counter):016X}"
            region = region or DEFAULT_REGION_ID
            group = self.group
            data = "".join(
                [
                    sub_before_record(now, region, group, request_id, i, n, k, check=False)
                    for (i, k), n in zip(traced, retries, strict=True)
                ]
            )
            index = tuple(keys)
            topic = msgs[0].topic
            self.dispatcher.append_encoded((topic, data, len(traced), index))
            return request_id, now, topic, tuple(traced), index
        except Exception:
            logger.warning("recording a SubBefore trace failed", exc_info=True)
            return None

    def _before_one(self, msg: MessageExt) -> TraceBefore | None:
        p = msg.properties
        topic = msg.topic
        if p.get(TRACE_SWITCH) == "false" or topic.startswith(self.trace_topic):
            return None
        msg_id = p.get(UNIQ_KEY) or msg.offset_msg_id
        text = p.get(KEYS)
        keys = text or JAVA_NULL
        now = self.now_ms()
        request_id = f"{_REQUEST_PREFIX}{next(_request_counter):016X}"
        region = p.get(MSG_REGION) or DEFAULT_REGION_ID
        data = sub_before_record(
            now, region, self.group, request_id, msg_id, msg.reconsume_times, keys, check=False
        )
        index = (msg_id, text) if text else (msg_id,)
        self.dispatcher.append_encoded((topic, data, 1, index))
        return request_id, now, topic, ((msg_id, keys),), index

    def after(
        self, before: TraceBefore, count: int, success: bool, outcome: ConsumeReturnType
    ) -> None:
        """Record the end of the listener call ``before`` started (``count`` messages)."""
        try:
            request_id, began, topic, traced, index = before
            now = self.now_ms()
            cost = (now - began) // (count if count > 0 else 1)
            cost = cost if cost > 0 else 0
            code, group = int(outcome), self.group
            if len(traced) == 1:
                ((msg_id, keys),) = traced
                data = sub_after_record(
                    request_id, msg_id, cost, success, keys, code, now, group, check=False
                )
            else:
                data = "".join(
                    [
                        sub_after_record(
                            request_id, i, cost, success, k, code, now, group, check=False
                        )
                        for i, k in traced
                    ]
                )
            self.dispatcher.append_encoded((topic, data, len(traced), index))
        except Exception:
            logger.warning("recording a SubAfter trace failed", exc_info=True)
