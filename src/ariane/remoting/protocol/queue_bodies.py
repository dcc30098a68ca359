"""QUERY_CONSUME_QUEUE bodies (RocketMQ ``QueryConsumeQueueResponseBody`` and
``ConsumeQueueData``): raw ConsumeQueue entries of one queue, for ``mqadmin queryCq``.

JSON keys as fastjson writes the Java beans: ``queueData`` entries have ``physicOffset``,
``physicSize``, ``tagsCode``, ``eval`` (whether the given group's filter matches),
``extendDataJson``, ``bitMap`` and ``msg`` (a note, e.g. a missing record); the body adds
``subscriptionData``, ``filterData`` (a text), ``maxQueueIndex`` and ``minQueueIndex``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_bool,
    get_int,
    get_list,
    get_object,
    get_opt_str,
    parse_object,
)
from ariane.remoting.protocol.client_bodies import SubscriptionData

__all__ = ["ConsumeQueueData", "QueryConsumeQueueResponseBody"]

_WHAT = "QueryConsumeQueueResponseBody"


@dataclass(slots=True)
class ConsumeQueueData:
    """One ConsumeQueue entry."""

    physic_offset: int
    physic_size: int
    tags_code: int
    eval: bool = False
    extend_data_json: str | None = None
    bit_map: str | None = None
    msg: str | None = None

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (absent strings left out, as fastjson does)."""
        out: dict[str, Any] = {
            "eval": self.eval,
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
        }
        for key, value in (
            ("bitMap", self.bit_map),
            ("extendDataJson", self.extend_data_json),
            ("msg", self.msg),
        ):
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, obj: dict[Any, Any]) -> ConsumeQueueData:
        """Parse one entry."""
        what = "ConsumeQueueData"
        return cls(
            physic_offset=get_int(obj, "physicOffset", what),
            physic_size=get_int(obj, "physicSize", what),
            tags_code=get_int(obj, "tagsCode", what),
            eval=get_bool(obj, "eval", what),
            extend_data_json=get_opt_str(obj, "extendDataJson", what),
            bit_map=get_opt_str(obj, "bitMap", what),
            msg=get_opt_str(obj, "msg", what),
        )


@dataclass(slots=True)
class QueryConsumeQueueResponseBody:
    """The answer to QUERY_CONSUME_QUEUE."""

    max_queue_index: int = 0
    min_queue_index: int = 0
    queue_data: list[ConsumeQueueData] = field(default_factory=list)
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None

    def encode(self) -> bytes:
        """Body bytes."""
        out: dict[str, Any] = {
            "maxQueueIndex": self.max_queue_index,
            "minQueueIndex": self.min_queue_index,
            "queueData": [q.to_json() for q in self.queue_data],
        }
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_json()
        if self.filter_data is not None:
            out["filterData"] = self.filter_data
        return fastjson.dumps(out)

    @classmethod
    def decode(cls, body: bytes) -> QueryConsumeQueueResponseBody:
        """Parse body bytes.

        Raises:
            RemoteProtocolError: not this body.
        """
        obj = parse_object(body, _WHAT)
        sub = get_object(obj, "subscriptionData", _WHAT)
        return cls(
            max_queue_index=get_int(obj, "maxQueueIndex", _WHAT),
            min_queue_index=get_int(obj, "minQueueIndex", _WHAT),
            queue_data=[
                ConsumeQueueData.from_json(as_object(q, _WHAT))
                for q in get_list(obj, "queueData", _WHAT)
            ],
            subscription_data=SubscriptionData.from_json(sub) if sub else None,
            filter_data=get_opt_str(obj, "filterData", _WHAT),
        )
