"""The JSON body of BATCH_ACK_MESSAGE (RocketMQ 5 ``BatchAckMessageRequestBody`` / ``BatchAck``).

``{"brokerName": "b", "acks": [{"c": group, "t": original topic, "r": retry flag,
"so": checkpoint start offset, "q": queue id, "rq": revive queue, "pt": pop time,
"it": invisible time, "b": Base64 bit set}...]}``; bit i of ``b`` acks queue offset
``so + i``. Readers accept the long property names too (``consumerGroup``, ``topic``,
``retry``, ``startOffset``, ``queueId``, ``reviveQueueId``, ``popTime``, ``invisibleTime``,
``bitSet``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ariane.common.pop import decode_bitset, encode_bitset
from ariane.errors import InvalidArgumentError, RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_int,
    get_list,
    get_str,
    parse_object,
    pick,
)

__all__ = ["BatchAck", "BatchAckMessageRequestBody"]

_WHAT = "BatchAck"


@dataclass(frozen=True, slots=True)
class BatchAck:
    """Acks of several messages that share one checkpoint."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: tuple[int, ...]

    @property
    def offsets(self) -> list[int]:
        """The queue offsets acked."""
        return [self.start_offset + i for i in self.bits]

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (short names)."""
        return {
            "c": self.consumer_group,
            "t": self.topic,
            "r": self.retry,
            "so": self.start_offset,
            "q": self.queue_id,
            "rq": self.revive_queue_id,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "b": encode_bitset(list(self.bits)),
        }

    @classmethod
    def from_json(cls, value: Any) -> BatchAck:
        """Build from parsed JSON.

        Raises:
            RemoteProtocolError: a property has the wrong type or the bit set is not Base64.
        """
        obj = as_object(value, _WHAT)
        norm = {
            "c": pick(obj, "c", "consumerGroup"),
            "t": pick(obj, "t", "topic"),
            "r": pick(obj, "r", "retry"),
            "so": pick(obj, "so", "startOffset"),
            "q": pick(obj, "q", "queueId"),
            "rq": pick(obj, "rq", "reviveQueueId"),
            "pt": pick(obj, "pt", "popTime"),
            "it": pick(obj, "it", "invisibleTime"),
            "b": pick(obj, "b", "bitSet"),
        }
        try:
            bits = tuple(decode_bitset(get_str(norm, "b", _WHAT)))
        except InvalidArgumentError as exc:
            raise RemoteProtocolError(f"{_WHAT}.b: {exc}") from None
        return cls(
            get_str(norm, "c", _WHAT),
            get_str(norm, "t", _WHAT),
            get_str(norm, "r", _WHAT, "0"),
            get_int(norm, "so", _WHAT),
            get_int(norm, "q", _WHAT),
            get_int(norm, "rq", _WHAT),
            get_int(norm, "pt", _WHAT),
            get_int(norm, "it", _WHAT),
            bits,
        )


@dataclass(frozen=True, slots=True)
class BatchAckMessageRequestBody:
    """The body of BATCH_ACK_MESSAGE (200151)."""

    broker_name: str = ""
    acks: list[BatchAck] = field(default_factory=list)

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(
            {"brokerName": self.broker_name, "acks": [a.to_json() for a in self.acks]}
        )

    @classmethod
    def decode(cls, data: bytes) -> BatchAckMessageRequestBody:
        """Parse a body.

        Raises:
            RemoteProtocolError: not a JSON object of this shape.
        """
        what = "BatchAckMessageRequestBody"
        obj = parse_object(data, what)
        return cls(
            get_str(obj, "brokerName", what),
            [BatchAck.from_json(a) for a in get_list(obj, "acks", what)],
        )
