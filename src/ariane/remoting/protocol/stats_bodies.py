"""Bodies of the broker statistics requests: VIEW_BROKER_STATS_DATA (315) answers
``BrokerStatsData`` (``{statsMinute, statsHour, statsDay}``, each a ``BrokerStatsItem``
``{sum, tps, avgpt}``); GET_BROKER_CONSUME_STATS (317) answers ``ConsumeStatsList``
(``{consumeStatsList: [{group: [ConsumeStats]}], brokerAddr, totalDiff, totalInflightDiff}``).

The stats names (``statsName`` of VIEW_BROKER_STATS_DATA) are RocketMQ's
``BrokerStatsManager`` constants; keys are ``topic`` (``TOPIC_PUT_*``), ``topic@group``
(``GROUP_GET_NUMS``/``SIZE``, ``SNDBCK_PUT_NUMS``), ``queueId@topic@group``
(``GROUP_GET_LATENCY``) and the cluster name (``BROKER_*``). Decoders raise only
``RemoteProtocolError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_float,
    get_int,
    get_list,
    get_str,
    parse_object,
)
from ariane.remoting.protocol.admin_bodies import ConsumeStats

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_LATENCY",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "STATS_NAMES",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStatsData",
    "BrokerStatsItem",
    "ConsumeStatsList",
]

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
#: Every stats name a broker answers VIEW_BROKER_STATS_DATA for.
STATS_NAMES = (
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
    BROKER_PUT_NUMS, BROKER_GET_NUMS, GROUP_GET_LATENCY,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window: how much the value grew (``sum``), per second (``tps``) and per call
    (``avgpt``)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}

    @classmethod
    def from_json(cls, obj: Any, what: str) -> BrokerStatsItem:
        """Build from parsed JSON (null gives zeros, as Java's defaults)."""
        if obj is None:
            return cls()
        obj = as_object(obj, what)
        return cls(
            get_int(obj, "sum", what), get_float(obj, "tps", what), get_float(obj, "avgpt", what)
        )


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA body."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(
            {
                "statsDay": self.stats_day.to_json(),
                "statsHour": self.stats_hour.to_json(),
                "statsMinute": self.stats_minute.to_json(),
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> BrokerStatsData:
        """Parse body bytes."""
        what = "BrokerStatsData"
        obj = parse_object(body, what)
        return cls(
            BrokerStatsItem.from_json(obj.get("statsMinute"), f"{what}.statsMinute"),
            BrokerStatsItem.from_json(obj.get("statsHour"), f"{what}.statsHour"),
            BrokerStatsItem.from_json(obj.get("statsDay"), f"{what}.statsDay"),
        )


@dataclass(slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS body: per subscription group, one ``ConsumeStats`` per topic.

    Attributes:
        consume_stats_list: ``[{group: [ConsumeStats, ...]}, ...]``, one map per group.
        broker_addr: the answering broker.
        total_diff: sum over every queue of ``brokerOffset - consumerOffset``.
        total_inflight_diff: sum over every queue of ``pullOffset - consumerOffset`` (>= 0).
    """

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    broker_addr: str = ""
    total_diff: int = 0
    total_inflight_diff: int = 0

    def encode(self) -> bytes:
        """Body bytes (MessageQueue keys in fastjson's object form)."""
        return fastjson.dumps(
            {
                "brokerAddr": self.broker_addr,
                "consumeStatsList": [
                    {group: [s.to_json() for s in stats] for group, stats in entry.items()}
                    for entry in self.consume_stats_list
                ],
                "totalDiff": self.total_diff,
                "totalInflightDiff": self.total_inflight_diff,
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> ConsumeStatsList:
        """Parse body bytes."""
        what = "ConsumeStatsList"
        obj = parse_object(body, what)
        entries: list[dict[str, list[ConsumeStats]]] = []
        for i, raw in enumerate(get_list(obj, "consumeStatsList", what)):
            entry = as_object(raw, f"{what}.consumeStatsList[{i}]")
            groups: dict[str, list[ConsumeStats]] = {}
            for group, stats in entry.items():
                if not isinstance(stats, list):
                    raise RemoteProtocolError(f"{what}: stats of {group!r} must be a list")
                groups[str(group)] = [ConsumeStats.from_json(s) for s in stats]
            entries.append(groups)
        return cls(
            entries,
            get_str(obj, "brokerAddr", what),
            get_int(obj, "totalDiff", what),
            get_int(obj, "totalInflightDiff", what),
        )
