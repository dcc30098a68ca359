"""Message trace records and their text encoding (RocketMQ ``TraceContext``, ``TraceBean``,
``TraceDataEncoder``, ``TraceConstants``), pure: no I/O, no clock.

How it works: a trace is a log of one message's life (book chapter 8). Clients build a
``TraceContext`` at each capture point (``Pub`` after a send, ``SubBefore``/``SubAfter``
around a consumer's listener, ``EndTransaction`` after a transaction decision) holding one
``TraceBean`` per message, and ship them as the body of ordinary messages of the trace topic
(``RMQ_SYS_TRACE_TOPIC``). The body is plain text: fields joined by ``CONTENT_SEPARATOR``
(U+0001), every record terminated by ``FIELD_SEPARATOR`` (U+0002), one record per bean::

    Pub            Pub ts region group topic msgId tags keys storeHost bodyLength cost
                   msgType(ordinal) offsetMsgId success                       14 fields
    SubBefore      SubBefore ts region group requestId msgId retryTimes keys   8 fields
    SubAfter       SubAfter requestId msgId cost success keys contextCode ts group   9
    EndTransaction EndTransaction ts region group topic msgId tags keys storeHost
                   msgType(ordinal) transactionId transactionState fromCheck   13 fields
    Recall         Recall ts region group topic msgId success                   7 fields

``encode_context`` writes exactly what Java's 4.9/5.x encoder writes (booleans ``true`` /
``false``, Java's ``null`` text for absent tags and keys is the caller's choice); the keys of
the trace message (``TraceTransfer.keys``) are every bean's msgId plus its business keys, so
the broker's index finds a trace by either. ``decode_trace_data`` reads every published
layout: it splits like Java's ``String.split`` (trailing empty fields dropped) and accepts
Pub with 13 (no offsetMsgId), 14 or 15 (clientHost) fields, SubBefore with 7 or 8, SubAfter
with 5 to 9 (4.7 has no timestamp/group). Anything else raises ``TraceDecodeError`` naming the
record; ``decode_trace_body`` keeps going record by record and returns the failures as
``UndecodableTrace`` values, so readers never stop on a bad body.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ariane.common import properties as props
from ariane.errors import InvalidArgumentError, TraceDecodeError

__all__ = [
    "CONTENT_SEPARATOR",
    "DEFAULT_REGION_ID",
    "DEFAULT_TRACE_TOPIC",
    "FIELD_SEPARATOR",
    "JAVA_NULL",
    "MAX_TRACE_KEY_CHARS",
    "MAX_TRACE_MESSAGE_CHARS",
    "TRACE_INSTANCE_NAME",
    "TRACE_PRODUCER_GROUP_PREFIX",
    "TRANSACTION_STATES",
    "ConsumeReturnType",
    "TraceBean",
    "TraceContext",
    "TraceMessageType",
    "TraceTransfer",
    "TraceType",
    "UndecodableTrace",
    "decode_trace_body",
    "decode_trace_data",
    "encode_context",
    "end_transaction_record",
    "index_keys",
    "message_type_of",
    "pub_record",
    "sub_after_record",
    "sub_before_record",
    "trace_keys",
]

#: ``TraceConstants.CONTENT_SPLITOR``: between the fields of one record.
CONTENT_SEPARATOR = "\x01"
#: ``TraceConstants.FIELD_SPLITOR``: after every record, the last one included.
FIELD_SEPARATOR = "\x02"
#: ``TopicValidator.RMQ_SYS_TRACE_TOPIC``: the default trace topic.
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: ``MixAll.DEFAULT_TRACE_REGION_ID``.
DEFAULT_REGION_ID = "DefaultRegion"
#: ``TraceConstants.GROUP_NAME_PREFIX``: trace producers' groups start with it.
TRACE_PRODUCER_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
#: ``TraceConstants.TRACE_INSTANCE_NAME``: the trace producers' client instance.
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
#: What Java's ``StringBuilder.append(null)`` writes for an absent tag or key.
JAVA_NULL = "null"
#: A trace message body is cut once it reaches this many characters (4.x's
#: ``maxMsgSize - 10 * 1000``; 5.x flushes at its 128000-byte limit).
MAX_TRACE_MESSAGE_CHARS = 118_000
#: Longest ``KEYS`` text of one trace message (space-joined keys): well inside the 32767
#: bytes a record's properties may take.
MAX_TRACE_KEY_CHARS = 16_000
#: ``LocalTransactionState`` names as EndTransaction records spell them.
TRANSACTION_STATES = frozenset({"COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"})

_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_RAW_TEXT_CHARS = 200


class TraceType(enum.Enum):
    """``TraceType``: where a record was captured."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"
    Recall = "Recall"


class TraceMessageType(enum.IntEnum):
    """``MessageType``, written as its ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3
    Order_Msg = 4


class ConsumeReturnType(enum.IntEnum):
    """``ConsumeReturnType``: how a listener call ended (SubAfter's ``contextCode``)."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(frozen=True, slots=True)
class TraceBean:
    """One message in a trace context (``TraceBean``).

    Attributes:
        topic: the message's topic (Pub, EndTransaction, Recall).
        msg_id: the client's unique id (``UNIQ_KEY``); a batch's ids comma-joined.
        offset_msg_id: the broker's id (Pub).
        tags: the tag (Java writes ``null`` when there is none).
        keys: the business keys, space-separated (``null`` when none).
        store_host: Pub/EndTransaction: the broker's address.
        client_host: the client's address (Pub's optional 15th field).
        store_time_ms: estimated store time (not encoded).
        retry_times: the delivery's reconsume count (SubBefore).
        body_length: the body's length (Pub).
        msg_type: normal, half, commit, delay or order (Pub, EndTransaction).
        transaction_id: the broker's transaction id (EndTransaction).
        transaction_state: ``COMMIT_MESSAGE``, ``ROLLBACK_MESSAGE`` or ``UNKNOW``.
        from_transaction_check: the decision answered a broker's check-back.
    """

    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    client_host: str = ""
    store_time_ms: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: TraceMessageType = TraceMessageType.Normal_Msg
    transaction_id: str = ""
    transaction_state: str = "UNKNOW"
    from_transaction_check: bool = False


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One capture (``TraceContext``): what happened, when, to which messages.

    Attributes:
        trace_type: the capture point.
        timestamp_ms: when (Pub: the send started; SubBefore: the listener was called;
            SubAfter: it returned); 0 when a record does not say (SubAfter before 4.9).
        region_id: the broker's region (``MSG_REGION``).
        group: producer or consumer group.
        cost_ms: Pub: the send's duration; SubAfter: listener time per message.
        success: the send was ``SEND_OK`` / the listener returned success.
        request_id: pairs a SubBefore with its SubAfter.
        context_code: SubAfter: a ``ConsumeReturnType`` ordinal.
        beans: the messages; Pub/EndTransaction/Recall encode only the first.
    """

    trace_type: TraceType
    timestamp_ms: int = 0
    region_id: str = ""
    group: str = ""
    cost_ms: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: tuple[TraceBean, ...] = ()

    @property
    def bean(self) -> TraceBean:
        """The first bean (decoded contexts hold exactly one).

        Raises:
            InvalidArgumentError: the context has no bean.
        """
        if not self.beans:
            raise InvalidArgumentError(f"{self.trace_type.value} trace context has no bean")
        return self.beans[0]


@dataclass(frozen=True, slots=True)
class TraceTransfer:
    """An encoded context (``TraceTransferBean``): its records and the index keys."""

    data: str
    keys: frozenset[str]


@dataclass(frozen=True, slots=True)
class UndecodableTrace:
    """A record (or a whole body) that does not decode, kept for reporting.

    Attributes:
        error: what is wrong, in one line.
        text: the start of the offending text (separators shown as ``\\x01``/``\\x02``).
        index: the record's position in the body.
    """

    error: str
    text: str
    index: int


# -- encoding --------------------------------------------------------------------------------


def _b(value: bool) -> str:
    return "true" if value else "false"


def _checked(record: str, fields: int) -> str:
    """``record`` if it has exactly ``fields`` fields and one terminator (a value holding a
    separator character would shift every field after it)."""
    if (
        record.count(CONTENT_SEPARATOR) != fields - 1
        or record.find(FIELD_SEPARATOR) != len(record) - 1
    ):
        raise InvalidArgumentError(f"a trace field contains a separator character: {record!r}")
    return record


def pub_record(
    timestamp_ms: int,
    region_id: str,
    group: str,
    topic: str,
    msg_id: str,
    tags: str,
    keys: str,
    store_host: str,
    body_length: int,
    cost_ms: int,
    msg_type: int,
    offset_msg_id: str,
    success: bool,
    *,
    check: bool = True,
) -> str:
    """One Pub record (14 fields); ``check=False`` skips the separator check (for values
    that travel in a message's encoded properties, where a separator is corruption anyway).

    Raises:
        InvalidArgumentError: a value contains a separator character.
    """
    text = (
        f"Pub\x01{timestamp_ms}\x01{region_id}\x01{group}\x01{topic}\x01{msg_id}\x01{tags}"
        f"\x01{keys}\x01{store_host}\x01{body_length}\x01{cost_ms}\x01{int(msg_type)}"
        f"\x01{offset_msg_id}\x01{_b(success)}\x02"
    )
    return _checked(text, 14) if check else text


def sub_before_record(
    timestamp_ms: int,
    region_id: str,
    group: str,
    request_id: str,
    msg_id: str,
    retry_times: int,
    keys: str,
    *,
    check: bool = True,
) -> str:
    """One SubBefore record (8 fields). ``check=False`` skips the separator check, for
    values that were themselves split on the separators (a stored message's properties).

    Raises:
        InvalidArgumentError: a value contains a separator character.
    """
    text = (
        f"SubBefore\x01{timestamp_ms}\x01{region_id}\x01{group}\x01{request_id}\x01{msg_id}"
        f"\x01{retry_times}\x01{keys}\x02"
    )
    return _checked(text, 8) if check else text


def sub_after_record(
    request_id: str,
    msg_id: str,
    cost_ms: int,
    success: bool,
    keys: str,
    context_code: int,
    timestamp_ms: int,
    group: str,
    *,
    check: bool = True,
) -> str:
    """One SubAfter record (9 fields, the 4.9/5.x layout); ``check`` as for
    ``sub_before_record``.

    Raises:
        InvalidArgumentError: a value contains a separator character.
    """
    text = (
        f"SubAfter\x01{request_id}\x01{msg_id}\x01{cost_ms}\x01{_b(success)}\x01{keys}"
        f"\x01{int(context_code)}\x01{timestamp_ms}\x01{group}\x02"
    )
    return _checked(text, 9) if check else text


def end_transaction_record(
    timestamp_ms: int,
    region_id: str,
    group: str,
    bean: TraceBean,
) -> str:
    """One EndTransaction record (13 fields).

    Raises:
        InvalidArgumentError: a separator character, or an unknown transaction state.
    """
    b = bean
    if b.transaction_state not in TRANSACTION_STATES:
        raise InvalidArgumentError(f"unknown transaction state {b.transaction_state!r}")
    return _checked(
        f"EndTransaction\x01{timestamp_ms}\x01{region_id}\x01{group}\x01{b.topic}\x01{b.msg_id}"
        f"\x01{b.tags}\x01{b.keys}\x01{b.store_host}\x01{int(b.msg_type)}\x01{b.transaction_id}"
        f"\x01{b.transaction_state}\x01{_b(b.from_transaction_check)}\x02",
        13,
    )


def _encode_records(ctx: TraceContext) -> str:
    t = ctx.trace_type
    if t is TraceType.SubBefore:
        return "".join(
            sub_before_record(
                ctx.timestamp_ms,
                ctx.region_id,
                ctx.group,
                ctx.request_id,
                b.msg_id,
                b.retry_times,
                b.keys,
            )
            for b in ctx.beans
        )
    if t is TraceType.SubAfter:
        return "".join(
            sub_after_record(
                ctx.request_id,
                b.msg_id,
                ctx.cost_ms,
                ctx.success,
                b.keys,
                ctx.context_code,
                ctx.timestamp_ms,
                ctx.group,
            )
            for b in ctx.beans
        )
    b = ctx.bean
    if t is TraceType.Pub:
        return pub_record(
            ctx.timestamp_ms,
            ctx.region_id,
            ctx.group,
            b.topic,
            b.msg_id,
            b.tags,
            b.keys,
            b.store_host,
            b.body_length,
            ctx.cost_ms,
            b.msg_type,
            b.offset_msg_id,
            ctx.success,
        )
    if t is TraceType.EndTransaction:
        return end_transaction_record(ctx.timestamp_ms, ctx.region_id, ctx.group, b)
    return _checked(
        f"Recall\x01{ctx.timestamp_ms}\x01{ctx.region_id}\x01{ctx.group}\x01{b.topic}"
        f"\x01{b.msg_id}\x01{_b(ctx.success)}\x02",
        7,
    )


def index_keys(msg_id: str, keys: str) -> list[str]:
    """The index keys one bean contributes: its msgId (each id of a batch's comma-joined
    ids, so a batch's trace is found by any of its messages) and each business key (Java's
    ``null`` text excluded)."""
    out = [i for i in msg_id.split(",") if i] if "," in msg_id else [msg_id] if msg_id else []
    if keys and keys != JAVA_NULL:
        out.extend(k for k in keys.split(props.KEY_SEPARATOR) if k and k != JAVA_NULL)
    return out


def trace_keys(ctx: TraceContext) -> frozenset[str]:
    """The index keys of ``ctx``'s trace message (``index_keys`` of every bean)."""
    return frozenset(k for b in ctx.beans for k in index_keys(b.msg_id, b.keys))


def encode_context(ctx: TraceContext) -> TraceTransfer:
    """``TraceDataEncoder.encoderFromContextBean``: the records of ``ctx`` and its keys.

    Raises:
        InvalidArgumentError: a Pub/EndTransaction/Recall context without a bean, a field
            holding a separator character, or an unknown transaction state.
    """
    return TraceTransfer(_encode_records(ctx), trace_keys(ctx))


#: Properties that make a message a ``Delay_Msg``.
_DELAY_KEYS = frozenset(
    {
        props.DELAY,
        "__STARTDELIVERTIME",
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
    }
)


def message_type_of(properties: Mapping[str, str]) -> TraceMessageType:
    """The ``MessageType`` a producer records for a message with ``properties``: half for
    ``TRAN_MSG=true``, delay for a delay level or a timer property, else normal."""
    if properties.get(props.TRANSACTION_PREPARED) == "true":
        return TraceMessageType.Trans_Msg_Half
    if not _DELAY_KEYS.isdisjoint(properties):  # one C-level pass (per send)
        return TraceMessageType.Delay_Msg
    return TraceMessageType.Normal_Msg


# -- decoding --------------------------------------------------------------------------------


def _int(text: str, name: str, bounds: tuple[int, int] = _INT32) -> int:
    if not _INT_RE.fullmatch(text):
        raise TraceDecodeError(f"{name} {text!r} is not an integer")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise TraceDecodeError(f"{name} {text} is out of range")
    return value


def _bool(text: str, name: str) -> bool:
    low = text.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise TraceDecodeError(f"{name} {text!r} is not true or false")


def _msg_type(text: str) -> TraceMessageType:
    ordinal = _int(text, "msgType")
    try:
        return TraceMessageType(ordinal)
    except ValueError:
        raise TraceDecodeError(f"msgType {ordinal} is not a message type ordinal") from None


def _need(f: list[str], count: int, kind: str) -> None:
    if len(f) < count:
        raise TraceDecodeError(f"{kind} record has {len(f)} fields, needs at least {count}")


def _at(f: list[str], index: int) -> str:
    return f[index] if index < len(f) else ""


def _pub(f: list[str]) -> TraceContext:
    _need(f, 13, "Pub")
    offset_id, success, client = "", f[12], ""
    if len(f) >= 14:
        offset_id, success = f[12], f[13]
        client = _at(f, 14)
    bean = TraceBean(
        topic=f[4],
        msg_id=f[5],
        tags=f[6],
        keys=f[7],
        store_host=f[8],
        body_length=_int(f[9], "bodyLength"),
        msg_type=_msg_type(f[11]),
        offset_msg_id=offset_id,
        client_host=client,
    )
    return TraceContext(
        TraceType.Pub,
        timestamp_ms=_int(f[1], "timeStamp", _INT64),
        region_id=f[2],
        group=f[3],
        cost_ms=_int(f[10], "costTime"),
        success=_bool(success, "success"),
        beans=(bean,),
    )


def _sub_before(f: list[str]) -> TraceContext:
    _need(f, 7, "SubBefore")
    bean = TraceBean(msg_id=f[5], retry_times=_int(f[6], "retryTimes"), keys=_at(f, 7))
    return TraceContext(
        TraceType.SubBefore,
        timestamp_ms=_int(f[1], "timeStamp", _INT64),
        region_id=f[2],
        group=f[3],
        request_id=f[4],
        beans=(bean,),
    )


def _sub_after(f: list[str]) -> TraceContext:
    _need(f, 5, "SubAfter")
    stamp = _at(f, 7)
    return TraceContext(
        TraceType.SubAfter,
        request_id=f[1],
        cost_ms=_int(f[3], "costTime"),
        success=_bool(f[4], "success"),
        context_code=_int(f[6], "contextCode") if len(f) > 6 else 0,
        timestamp_ms=_int(stamp, "timeStamp", _INT64) if stamp else 0,
        group=_at(f, 8),
        beans=(TraceBean(msg_id=f[2], keys=_at(f, 5)),),
    )


def _end_transaction(f: list[str]) -> TraceContext:
    _need(f, 13, "EndTransaction")
    if f[11] not in TRANSACTION_STATES:
        raise TraceDecodeError(f"transactionState {f[11]!r} is not a transaction state")
    bean = TraceBean(
        topic=f[4],
        msg_id=f[5],
        tags=f[6],
        keys=f[7],
        store_host=f[8],
        msg_type=_msg_type(f[9]),
        transaction_id=f[10],
        transaction_state=f[11],
        from_transaction_check=_bool(f[12], "fromTransactionCheck"),
    )
    return TraceContext(
        TraceType.EndTransaction,
        timestamp_ms=_int(f[1], "timeStamp", _INT64),
        region_id=f[2],
        group=f[3],
        beans=(bean,),
    )


def _recall(f: list[str]) -> TraceContext:
    _need(f, 7, "Recall")
    return TraceContext(
        TraceType.Recall,
        timestamp_ms=_int(f[1], "timeStamp", _INT64),
        region_id=f[2],
        group=f[3],
        success=_bool(f[6], "success"),
        beans=(TraceBean(topic=f[4], msg_id=f[5]),),
    )


_DECODERS = {
    TraceType.Pub.value: _pub,
    TraceType.SubBefore.value: _sub_before,
    TraceType.SubAfter.value: _sub_after,
    TraceType.EndTransaction.value: _end_transaction,
    TraceType.Recall.value: _recall,
}


def _split_java(text: str, sep: str) -> list[str]:
    parts = text.split(sep)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _shown(text: str) -> str:
    cut = text[:_RAW_TEXT_CHARS]
    shown = cut.replace(CONTENT_SEPARATOR, "\\x01").replace(FIELD_SEPARATOR, "\\x02")
    return shown + ("..." if len(text) > _RAW_TEXT_CHARS else "")


def _decode_record(record: str) -> TraceContext:
    fields = _split_java(record, CONTENT_SEPARATOR)
    kind = fields[0] if fields else ""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise TraceDecodeError(f"unknown trace type {kind[:40]!r}")
    return decoder(fields)


def _records(text: str) -> list[str]:
    # empty records (two terminators in a row) carry nothing; Java skips them too
    return [r for r in text.split(FIELD_SEPARATOR) if r]


def decode_trace_data(text: str) -> list[TraceContext]:
    """``TraceDataEncoder.decoderFromTraceDataString``: every record of a trace body, one
    context with one bean each.

    Raises:
        TraceDecodeError: a record does not decode (unknown type, too few fields, a number
            or boolean that does not parse); the message names the record.
    """
    out = []
    for index, record in enumerate(_records(text)):
        try:
            out.append(_decode_record(record))
        except TraceDecodeError as exc:
            raise TraceDecodeError(f"trace record {index}: {exc}") from None
    return out


def decode_trace_body(body: bytes) -> list[TraceContext | UndecodableTrace]:
    """Every record of a trace message body; a record that does not decode (bad fields, or
    bytes that are not UTF-8) comes back as an ``UndecodableTrace`` in its place and the
    others are still read. Never raises."""
    out: list[TraceContext | UndecodableTrace] = []
    # records are cut on the byte 0x02 first: it never occurs inside a UTF-8 sequence
    records = [r for r in body.split(FIELD_SEPARATOR.encode()) if r]
    for index, raw in enumerate(records):
        try:
            record = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = _shown(raw.decode("utf-8", "replace"))
            out.append(
                UndecodableTrace(f"trace record {index} is not UTF-8 ({exc.reason})", text, index)
            )
            continue
        try:
            out.append(_decode_record(record))
        except TraceDecodeError as exc:
            out.append(UndecodableTrace(f"trace record {index}: {exc}", _shown(record), index))
    return out
