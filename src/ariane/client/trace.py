"""A message's trace as a timeline (RocketMQ ``TraceView``, ``QueryMsgTraceByIdSubCommand``):
the typed result of ``Admin.query_message_trace``, for the CLI, dashboards and scripts.

How it works: the trace records of a message live in trace-topic messages indexed by the
message's id (see ``ariane.common.trace``). ``build_message_trace`` takes those trace messages
(found by a QUERY_MESSAGE on the trace topic), decodes every record, keeps the ones about the
message (a batch's Pub record names all its ids) and turns each into a flat ``TraceEntry``:
who (group, client host: the address the trace message came from), where (store host), when,
how long, the outcome and the delivery attempt. Records that do not decode are kept as
``UndecodableTrace`` values naming the trace message, never an exception. SubBefore/SubAfter
records do not carry the topic; entries take it from the message's Pub record, and a
SubAfter takes the retry count of its SubBefore (same request id).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ariane.client._trace_dispatch import TraceSettings, TraceStats
from ariane.common.message import MessageExt
from ariane.common.trace import (
    ConsumeReturnType,
    TraceContext,
    TraceType,
    UndecodableTrace,
    decode_trace_body,
)

__all__ = [
    "MessageTrace",
    "TraceEntry",
    "TraceSettings",
    "TraceStats",
    "UndecodableTraceMessage",
    "build_message_trace",
    "trace_entries",
]

_ORDER = {
    TraceType.Pub: 0,
    TraceType.EndTransaction: 1,
    TraceType.SubBefore: 2,
    TraceType.SubAfter: 3,
    TraceType.Recall: 4,
}


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One trace record about the message.

    Attributes:
        trace_type: ``Pub``, ``SubBefore``, ``SubAfter``, ``EndTransaction`` or ``Recall``.
        timestamp_ms: when it happened (0: the record does not say, SubAfter before 4.9).
        group: producer or consumer group.
        client_host: the client that wrote the record (its trace message's born host).
        store_host: the broker that stored the message (Pub, EndTransaction), else ``""``.
        cost_ms: the send's time (Pub) or the listener's time per message (SubAfter).
        success: the outcome (Pub, SubAfter, Recall), ``None`` where there is none.
        retry_times: the delivery's reconsume count (SubBefore, SubAfter), else ``None``.
        msg_id: the message id the record names (a batch's joined ids for its Pub).
        topic: the message's topic (taken from the Pub record for consume records).
        tags, keys: as recorded (Java writes ``null`` for none).
        region_id: the broker's region.
        request_id: pairs SubBefore with SubAfter.
        offset_msg_id: the broker's id of the message (Pub).
        body_length: body length (Pub).
        msg_type: ``Normal_Msg``, ``Trans_Msg_Half``, ``Trans_msg_Commit``, ``Delay_Msg``.
        consume_result: SubAfter's ``ConsumeReturnType`` name (``SUCCESS``, ``TIME_OUT``,
            ``EXCEPTION``, ``RETURNNULL``, ``FAILED``).
        transaction_id, transaction_state, from_transaction_check: EndTransaction.
        trace_msg_id: the offsetMsgId of the trace message that held the record.
    """

    trace_type: TraceType
    timestamp_ms: int
    group: str
    client_host: str
    store_host: str = ""
    cost_ms: int | None = None
    success: bool | None = None
    retry_times: int | None = None
    msg_id: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    region_id: str = ""
    request_id: str = ""
    offset_msg_id: str = ""
    body_length: int | None = None
    msg_type: str = ""
    consume_result: str = ""
    transaction_id: str = ""
    transaction_state: str = ""
    from_transaction_check: bool | None = None
    trace_msg_id: str = ""

    @property
    def status(self) -> str:
        """``success``, ``failed`` or ``""`` (records without an outcome)."""
        if self.success is None:
            return ""
        return "success" if self.success else "failed"

    def to_dict(self) -> dict[str, Any]:
        """Stable camelCase keys for JSON."""
        d = asdict(self)
        out = {_camel(k): v for k, v in d.items()}
        out["traceType"] = self.trace_type.value
        out["status"] = self.status
        return out


@dataclass(frozen=True, slots=True)
class UndecodableTraceMessage:
    """A trace record (or a whole trace message body) that does not decode.

    Attributes:
        trace_msg_id: the offsetMsgId of the trace message.
        client_host: where the trace message came from.
        store_timestamp_ms: when the broker stored it.
        error: what is wrong.
        text: the start of the offending text.
        index: the record's position in the body (-1: the whole body).
    """

    trace_msg_id: str
    client_host: str
    store_timestamp_ms: int
    error: str
    text: str
    index: int

    def to_dict(self) -> dict[str, Any]:
        """Stable camelCase keys for JSON."""
        return {_camel(k): v for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class MessageTrace:
    """A message's trace: its records in time order, and what did not decode.

    Attributes:
        msg_id: the message id asked for.
        trace_topic: the trace topic searched.
        entries: the records, ordered by time (Pub, then consume attempts).
        undecodable: trace records about which nothing can be said.
    """

    msg_id: str
    trace_topic: str
    entries: list[TraceEntry] = field(default_factory=list)
    undecodable: list[UndecodableTraceMessage] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """Whether any record (or undecodable text) was found."""
        return bool(self.entries or self.undecodable)

    def of_type(self, trace_type: TraceType) -> list[TraceEntry]:
        """The entries of one type, in time order."""
        return [e for e in self.entries if e.trace_type is trace_type]

    def to_dict(self) -> dict[str, Any]:
        """Stable camelCase keys for JSON."""
        return {
            "msgId": self.msg_id,
            "traceTopic": self.trace_topic,
            "entries": [e.to_dict() for e in self.entries],
            "undecodable": [u.to_dict() for u in self.undecodable],
        }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _host_only(msg: MessageExt) -> str:
    text = str(msg.born_host)
    host = text.rpartition(":")[0]
    return host.strip("[]") or text


def _entry(ctx: TraceContext, client: str, trace_msg_id: str) -> TraceEntry:
    t, b = ctx.trace_type, ctx.bean
    has_cost = t in (TraceType.Pub, TraceType.SubAfter)
    has_outcome = t in (TraceType.Pub, TraceType.SubAfter, TraceType.Recall)
    stores = t in (TraceType.Pub, TraceType.EndTransaction)
    code = ""
    if t is TraceType.SubAfter:
        try:
            code = ConsumeReturnType(ctx.context_code).name
        except ValueError:
            code = str(ctx.context_code)
    return TraceEntry(
        trace_type=t,
        timestamp_ms=ctx.timestamp_ms,
        group=ctx.group,
        client_host=b.client_host or client,
        store_host=b.store_host if stores else "",
        cost_ms=ctx.cost_ms if has_cost else None,
        success=ctx.success if has_outcome else None,
        retry_times=b.retry_times if t is TraceType.SubBefore else None,
        msg_id=b.msg_id,
        topic=b.topic,
        tags=b.tags,
        keys=b.keys,
        region_id=ctx.region_id,
        request_id=ctx.request_id,
        offset_msg_id=b.offset_msg_id,
        body_length=b.body_length if t is TraceType.Pub else None,
        msg_type=b.msg_type.name if stores else "",
        consume_result=code,
        transaction_id=b.transaction_id if t is TraceType.EndTransaction else "",
        transaction_state=b.transaction_state if t is TraceType.EndTransaction else "",
        from_transaction_check=(
            b.from_transaction_check if t is TraceType.EndTransaction else None
        ),
        trace_msg_id=trace_msg_id,
    )


def _complete(entries: list[TraceEntry]) -> list[TraceEntry]:
    """Fill what consume records lack (topic, SubAfter's retry count and time) and order."""
    topic = next((e.topic for e in entries if e.topic), "")
    befores = {(e.request_id, e.msg_id): e for e in entries if e.trace_type is TraceType.SubBefore}
    out = []
    for e in entries:
        changes: dict[str, Any] = {}
        if not e.topic and topic:
            changes["topic"] = topic
        if e.trace_type is TraceType.SubAfter:
            before = befores.get((e.request_id, e.msg_id))
            if before is not None:
                changes["retry_times"] = before.retry_times
                if not e.timestamp_ms:
                    changes["timestamp_ms"] = before.timestamp_ms + (e.cost_ms or 0)
        out.append(dataclasses.replace(e, **changes) if changes else e)
    out.sort(key=lambda e: (e.timestamp_ms, _ORDER[e.trace_type]))
    return out


def trace_entries(msg: MessageExt) -> list[TraceEntry | UndecodableTraceMessage]:
    """Every record of one trace-topic message, as entries (consume records without their
    topic: it is not part of them) or, where a record does not decode, as
    ``UndecodableTraceMessage``. Never raises."""
    trace_id = msg.offset_msg_id
    client = _host_only(msg)
    out: list[TraceEntry | UndecodableTraceMessage] = []
    for item in decode_trace_body(bytes(msg.body)):
        if isinstance(item, UndecodableTrace):
            out.append(
                UndecodableTraceMessage(
                    trace_id, client, msg.store_timestamp_ms, item.error, item.text, item.index
                )
            )
        else:
            out.append(_entry(item, client, trace_id))
    return out


def build_message_trace(
    msg_id: str, trace_topic: str, trace_messages: Iterable[MessageExt]
) -> MessageTrace:
    """The trace of ``msg_id`` from the trace-topic messages indexed under it. Never raises
    on bad bodies: they become ``undecodable`` entries."""
    entries: list[TraceEntry] = []
    bad: list[UndecodableTraceMessage] = []
    seen: set[str] = set()
    for msg in sorted(trace_messages, key=lambda m: m.store_timestamp_ms):
        if msg.offset_msg_id in seen:
            continue
        seen.add(msg.offset_msg_id)
        for item in trace_entries(msg):
            if isinstance(item, UndecodableTraceMessage):
                bad.append(item)
            elif msg_id in item.msg_id.split(","):
                entries.append(item)
    return MessageTrace(msg_id, trace_topic, _complete(entries), bad)
