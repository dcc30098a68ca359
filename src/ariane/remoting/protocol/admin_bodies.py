"""Bodies of the broker's administration requests and of its metadata files (RocketMQ
``SubscriptionGroupConfig``, ``SubscriptionGroupWrapper``, ``Connection``,
``ConsumerConnection``, ``ProducerConnection``, ``OffsetWrapper``, ``ConsumeStats``,
``TopicOffset``, ``TopicStatsTable``, ``ResetOffsetBody``, ``ResetOffsetBodyForC``,
``ConsumerOffsetSerializeWrapper``, ``GroupList``, ``QuerySubscriptionResponseBody``,
``QueueTimeSpan``/``QueryConsumeTimeSpanBody``, ``ProducerInfo``/``ProducerTableInfo``).

Maps keyed by ``MessageQueue`` (ConsumeStats, TopicStatsTable, ResetOffsetBody) are written by
``fastjson.dumps`` in fastjson's object-key form — the only form Java tools can read back —
and read from it (``ObjectKey`` keys). ``ResetOffsetBodyForC`` is the list form that C++
clients expect instead. Decoders raise only ``RemoteProtocolError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_bool,
    get_float,
    get_int,
    get_list,
    get_object,
    get_str,
    parse_object,
)
from ariane.remoting.protocol.bodies import DataVersion
from ariane.remoting.protocol.client_bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    parse_enum,
)

__all__ = [
    "ConsumeStats",
    "ConsumerConnection",
    "ConsumerOffsetSerializeWrapper",
    "DelayOffsetSerializeWrapper",
    "GroupList",
    "OffsetWrapper",
    "ProducerConnection",
    "ProducerInfo",
    "ProducerTableInfo",
    "QueryConsumeTimeSpanBody",
    "QuerySubscriptionResponseBody",
    "QueueTimeSpan",
    "RemotingConnection",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicOffset",
    "TopicStatsTable",
]


def _mq_keyed(obj: dict[Any, Any], key: str, what: str) -> dict[MessageQueue, Any]:
    table = get_object(obj, key, what)
    out: dict[MessageQueue, Any] = {}
    for k, v in table.items():
        if isinstance(k, str):
            try:
                k = fastjson.loads(k)
            except RemoteProtocolError:
                raise RemoteProtocolError(f"{what}.{key}: a key is not a MessageQueue") from None
        out[MessageQueue.from_json(k)] = v
    return out


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """A consumer group as the broker configures it (``SubscriptionGroupConfig``).

    ``group_retry_policy`` and ``subscription_data_set`` are kept as raw JSON (issue 4 owns
    retry policies); unknown properties are dropped.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: dict[str, Any] = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: list[Any] | None = None
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        out: dict[str, Any] = {
            "attributes": dict(self.attributes),
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeTimeoutMinute": self.consume_timeout_minute,
            "groupName": self.group_name,
            "groupRetryPolicy": self.group_retry_policy,
            "groupSysFlag": self.group_sys_flag,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }
        if self.subscription_data_set is not None:
            out["subscriptionDataSet"] = self.subscription_data_set
        return out

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any, group_name: str | None = None) -> SubscriptionGroupConfig:
        """Build from parsed JSON; ``group_name`` fills in a missing ``groupName``."""
        what = "SubscriptionGroupConfig"
        obj = as_object(obj, what)
        subs = obj.get("subscriptionDataSet")
        attributes = {
            str(k): v if isinstance(v, str) else fastjson.dumps(v).decode()
            for k, v in get_object(obj, "attributes", what).items()
            if v is not None
        }
        return cls(
            group_name=get_str(obj, "groupName", what, group_name or ""),
            consume_enable=get_bool(obj, "consumeEnable", what, True),
            consume_from_min_enable=get_bool(obj, "consumeFromMinEnable", what, True),
            consume_broadcast_enable=get_bool(obj, "consumeBroadcastEnable", what, True),
            consume_message_orderly=get_bool(obj, "consumeMessageOrderly", what),
            retry_queue_nums=get_int(obj, "retryQueueNums", what, 1),
            retry_max_times=get_int(obj, "retryMaxTimes", what, 16),
            group_retry_policy=get_object(obj, "groupRetryPolicy", what) or {"type": "CUSTOMIZED"},
            broker_id=get_int(obj, "brokerId", what),
            which_broker_when_consume_slowly=get_int(obj, "whichBrokerWhenConsumeSlowly", what, 1),
            notify_consumer_ids_changed_enable=get_bool(
                obj, "notifyConsumerIdsChangedEnable", what, True
            ),
            group_sys_flag=get_int(obj, "groupSysFlag", what),
            consume_timeout_minute=get_int(obj, "consumeTimeoutMinute", what, 15),
            subscription_data_set=subs if isinstance(subs, list) else None,
            attributes=attributes,
        )

    @classmethod
    def decode(cls, body: bytes) -> SubscriptionGroupConfig:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "SubscriptionGroupConfig"))


@dataclass(slots=True)
class SubscriptionGroupWrapper:
    """subscriptionGroup.json and the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    forbidden_table: dict[str, dict[str, int]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "dataVersion": self.data_version.to_json(),
            "forbiddenTable": {g: dict(t) for g, t in self.forbidden_table.items()},
            "subscriptionGroupTable": {
                g: c.to_json() for g, c in self.subscription_group_table.items()
            },
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> SubscriptionGroupWrapper:
        """Parse body bytes."""
        what = "SubscriptionGroupWrapper"
        obj = parse_object(body, what)
        table = {
            str(g): SubscriptionGroupConfig.from_json(c, str(g))
            for g, c in get_object(obj, "subscriptionGroupTable", what).items()
            if c is not None
        }
        forbidden: dict[str, dict[str, int]] = {}
        for g, t in get_object(obj, "forbiddenTable", what).items():
            inner = as_object(t or {}, f"{what}.forbiddenTable")
            forbidden[str(g)] = {str(k): get_int(inner, k, what) for k in inner}
        return cls(table, forbidden, DataVersion.from_json(obj.get("dataVersion") or {}))


@dataclass(slots=True)
class RemotingConnection:
    """One client connection as admin tools see it (``Connection``)."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (language by name)."""
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: Any) -> RemotingConnection:
        """Build from parsed JSON."""
        what = "Connection"
        obj = as_object(obj, what)
        return cls(
            client_id=get_str(obj, "clientId", what),
            client_addr=get_str(obj, "clientAddr", what),
            language=get_str(obj, "language", what),
            version=get_int(obj, "version", what),
        )


def _connections(obj: dict[Any, Any], what: str) -> list[RemotingConnection]:
    return [RemotingConnection.from_json(c) for c in get_list(obj, "connectionSet", what) if c]


@dataclass(slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST body (``ConsumerConnection``)."""

    connection_set: list[RemotingConnection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        out: dict[str, Any] = {
            "connectionSet": [c.to_json() for c in self.connection_set],
            "subscriptionTable": {t: s.to_json() for t, s in self.subscription_table.items()},
        }
        if self.consume_type is not None:
            out["consumeType"] = self.consume_type.name
        if self.message_model is not None:
            out["messageModel"] = self.message_model.name
        if self.consume_from_where is not None:
            out["consumeFromWhere"] = self.consume_from_where.name
        return out

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ConsumerConnection:
        """Parse body bytes."""
        what = "ConsumerConnection"
        obj = parse_object(body, what)
        subs = {
            str(t): SubscriptionData.from_json(s)
            for t, s in get_object(obj, "subscriptionTable", what).items()
            if s is not None
        }

        def opt(cls_: Any, key: str) -> Any:
            value = obj.get(key)
            return None if value is None else parse_enum(cls_, value, f"{what}.{key}", cls_(0))

        return cls(
            _connections(obj, what),
            subs,
            opt(ConsumeType, "consumeType"),
            opt(MessageModel, "messageModel"),
            opt(ConsumeFromWhere, "consumeFromWhere"),
        )


@dataclass(slots=True)
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST body (``ProducerConnection``)."""

    connection_set: list[RemotingConnection] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"connectionSet": [c.to_json() for c in self.connection_set]}

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ProducerConnection:
        """Parse body bytes."""
        return cls(_connections(parse_object(body, "ProducerConnection"), "ProducerConnection"))


@dataclass(slots=True)
class ProducerInfo:
    """One producer connection in GET_ALL_PRODUCER_INFO (``ProducerInfo``)."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "clientId": self.client_id,
            "language": self.language,
            "lastUpdateTimestamp": self.last_update_timestamp,
            "remoteIP": self.remote_ip,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: Any) -> ProducerInfo:
        """Build from parsed JSON."""
        what = "ProducerInfo"
        obj = as_object(obj, what)
        return cls(
            get_str(obj, "clientId", what),
            get_str(obj, "remoteIP", what),
            get_str(obj, "language", what),
            get_int(obj, "version", what),
            get_int(obj, "lastUpdateTimestamp", what),
        )


@dataclass(slots=True)
class ProducerTableInfo:
    """GET_ALL_PRODUCER_INFO body: producer group -> its connections."""

    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(
            {"data": {g: [p.to_json() for p in ps] for g, ps in self.data.items()}}
        )

    @classmethod
    def decode(cls, body: bytes) -> ProducerTableInfo:
        """Parse body bytes."""
        what = "ProducerTableInfo"
        obj = parse_object(body, what)
        data: dict[str, list[ProducerInfo]] = {}
        for group, infos in get_object(obj, "data", what).items():
            if not isinstance(infos, list):
                raise RemoteProtocolError(f"{what}: producers of {group!r} must be a list")
            data[str(group)] = [ProducerInfo.from_json(i) for i in infos if i is not None]
        return cls(data)


@dataclass(slots=True)
class OffsetWrapper:
    """One queue in ConsumeStats."""

    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
            "pullOffset": self.pull_offset,
        }

    @classmethod
    def from_json(cls, obj: Any) -> OffsetWrapper:
        """Build from parsed JSON."""
        what = "OffsetWrapper"
        obj = as_object(obj, what)
        return cls(
            get_int(obj, "brokerOffset", what),
            get_int(obj, "consumerOffset", what),
            get_int(obj, "pullOffset", what),
            get_int(obj, "lastTimestamp", what),
        )


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS body (``ConsumeStats``), MessageQueue-keyed."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (MessageQueue keys stay objects)."""
        return {
            "consumeTps": self.consume_tps,
            "offsetTable": {mq: w.to_json() for mq, w in self.offset_table.items()},
        }

    def encode(self) -> bytes:
        """Body bytes, object keys in fastjson's form."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ConsumeStats:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "ConsumeStats"))

    @classmethod
    def from_json(cls, obj: Any) -> ConsumeStats:
        """Build from parsed JSON."""
        what = "ConsumeStats"
        obj = as_object(obj, what)
        table = {
            mq: OffsetWrapper.from_json(v) for mq, v in _mq_keyed(obj, "offsetTable", what).items()
        }
        return cls(table, get_float(obj, "consumeTps", what))


@dataclass(slots=True)
class TopicOffset:
    """One queue in TopicStatsTable."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json(cls, obj: Any) -> TopicOffset:
        """Build from parsed JSON."""
        what = "TopicOffset"
        obj = as_object(obj, what)
        return cls(
            get_int(obj, "minOffset", what),
            get_int(obj, "maxOffset", what),
            get_int(obj, "lastUpdateTimestamp", what),
        )


@dataclass(slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO body (``TopicStatsTable``), MessageQueue-keyed."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (MessageQueue keys stay objects)."""
        return {
            "offsetTable": {mq: t.to_json() for mq, t in self.offset_table.items()},
            "topicPutTps": self.topic_put_tps,
        }

    def encode(self) -> bytes:
        """Body bytes, object keys in fastjson's form."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> TopicStatsTable:
        """Parse body bytes."""
        what = "TopicStatsTable"
        obj = parse_object(body, what)
        table = {
            mq: TopicOffset.from_json(v) for mq, v in _mq_keyed(obj, "offsetTable", what).items()
        }
        return cls(table, get_float(obj, "topicPutTps", what))


@dataclass(slots=True)
class ResetOffsetBody:
    """RESET_CONSUMER_CLIENT_OFFSET body for Java clients and the INVOKE_BROKER_TO_RESET_OFFSET
    answer (``ResetOffsetBody``): MessageQueue -> offset."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (MessageQueue keys stay objects)."""
        return {"offsetTable": dict(self.offset_table)}

    def encode(self) -> bytes:
        """Body bytes, object keys in fastjson's form."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ResetOffsetBody:
        """Parse body bytes."""
        what = "ResetOffsetBody"
        obj = parse_object(body, what)
        table = {
            mq: get_int({"v": v}, "v", f"{what}.offsetTable")
            for mq, v in _mq_keyed(obj, "offsetTable", what).items()
        }
        return cls(table)


@dataclass(slots=True)
class ResetOffsetBodyForC:
    """RESET_CONSUMER_CLIENT_OFFSET body for C++ clients (``ResetOffsetBodyForC``): a list of
    ``{topic, brokerName, queueId, offset}``."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "offsetTable": [
                {**mq.to_json(), "offset": offset} for mq, offset in self.offset_table.items()
            ]
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ResetOffsetBodyForC:
        """Parse body bytes."""
        what = "ResetOffsetBodyForC"
        obj = parse_object(body, what)
        table: dict[MessageQueue, int] = {}
        for entry in get_list(obj, "offsetTable", what):
            entry = as_object(entry, f"{what}.offsetTable")
            table[MessageQueue.from_json(entry)] = get_int(entry, "offset", what)
        return cls(table)


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper:
    """consumerOffset.json and the GET_ALL_CONSUMER_OFFSET body: ``"topic@group" -> {queueId:
    offset}``."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (queue ids become quoted keys, which fastjson reads)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "offsetTable": {k: dict(v) for k, v in self.offset_table.items()},
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ConsumerOffsetSerializeWrapper:
        """Parse body bytes."""
        what = "ConsumerOffsetSerializeWrapper"
        obj = parse_object(body, what)
        table: dict[str, dict[int, int]] = {}
        for key, queues in get_object(obj, "offsetTable", what).items():
            inner = as_object(queues or {}, f"{what}.offsetTable")
            try:
                table[str(key)] = {int(q): get_int(inner, q, what) for q in inner}
            except (TypeError, ValueError):
                raise RemoteProtocolError(f"{what}: a queue id is not an integer") from None
        return cls(table, DataVersion.from_json(obj.get("dataVersion") or {}))


@dataclass(slots=True)
class DelayOffsetSerializeWrapper:
    """delayOffset.json and the GET_ALL_DELAY_OFFSET body: delay level -> the next
    SCHEDULE_TOPIC_XXXX queue offset to deliver (``DelayOffsetSerializeWrapper``)."""

    offset_table: dict[int, int] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (levels become quoted keys, which fastjson reads)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "offsetTable": dict(sorted(self.offset_table.items())),
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> DelayOffsetSerializeWrapper:
        """Parse body bytes (``dataVersion`` is optional: RocketMQ 4.x writes none)."""
        what = "DelayOffsetSerializeWrapper"
        obj = parse_object(body, what)
        table = get_object(obj, "offsetTable", what) if "offsetTable" in obj else {}
        try:
            offsets = {int(level): get_int(table, level, what) for level in table}
        except (TypeError, ValueError):
            raise RemoteProtocolError(f"{what}: a delay level is not an integer") from None
        return cls(offsets, DataVersion.from_json(obj.get("dataVersion") or {}))


@dataclass(slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO body (``GroupList``)."""

    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps({"groupList": sorted(set(self.group_list))})

    @classmethod
    def decode(cls, body: bytes) -> GroupList:
        """Parse body bytes."""
        obj = parse_object(body, "GroupList")
        return cls([str(g) for g in get_list(obj, "groupList", "GroupList") if g is not None])


@dataclass(slots=True)
class QuerySubscriptionResponseBody:
    """QUERY_SUBSCRIPTION_BY_CONSUMER body."""

    subscription_data: SubscriptionData
    group: str
    topic: str

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(
            {
                "group": self.group,
                "subscriptionData": self.subscription_data.to_json(),
                "topic": self.topic,
            }
        )


@dataclass(slots=True)
class QueueTimeSpan:
    """One queue of QUERY_CONSUME_TIME_SPAN (``QueueTimeSpan``)."""

    message_queue: MessageQueue
    min_time_stamp: int
    max_time_stamp: int
    consume_time_stamp: int
    delay_time: int

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "consumeTimeStamp": self.consume_time_stamp,
            "delayTime": self.delay_time,
            "maxTimeStamp": self.max_time_stamp,
            "messageQueue": self.message_queue.to_json(),
            "minTimeStamp": self.min_time_stamp,
        }


@dataclass(slots=True)
class QueryConsumeTimeSpanBody:
    """QUERY_CONSUME_TIME_SPAN body."""

    consume_time_span_set: list[QueueTimeSpan] = field(default_factory=list)

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(
            {"consumeTimeSpanSet": [s.to_json() for s in self.consume_time_span_set]}
        )
