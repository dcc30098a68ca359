"""Bodies of Ariane's two summary requests (an extension; RocketMQ has no equivalent):
ARIANE_GET_TOPIC_SUMMARY and ARIANE_GET_GROUP_SUMMARY answer, in one round trip per broker,
what a dashboard lists for every topic (message count, put TPS, 24 h volume) and every
consumer group (online clients, lag, consume TPS), where RocketMQ's tools send one request per
topic or group (rocketmq-dashboard#1445, #123).

Both are JSON objects, ``{"brokerAddr": ..., "table": {name: {...}}}``, keys in camelCase
like every other body. Decoders raise only ``RemoteProtocolError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_float,
    get_int,
    get_object,
    get_str,
    parse_object,
)

__all__ = ["GroupSummary", "GroupSummaryTable", "TopicSummary", "TopicSummaryTable"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """One topic on one broker.

    Attributes:
        message_count: messages still stored (sum over queues of max - min offset).
        max_offset_sum: sum over queues of the max offset (messages ever put).
        put_tps: ``TOPIC_PUT_NUMS`` per second over the last minute.
        put_24h: messages put in the last 24 hours (``statsAll``'s InMsg24Hour).
        last_update_ms: store time of the newest message (0: none).
    """

    message_count: int = 0
    max_offset_sum: int = 0
    put_tps: float = 0.0
    put_24h: int = 0
    last_update_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON property map."""
        return {
            "lastUpdateTimestamp": self.last_update_ms,
            "maxOffsetSum": self.max_offset_sum,
            "messageCount": self.message_count,
            "put24h": self.put_24h,
            "putTps": self.put_tps,
        }

    @classmethod
    def from_json(cls, obj: Any, what: str) -> TopicSummary:
        """Build from parsed JSON."""
        obj = as_object(obj, what)
        return cls(
            get_int(obj, "messageCount", what),
            get_int(obj, "maxOffsetSum", what),
            get_float(obj, "putTps", what),
            get_int(obj, "put24h", what),
            get_int(obj, "lastUpdateTimestamp", what),
        )


class GroupSummary(NamedTuple):
    """One consumer group on one broker: its settings, online clients and progress (a
    NamedTuple: 10,000 of them are built per request).

    Attributes:
        client_count: online consumers of the group connected to this broker.
        client_ids: their client ids (at most a few, for the list view).
        consume_type: ``CONSUME_ACTIVELY``/``CONSUME_PASSIVELY`` ("" when offline).
        message_model: ``CLUSTERING``/``BROADCASTING`` ("" when offline).
        min_version: the lowest client version number online (0 when offline).
        diff: lag, sum over its queues of broker offset - consumer offset.
        inflight: pulled but not committed, sum of pull offset - consumer offset.
        consume_tps: ``GROUP_GET_NUMS`` per second over the last minute, over its topics.
        topics: the topics it has offsets for or subscribes to.
        last_consume_ms: store time of the last message it committed (0: none).
        orderly: ``consumeMessageOrderly`` of its config.
        broadcast_enable: ``consumeBroadcastEnable``.
        consume_enable: ``consumeEnable``.
        retry_max_times: ``retryMaxTimes``.
        retry_queue_nums: ``retryQueueNums``.
    """

    client_count: int = 0
    client_ids: tuple[str, ...] = ()
    consume_type: str = ""
    message_model: str = ""
    min_version: int = 0
    diff: int = 0
    inflight: int = 0
    consume_tps: float = 0.0
    topics: tuple[str, ...] = ()
    last_consume_ms: int = 0
    orderly: bool = False
    broadcast_enable: bool = True
    consume_enable: bool = True
    retry_max_times: int = 16
    retry_queue_nums: int = 1

    def to_json(self) -> dict[str, Any]:
        """JSON property map; fields at their defaults are left out (10,000 idle groups
        cost a few bytes each)."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value, default in zip(_GROUP_KEYS, self, _GROUP_DEFAULT_VALUES, strict=True)
            if value != default
        }

    @classmethod
    def from_json(cls, obj: Any, what: str) -> GroupSummary:
        """Build from parsed JSON (absent fields take their defaults)."""
        obj = as_object(obj, what)
        values: dict[str, Any] = {}
        for name, key in _GROUP_FIELDS:
            if key in obj:
                values[name] = _typed(obj[key], _GROUP_DEFAULTS[name], f"{what}.{key}")
        return cls(**values)


_GROUP_FIELDS = (
    ("client_count", "clientCount"), ("client_ids", "clientIds"),
    ("consume_type", "consumeType"), ("message_model", "messageModel"),
    ("min_version", "minVersion"), ("diff", "diff"), ("inflight", "inflight"),
    ("consume_tps", "consumeTps"), ("topics", "topics"),
    ("last_consume_ms", "lastConsumeTimestamp"), ("orderly", "consumeMessageOrderly"),
    ("broadcast_enable", "consumeBroadcastEnable"), ("consume_enable", "consumeEnable"),
    ("retry_max_times", "retryMaxTimes"), ("retry_queue_nums", "retryQueueNums"),
)  # fmt: skip
_GROUP_DEFAULTS: dict[str, Any] = GroupSummary()._asdict()
_GROUP_DEFAULT_VALUES = tuple(GroupSummary())
_GROUP_KEYS = tuple(key for _, key in _GROUP_FIELDS)
assert tuple(name for name, _ in _GROUP_FIELDS) == GroupSummary._fields


def _typed(value: Any, default: Any, what: str) -> Any:
    """``value`` checked against the type of ``default`` (lists become tuples of str)."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise RemoteProtocolError(f"{what}: unexpected value {value!r}")


def _encode_table(broker_addr: str, table: dict[str, Any]) -> bytes:
    return fastjson.dumps(
        {"brokerAddr": broker_addr, "table": {k: v.to_json() for k, v in table.items()}}
    )


def _decode_table(body: bytes, what: str, row: Callable[[Any, str], R]) -> tuple[str, dict[str, R]]:
    obj = parse_object(body, what)
    table = {str(k): row(v, f"{what}[{k}]") for k, v in get_object(obj, "table", what).items()}
    return get_str(obj, "brokerAddr", what), table


@dataclass(slots=True)
class TopicSummaryTable:
    """ARIANE_GET_TOPIC_SUMMARY body: topic -> its summary on the answering broker."""

    broker_addr: str = ""
    table: dict[str, TopicSummary] = field(default_factory=dict)

    def encode(self) -> bytes:
        """Body bytes."""
        return _encode_table(self.broker_addr, self.table)

    @classmethod
    def decode(cls, body: bytes) -> TopicSummaryTable:
        """Parse body bytes."""
        return cls(*_decode_table(body, "TopicSummaryTable", TopicSummary.from_json))


@dataclass(slots=True)
class GroupSummaryTable:
    """ARIANE_GET_GROUP_SUMMARY body: group -> its summary on the answering broker."""

    broker_addr: str = ""
    table: dict[str, GroupSummary] = field(default_factory=dict)

    def encode(self) -> bytes:
        """Body bytes."""
        return _encode_table(self.broker_addr, self.table)

    @classmethod
    def decode(cls, body: bytes) -> GroupSummaryTable:
        """Parse body bytes."""
        return cls(*_decode_table(body, "GroupSummaryTable", GroupSummary.from_json))
