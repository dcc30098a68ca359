"""Messages between the v2 protobuf shape and the broker's (RocketMQ proxy's
``GrpcConverter``, ``GrpcValidator`` and ``SendMessageActivity#buildMessage``).

How it works: ``outgoing`` validates one ``apache.rocketmq.v2.Message`` a client sends and
turns it into what a remoting SEND carries (properties, body, sysFlag, born time); every rule
refused answers the code the Java proxy answers, with a message that says what to fix.
``incoming`` turns a stored message (``MessageExt``) into the ``Message`` a client receives,
with the body digest the clients verify. Pure functions: time comes in as an argument.

Client quirks kept here: bodies carry an MD5 digest (as the Java proxy sends; the SDKs write
CRC32 differently: Python upper-case hex, Node.js decimal). PyPI ``rocketmq-python-client`` 5.1.2 puts a delivery time given in
epoch milliseconds into ``Timestamp.seconds`` unchanged, so a ``seconds`` value only plausible
as milliseconds (past the year 5138) is read as milliseconds.
"""

from __future__ import annotations

import hashlib
import unicodedata
import zlib
from dataclasses import dataclass

from google.protobuf import duration_pb2, timestamp_pb2

from ariane.common import properties as p
from ariane.common.message import MessageExt
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.sysflag import (
    COMPRESSED_FLAG,
    TRANSACTION_PREPARED_TYPE,
)
from ariane.common.topics import (
    GROUP_MAX_LENGTH,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TOPIC_MAX_LENGTH,
)
from ariane.errors import InvalidArgumentError
from ariane.proxy.config import ProxyConfig
from ariane.proxy.status import ProxyError
from ariane.proxy.v2 import definition_pb2 as pb

__all__ = [
    "OutgoingMessage",
    "duration_ms",
    "expression_type",
    "incoming",
    "make_transaction_id",
    "message_type_of",
    "outgoing",
    "parse_transaction_id",
    "timestamp_ms",
    "to_duration",
    "to_timestamp",
    "validate_group",
    "validate_topic",
]

#: ``seconds`` above this is an epoch in milliseconds (rocketmq-python-client 5.1.2).
_SECONDS_AS_MS_THRESHOLD = 100_000_000_000
_NAME_CHARS = frozenset("%|-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


# -- time ----------------------------------------------------------------------------------------


def timestamp_ms(ts: timestamp_pb2.Timestamp) -> int:
    """Epoch milliseconds of ``ts``; a ``seconds`` only plausible as milliseconds is read so."""
    if ts.seconds > _SECONDS_AS_MS_THRESHOLD:
        return int(ts.seconds)
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def to_timestamp(ms: int) -> timestamp_pb2.Timestamp:
    """A ``Timestamp`` for epoch milliseconds."""
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(d: duration_pb2.Duration) -> int:
    """Milliseconds of a ``Duration``."""
    return int(d.seconds) * 1000 + int(d.nanos) // 1_000_000


def to_duration(ms: int) -> duration_pb2.Duration:
    """A ``Duration`` of ``ms`` milliseconds."""
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


# -- names ----------------------------------------------------------------------------------------


def validate_topic(resource: pb.Resource) -> str:
    """The topic name, or ILLEGAL_TOPIC saying what is wrong with it."""
    name = resource.name
    if not name.strip():
        raise ProxyError(pb.ILLEGAL_TOPIC, "topic name cannot be blank")
    if len(name) > TOPIC_MAX_LENGTH:
        raise ProxyError(pb.ILLEGAL_TOPIC, f"topic name is longer than {TOPIC_MAX_LENGTH}")
    if not set(name) <= _NAME_CHARS:
        raise ProxyError(
            pb.ILLEGAL_TOPIC,
            f"topic {name!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        )
    if name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX):
        raise ProxyError(pb.ILLEGAL_TOPIC, f"cannot access system topic {name}")
    return name


def validate_group(resource: pb.Resource) -> str:
    """The consumer group name, or ILLEGAL_CONSUMER_GROUP."""
    name = resource.name
    if not name.strip():
        raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be blank")
    if len(name) > GROUP_MAX_LENGTH:
        raise ProxyError(
            pb.ILLEGAL_CONSUMER_GROUP, f"consumer group is longer than {GROUP_MAX_LENGTH}"
        )
    if not set(name) <= _NAME_CHARS:
        raise ProxyError(
            pb.ILLEGAL_CONSUMER_GROUP,
            f"consumer group {name!r} contains illegal characters, allowing only "
            "^[%|a-zA-Z0-9_-]+$",
        )
    if name.startswith(_SYSTEM_GROUP_PREFIX):
        raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group {name}")
    return name


def expression_type(expression: pb.FilterExpression) -> str:
    """``TAG`` or ``SQL92`` for a filter; ILLEGAL_FILTER_EXPRESSION for an unknown type
    (unset means TAG, as the SDKs send it)."""
    if expression.type in (pb.TAG, pb.FILTER_TYPE_UNSPECIFIED):
        return "TAG"
    if expression.type == pb.SQL:
        return "SQL92"
    raise ProxyError(
        pb.ILLEGAL_FILTER_EXPRESSION, f"unknown filter type {expression.type}: use TAG or SQL"
    )


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


# -- client -> broker ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """What a remoting SEND of one gRPC message carries.

    Attributes:
        topic: the destination topic.
        body: the payload as the client sent it.
        properties: the message properties (system ones included).
        sys_flag: the TRANSACTION_PREPARED bit (GZIP bodies are stored decompressed).
        born_timestamp_ms: when the client built the message.
        message_type: the v2 type the properties make (NORMAL, FIFO, DELAY, TRANSACTION).
    """

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp_ms: int
    message_type: int


def message_type_of(props: dict[str, str]) -> int:
    """RocketMQ's ``TopicMessageType.parseFromMessageProperty`` as a v2 ``MessageType``."""
    if props.get(p.TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if (
        p.DELAY in props
        or p.TIMER_DELIVER_MS in props
        or p.TIMER_DELAY_SEC in props
        or p.TIMER_DELAY_MS in props
    ):
        return pb.DELAY
    if p.SHARDING_KEY in props:
        return pb.FIFO
    return pb.NORMAL


def outgoing(msg: pb.Message, cfg: ProxyConfig, now_ms: int, peer: str) -> OutgoingMessage:
    """Validate a message a client sends and build its remoting form.

    Raises:
        ProxyError: the message breaks a rule (ILLEGAL_*, MESSAGE_BODY_*, ...).
    """
    topic = validate_topic(msg.topic)
    sysp = msg.system_properties
    body = bytes(msg.body)
    if sysp.body_encoding == pb.GZIP and body:
        # stored plain: every consumer (remoting ones expect zlib, not gzip) reads it as is
        try:
            body = zlib.decompress(body, wbits=47)
        except zlib.error as exc:
            raise ProxyError(
                pb.MESSAGE_CORRUPTED, f"GZIP body does not decompress: {exc}"
            ) from None
    if not body:
        raise ProxyError(pb.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > cfg.max_message_size:
        raise ProxyError(
            pb.MESSAGE_BODY_TOO_LARGE,
            f"message body cannot exceed the max {cfg.max_message_size}, got {len(body)}",
        )
    if not sysp.message_id.strip():
        raise ProxyError(pb.ILLEGAL_MESSAGE_ID, "message id cannot be blank")
    props = _user_properties(msg, cfg)
    props[p.UNIQ_KEY] = sysp.message_id
    if sysp.HasField("tag"):
        _check_tag(sysp.tag)
        if sysp.tag:
            props[p.TAGS] = sysp.tag
    keys = [k for k in sysp.keys]
    for key in keys:
        if not key.strip() or _has_control(key):
            raise ProxyError(pb.ILLEGAL_MESSAGE_KEY, f"message key {key!r} is blank or illegal")
    if keys:
        props[p.KEYS] = p.KEY_SEPARATOR.join(keys)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in msg.user_properties.items())
    size += len(sysp.tag.encode()) + sum(len(k.encode()) for k in keys)
    if size > cfg.max_user_property_size:
        raise ProxyError(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"properties, tag and keys take {size} bytes, more than {cfg.max_user_property_size}",
        )
    sys_flag = 0
    if sysp.message_type == pb.TRANSACTION:
        props[p.TRANSACTION_PREPARED] = "true"
        sys_flag |= TRANSACTION_PREPARED_TYPE
        if sysp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sysp.orphaned_transaction_recovery_duration.seconds
            if not 0 <= seconds <= cfg.max_transaction_recovery_s:
                raise ProxyError(
                    pb.BAD_REQUEST,
                    f"the orphaned transaction recovery duration must be within "
                    f"[0, {cfg.max_transaction_recovery_s}] s, got {seconds}",
                )
            props[p.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sysp.HasField("delivery_timestamp"):
        deliver_ms = timestamp_ms(sysp.delivery_timestamp)
        if deliver_ms - now_ms > cfg.max_delay_time_ms:
            raise ProxyError(
                pb.ILLEGAL_DELIVERY_TIME,
                f"the max delay time of message is too large, max is {cfg.max_delay_time_ms}",
            )
        props[p.TIMER_DELIVER_MS] = str(deliver_ms)
    if sysp.HasField("message_group") and sysp.message_group:
        group = sysp.message_group
        if (
            not group.strip()
            or len(group.encode()) >= cfg.max_message_group_size
            or _has_control(group)
        ):
            raise ProxyError(
                pb.ILLEGAL_MESSAGE_GROUP,
                f"message group must be non-blank, printable and shorter than "
                f"{cfg.max_message_group_size} bytes: {group[:80]!r}",
            )
        props[p.SHARDING_KEY] = group
    if sysp.HasField("trace_context") and sysp.trace_context:
        props[p.TRACE_CONTEXT] = sysp.trace_context
    if sysp.delivery_attempt > 0:
        props[p.RECONSUME_TIME] = str(sysp.delivery_attempt)
    props[p.PRODUCER_GROUP] = topic
    props[p.BORN_HOST] = sysp.born_host or peer
    born_ms = timestamp_ms(sysp.born_timestamp) if sysp.HasField("born_timestamp") else now_ms
    props[p.BORN_TIMESTAMP] = str(born_ms)
    return OutgoingMessage(topic, body, props, sys_flag, born_ms, message_type_of(props))


def _user_properties(msg: pb.Message, cfg: ProxyConfig) -> dict[str, str]:
    user = msg.user_properties
    if len(user) > cfg.user_property_max_num:
        raise ProxyError(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"too many user properties: {len(user)} > {cfg.user_property_max_num}",
        )
    props: dict[str, str] = {}
    for key, value in user.items():
        if key in p.SYSTEM_KEYS:
            raise ProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if not key or _has_control(key) or _has_control(value) or _bad_separator(key, value):
            raise ProxyError(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"property {key!r} has an empty name or control characters",
            )
        props[key] = value
    return props


def _bad_separator(key: str, value: str) -> bool:
    return p.NAME_VALUE_SEPARATOR in key + value or p.PROPERTY_SEPARATOR in key + value


def _check_tag(tag: str) -> None:
    if tag and (not tag.strip() or "|" in tag or _has_control(tag)):
        raise ProxyError(pb.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is blank, has '|' or is illegal")


# -- broker -> client ----------------------------------------------------------------------------


def incoming(
    ext: MessageExt,
    *,
    topic: str | None = None,
    receipt_handle: str | None = None,
    now_ms: int = 0,
) -> pb.Message:
    """The v2 ``Message`` of a stored message.

    Args:
        ext: the stored message (body as stored: compressed when COMPRESSED is set).
        topic: the topic to show (the original one for a retry copy); default ``ext.topic``.
        receipt_handle: set on messages handed out by a receive.
        now_ms: the conversion time (``TIMER_DELAY_SEC`` deliveries count from it).
    """
    props = ext.properties
    sysp = pb.SystemProperties(
        message_id=ext.msg_id,
        body_encoding=pb.GZIP if ext.sys_flag & COMPRESSED_FLAG else pb.IDENTITY,
        message_type=message_type_of(props),  # type: ignore[arg-type]
        born_host=props.get(p.BORN_HOST) or str(ext.born_host),
        store_host=str(ext.store_host),
        queue_id=ext.queue_id,
        queue_offset=ext.queue_offset,
        delivery_attempt=ext.reconsume_times + 1,
    )
    tag = props.get(p.TAGS)
    if tag is not None:
        sysp.tag = tag
    sysp.keys.extend(k for k in props.get(p.KEYS, "").split(p.KEY_SEPARATOR) if k)
    body = bytes(ext.body)
    # MD5 as the Java proxy sends: the SDKs disagree on how CRC32 is written (Python upper-case
    # hex, Node.js decimal) but all read MD5 as upper-case hex
    sysp.body_digest.type = pb.MD5
    sysp.body_digest.checksum = hashlib.md5(body, usedforsecurity=False).hexdigest().upper()
    sysp.born_timestamp.CopyFrom(to_timestamp(ext.born_timestamp_ms))
    sysp.store_timestamp.CopyFrom(to_timestamp(ext.store_timestamp_ms))
    if p.TIMER_DELAY_SEC in props:
        delay = _int(props[p.TIMER_DELAY_SEC])
        if delay is not None:
            sysp.delivery_timestamp.CopyFrom(to_timestamp(now_ms + delay * 1000))
    elif p.TIMER_DELIVER_MS in props:
        deliver = _int(props[p.TIMER_DELIVER_MS])
        if deliver is not None:
            sysp.delivery_timestamp.CopyFrom(to_timestamp(deliver))
    group = props.get(p.SHARDING_KEY)
    if group:
        sysp.message_group = group
    trace = props.get(p.TRACE_CONTEXT)
    if trace:
        sysp.trace_context = trace
    if receipt_handle is not None:
        sysp.receipt_handle = receipt_handle
    if p.DLQ_ORIGIN_TOPIC in props:
        sysp.dead_letter_queue.topic = props[p.DLQ_ORIGIN_TOPIC]
        sysp.dead_letter_queue.message_id = props.get(p.DLQ_ORIGIN_MESSAGE_ID, "")
    user = {k: v for k, v in props.items() if k not in p.SYSTEM_KEYS}
    return pb.Message(
        topic=pb.Resource(name=topic or ext.topic),
        user_properties=user,
        system_properties=sysp,
        body=body,
    )


def make_transaction_id(offset_msg_id: str, queue_offset: int) -> str:
    """The v2 transaction id of a half message."""
    return f"{offset_msg_id}-{queue_offset}"


def parse_transaction_id(text: str) -> tuple[int, int, str]:
    """(commit-log offset, queue offset, offset id) of a transaction id.

    Raises:
        ProxyError: INVALID_TRANSACTION_ID.
    """
    msg_id, _, queue = text.strip().rpartition("-")
    try:
        return decode_offset_msg_id(msg_id).phys_offset, int(queue), msg_id
    except (InvalidArgumentError, ValueError):
        raise ProxyError(
            pb.INVALID_TRANSACTION_ID, f"transaction id {text!r} is not valid"
        ) from None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
