"""Capture points of message trace (RocketMQ ``SendMessageTraceHookImpl``,
``ConsumeMessageTraceHookImpl``, ``EndTransactionTraceHookImpl``).

How it works: a producer or consumer built with ``enable_trace=True`` holds a tracer; the
send and consume paths call it only when it exists (``if tracer is not None``), so tracing
off costs one attribute test. The tracer turns what happened into ``TraceContext`` values and
hands them to its ``AsyncTraceDispatcher`` (``append`` never blocks). Nothing here raises
into the business path: a failure to build a context is logged and the record dropped.

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

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ariane.client._send import PreparedSend
from ariane.client._trace_dispatch import AsyncTraceDispatcher
from ariane.client.consumer_types import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from ariane.client.message import SendResult, SendStatus
from ariane.common import properties as props
from ariane.common.clock import Clock, SystemClock
from ariane.common.message import Message, MessageExt
from ariane.common.msgid import UniqueIdGenerator
from ariane.common.trace import (
    DEFAULT_REGION_ID,
    JAVA_NULL,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceMessageType,
    TraceType,
    message_type_of,
)

__all__ = ["ConsumeTracer", "SendTracer", "batch_sources", "consume_outcome"]

logger = logging.getLogger(__name__)

_request_ids = UniqueIdGenerator()


def _text(value: str | None) -> str:
    return value if value else JAVA_NULL


class SendTracer:
    """Pub and EndTransaction records of one producer group.

    Args:
        dispatcher: where records go.
        group: the producer group.
        clock: wall-clock source.
    """

    __slots__ = ("clock", "dispatcher", "group")

    def __init__(
        self, dispatcher: AsyncTraceDispatcher, group: str, clock: Clock | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.clock = clock or SystemClock()

    def now_ms(self) -> int:
        """The clock's wall time in milliseconds."""
        return self.clock.now_ms()

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
        return not topic.startswith(self.dispatcher.trace_topic)

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
            if not result.trace_on or not self.traced(result.message_queue.topic):
                return
            cost = max(self.now_ms() - begin_ms, 0)
            if isinstance(source, Message):
                tags, keys = source.tags, source.properties.get(props.KEYS)
                msg_type = message_type_of(source.properties)
            else:
                tags, msg_type = None, TraceMessageType.Normal_Msg
                keys = " ".join(dict.fromkeys(k for m in source for k in m.keys)) or None
            bean = TraceBean(
                topic=result.message_queue.topic,
                msg_id=result.msg_id,
                offset_msg_id=result.offset_msg_id,
                tags=_text(tags),
                keys=_text(keys),
                store_host=store_host,
                store_time_ms=begin_ms + cost // 2,
                body_length=body_length,
                msg_type=msg_type,
            )
            ctx = TraceContext(
                TraceType.Pub,
                timestamp_ms=begin_ms,
                region_id=result.region_id or DEFAULT_REGION_ID,
                group=self.group,
                cost_ms=cost,
                success=result.status is SendStatus.SEND_OK,
                beans=(bean,),
            )
            self.dispatcher.append(ctx)
        except Exception:
            logger.warning("recording the Pub trace of %s failed", result.msg_id, exc_info=True)

    def end_transaction(
        self,
        msg: Message,
        *,
        msg_id: str,
        transaction_id: str | None,
        state: str,
        from_check: bool,
        store_host: str,
        region_id: str | None,
    ) -> None:
        """Record the decision sent to the broker for a half message."""
        try:
            if not self.traced(msg.topic):
                return
            bean = TraceBean(
                topic=msg.topic,
                msg_id=msg_id,
                tags=_text(msg.tags),
                keys=_text(msg.properties.get(props.KEYS)),
                store_host=store_host,
                msg_type=TraceMessageType.Trans_msg_Commit,
                transaction_id=_text(transaction_id),
                transaction_state=state,
                from_transaction_check=from_check,
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
            logger.warning("recording the EndTransaction trace of %s failed", msg_id, exc_info=True)


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


class ConsumeTracer:
    """SubBefore and SubAfter records of one consumer group (callable from listener
    threads).

    Args:
        dispatcher: where records go.
        group: the consumer group.
        clock: wall-clock source.
    """

    __slots__ = ("clock", "dispatcher", "group")

    def __init__(
        self, dispatcher: AsyncTraceDispatcher, group: str, clock: Clock | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.clock = clock or SystemClock()

    def before(self, msgs: Sequence[MessageExt]) -> TraceContext | None:
        """Record that ``msgs`` go to the listener now; the context to pass to ``after``
        (``None`` when nothing was recorded)."""
        try:
            trace_topic = self.dispatcher.trace_topic
            beans = []
            region = ""
            for msg in msgs:
                p = msg.properties
                if p.get(props.TRACE_SWITCH) == "false" or msg.topic.startswith(trace_topic):
                    continue
                region = p.get(props.MSG_REGION) or region
                beans.append(
                    TraceBean(
                        topic=msg.topic,
                        msg_id=msg.msg_id,
                        tags=_text(p.get(props.TAGS)),
                        keys=_text(p.get(props.KEYS)),
                        store_time_ms=msg.store_timestamp_ms,
                        body_length=msg.store_size,
                        retry_times=msg.reconsume_times,
                    )
                )
            if not beans:
                return None
            ctx = TraceContext(
                TraceType.SubBefore,
                timestamp_ms=self.clock.now_ms(),
                region_id=region or DEFAULT_REGION_ID,
                group=self.group,
                request_id=_request_ids.next_id(),
                beans=tuple(beans),
            )
            self.dispatcher.append(ctx)
            return ctx
        except Exception:
            logger.warning("recording a SubBefore trace failed", exc_info=True)
            return None

    def after(
        self, before: TraceContext, count: int, success: bool, outcome: ConsumeReturnType
    ) -> None:
        """Record the end of the listener call ``before`` started (``count`` messages)."""
        try:
            now = self.clock.now_ms()
            ctx = TraceContext(
                TraceType.SubAfter,
                timestamp_ms=now,
                region_id=before.region_id,
                group=self.group,
                cost_ms=max(now - before.timestamp_ms, 0) // max(count, 1),
                success=success,
                request_id=before.request_id,
                context_code=int(outcome),
                beans=before.beans,
            )
            self.dispatcher.append(ctx)
        except Exception:
            logger.warning("recording a SubAfter trace failed", exc_info=True)
