"""Bodies of the client <-> broker data path (RocketMQ ``MessageQueue``, ``HeartbeatData``,
``ProducerData``, ``ConsumerData``, ``SubscriptionData``, ``LockBatchRequestBody``,
``LockBatchResponseBody``, ``UnlockBatchRequestBody``, ``GetConsumerListByGroupResponseBody``,
``CheckClientRequestBody``) and the consumer enums (``ConsumeType``, ``MessageModel``,
``ConsumeFromWhere``).

Every class has ``to_json``/``from_json`` (plain JSON data in fastjson's property names) and
``encode``/``decode`` (body bytes). Enums are written as their names, as fastjson does, and read
from names or ordinals: C++ 1.2.4 sends ``consumeType``/``messageModel``/``consumeFromWhere``
as integers and ``subVersion`` as a string. Decoders raise only ``RemoteProtocolError``.

``to_json`` never returns dataclass instances: orjson would serialise them with Python field
names, so nested values are converted explicitly.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ariane.common.hashing import java_string_hash
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_bool,
    get_int,
    get_list,
    get_object,
    get_opt_str,
    get_str,
    parse_object,
)

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "CheckClientRequestBody",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ConsumerListBody",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "SubscriptionData",
    "UnlockBatchRequestBody",
    "parse_enum",
]

#: The "everything" subscription expression.
SUB_ALL = "*"
EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"


class ConsumeType(enum.IntEnum):
    """``ConsumeType``: pull (actively), push (passively) or pop."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2


class MessageModel(enum.IntEnum):
    """``MessageModel``."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """``ConsumeFromWhere`` (ordinals as in Java and C++)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


E = TypeVar("E", bound=enum.IntEnum)


def parse_enum(cls: type[E], value: Any, what: str, default: E) -> E:
    """An enum from its name (fastjson) or ordinal (C++); absent gives ``default``.

    Raises:
        RemoteProtocolError: neither a known name nor a known ordinal.
    """
    if value is None:
        return default
    if isinstance(value, bool):
        raise RemoteProtocolError(f"{what}: expected an enum name or ordinal, got {value!r}")
    if isinstance(value, int):
        try:
            return cls(value)
        except ValueError:
            raise RemoteProtocolError(f"{what}: unknown ordinal {value}") from None
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return parse_enum(cls, int(text), what, default)
        try:
            return cls[text]
        except KeyError:
            raise RemoteProtocolError(f"{what}: unknown value {value!r}") from None
    raise RemoteProtocolError(f"{what}: expected an enum name or ordinal, got {value!r}")


@dataclass(frozen=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker (``MessageQueue``); hashable, usable as a map key.

    As a map key ``fastjson.dumps`` writes it in fastjson's object-key form.
    """

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: Any) -> MessageQueue:
        """Build from parsed JSON (an object, or an ``ObjectKey`` in key position)."""
        what = "MessageQueue"
        if isinstance(obj, fastjson.ObjectKey):
            obj = obj.as_dict()
        obj = as_object(obj, what)
        return cls(
            topic=get_str(obj, "topic", what),
            broker_name=get_str(obj, "brokerName", what),
            queue_id=get_int(obj, "queueId", what),
        )


def mq_list(values: list[Any], what: str) -> list[MessageQueue]:
    """A JSON array of MessageQueue objects."""
    return [MessageQueue.from_json(v) for v in values if v is not None] if values else []


def tags_of(expression: str | None) -> list[str]:
    """The tags of a TAG expression (``"a || b"``); empty for ``*`` or blank."""
    if expression is None:
        return []
    text = expression.strip()
    if not text or text == SUB_ALL:
        return []
    return [t.strip() for t in text.split("||") if t.strip()]


@dataclass(slots=True)
class SubscriptionData:
    """A consumer's subscription to one topic (``SubscriptionData``).

    Attributes:
        topic: the topic.
        sub_string: the expression: ``*``, ``"a || b"`` or SQL92 text.
        tags_set: the tags of a TAG expression.
        code_set: Java ``String.hashCode`` of each tag.
        sub_version: version stamp (milliseconds); newer subscriptions have larger values.
        class_filter_mode: legacy class filter.
        expression_type: ``TAG`` or ``SQL92``.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    class_filter_mode: bool = False
    expression_type: str = EXPRESSION_TYPE_TAG

    @classmethod
    def build(
        cls,
        topic: str,
        expression: str | None,
        expression_type: str | None = None,
        sub_version: int = 0,
    ) -> SubscriptionData:
        """A subscription from an expression, as ``FilterAPI.build`` does."""
        etype = (expression_type or EXPRESSION_TYPE_TAG).upper()
        if etype != EXPRESSION_TYPE_TAG:
            return cls(topic, expression or "", [], [], sub_version, False, etype)
        tags = tags_of(expression)
        if not tags:
            return cls(topic, SUB_ALL, [], [], sub_version, False, etype)
        return cls(topic, expression or "", tags, [java_string_hash(t) for t in tags], sub_version)

    @property
    def is_tag_type(self) -> bool:
        """True for TAG expressions (including a missing type)."""
        return not self.expression_type or self.expression_type.upper() == EXPRESSION_TYPE_TAG

    def same_filter(self, other: SubscriptionData) -> bool:
        """Whether both select the same messages (topic, expression and type)."""
        return (
            self.topic == other.topic
            and self.sub_string == other.sub_string
            and self.expression_type == other.expression_type
            and self.class_filter_mode == other.class_filter_mode
        )

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: Any) -> SubscriptionData:
        """Build from parsed JSON (``subVersion`` may be a string, as C++ sends it)."""
        what = "SubscriptionData"
        obj = as_object(obj, what)
        tags = [str(t) for t in get_list(obj, "tagsSet", what) if t is not None]
        codes = get_list(obj, "codeSet", what)
        return cls(
            topic=get_str(obj, "topic", what),
            sub_string=get_str(obj, "subString", what, SUB_ALL),
            tags_set=tags,
            code_set=[get_int({"c": c}, "c", f"{what}.codeSet") for c in codes if c is not None],
            sub_version=get_int(obj, "subVersion", what),
            class_filter_mode=get_bool(obj, "classFilterMode", what),
            expression_type=get_str(obj, "expressionType", what, EXPRESSION_TYPE_TAG)
            or EXPRESSION_TYPE_TAG,
        )


@dataclass(slots=True)
class ProducerData:
    """A producer group in a heartbeat (``ProducerData``)."""

    group_name: str

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: Any) -> ProducerData:
        """Build from parsed JSON."""
        return cls(get_str(as_object(obj, "ProducerData"), "groupName", "ProducerData"))


@dataclass(slots=True)
class ConsumerData:
    """A consumer group in a heartbeat (``ConsumerData``)."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (enums by name)."""
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_json() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerData:
        """Build from parsed JSON (enums as names or ordinals)."""
        what = "ConsumerData"
        obj = as_object(obj, what)
        subs = get_list(obj, "subscriptionDataSet", what)
        return cls(
            group_name=get_str(obj, "groupName", what),
            consume_type=parse_enum(
                ConsumeType, obj.get("consumeType"), f"{what}.consumeType",
                ConsumeType.CONSUME_PASSIVELY,
            ),
            message_model=parse_enum(
                MessageModel, obj.get("messageModel"), f"{what}.messageModel",
                MessageModel.CLUSTERING,
            ),
            consume_from_where=parse_enum(
                ConsumeFromWhere, obj.get("consumeFromWhere"), f"{what}.consumeFromWhere",
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            ),
            subscription_data_set=[SubscriptionData.from_json(s) for s in subs if s is not None],
            unit_mode=get_bool(obj, "unitMode", what),
        )  # fmt: skip


@dataclass(slots=True)
class HeartbeatData:
    """The HEART_BEAT body (``HeartbeatData``)."""

    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int = 0
    without_sub: bool = False

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
            "heartbeatFingerprint": self.heartbeat_fingerprint,
            "producerDataSet": [p.to_json() for p in self.producer_data_set],
            "withoutSub": self.without_sub,
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> HeartbeatData:
        """Build from parsed JSON."""
        what = "HeartbeatData"
        obj = as_object(obj, what)
        producers = get_list(obj, "producerDataSet", what)
        consumers = get_list(obj, "consumerDataSet", what)
        return cls(
            client_id=get_str(obj, "clientID", what),
            producer_data_set=[ProducerData.from_json(p) for p in producers if p is not None],
            consumer_data_set=[ConsumerData.from_json(c) for c in consumers if c is not None],
            heartbeat_fingerprint=get_int(obj, "heartbeatFingerprint", what),
            without_sub=get_bool(obj, "withoutSub", what),
        )

    @classmethod
    def decode(cls, body: bytes) -> HeartbeatData:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "HeartbeatData"))


@dataclass(slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body (``LockBatchRequestBody``)."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)
    only_this_broker: bool = False

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [mq.to_json() for mq in self.mq_set],
            "onlyThisBroker": self.only_this_broker,
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> LockBatchRequestBody:
        """Build from parsed JSON."""
        what = cls.__name__
        obj = as_object(obj, what)
        return cls(
            consumer_group=get_str(obj, "consumerGroup", what),
            client_id=get_str(obj, "clientId", what),
            mq_set=mq_list(get_list(obj, "mqSet", what), what),
            only_this_broker=get_bool(obj, "onlyThisBroker", what),
        )

    @classmethod
    def decode(cls, body: bytes) -> LockBatchRequestBody:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, cls.__name__))


class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ body: the same shape as the lock request."""

    __slots__ = ()


@dataclass(slots=True)
class LockBatchResponseBody:
    """Answer to LOCK_BATCH_MQ: the queues now locked by the caller."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"lockOKMQSet": [mq.to_json() for mq in self.lock_ok_mq_set]}

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> LockBatchResponseBody:
        """Parse body bytes."""
        what = "LockBatchResponseBody"
        obj = parse_object(body, what)
        return cls(mq_list(get_list(obj, "lockOKMQSet", what), what))


@dataclass(slots=True)
class ConsumerListBody:
    """Answer to GET_CONSUMER_LIST_BY_GROUP (``GetConsumerListByGroupResponseBody``)."""

    consumer_id_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"consumerIdList": list(self.consumer_id_list)}

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ConsumerListBody:
        """Parse body bytes."""
        what = "GetConsumerListByGroupResponseBody"
        obj = parse_object(body, what)
        return cls([str(c) for c in get_list(obj, "consumerIdList", what) if c is not None])


@dataclass(slots=True)
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG body (``CheckClientRequestBody``)."""

    client_id: str
    group: str
    subscription_data: SubscriptionData | None = None
    namespace: str | None = None

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        out: dict[str, Any] = {"clientId": self.client_id, "group": self.group}
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_json()
        if self.namespace is not None:
            out["namespace"] = self.namespace
        return out

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> CheckClientRequestBody:
        """Parse body bytes."""
        what = "CheckClientRequestBody"
        obj = parse_object(body, what)
        sub = get_object(obj, "subscriptionData", what)
        return cls(
            client_id=get_str(obj, "clientId", what),
            group=get_str(obj, "group", what),
            subscription_data=SubscriptionData.from_json(sub) if sub else None,
            namespace=get_opt_str(obj, "namespace", what),
        )
