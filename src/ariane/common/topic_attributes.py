"""Topic attributes and message types (RocketMQ 5 ``TopicAttributes``, ``AttributeUtil``,
``AttributeParser``, ``TopicMessageType``): pure code shared by the broker, the proxy and the
tools.

How it works: a topic's attributes are a string map in its ``TopicConfig``. Administrators
change them with a modification string ``"+key=value,+key2=value2,-key3"``: ``+`` adds or
updates, ``-`` removes (not when creating). Only the attributes RocketMQ 5 knows are accepted:
``message.type`` (NORMAL, FIFO, DELAY, TRANSACTION, MIXED; changeable), ``queue.type``
(SimpleCQ, BatchCQ) and ``cleanup.policy`` (DELETE, COMPACTION), both fixed at creation, and
``reserve.time`` (ms, -1 = the broker's default). MIXED is refused unless the broker allows it
(``enableMixedMessageType``).

A message's type comes from its properties (``TRAN_MSG=true``: TRANSACTION; a delay level or a
timer property: DELAY; a message group ``__SHARDINGKEY``: FIFO; else NORMAL). A topic accepts
messages of its ``message.type`` (NORMAL when it has none); a MIXED topic accepts all.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ariane.common.properties import (
    DELAY,
    SHARDING_KEY,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TRANSACTION_PREPARED,
)
from ariane.errors import InvalidArgumentError

__all__ = [
    "MESSAGE_TYPE",
    "TOPIC_ATTRIBUTES",
    "TopicMessageType",
    "alter_attributes",
    "check_message_type",
    "message_type_of",
    "topic_message_type",
]

MESSAGE_TYPE = "message.type"


class TopicMessageType(enum.Enum):
    """``TopicMessageType``."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@dataclass(frozen=True, slots=True)
class _Attribute:
    name: str
    changeable: bool
    values: frozenset[str] | None = None
    low: int = 0
    high: int = 0

    def check(self, value: str) -> None:
        if self.values is not None:
            if value not in self.values:
                raise InvalidArgumentError(
                    f"value of {self.name} must be one of {sorted(self.values)}, got {value!r}"
                )
            return
        try:
            number = int(value)
        except ValueError:
            raise InvalidArgumentError(
                f"value of {self.name} must be a number: {value!r}"
            ) from None
        if not self.low <= number <= self.high:
            raise InvalidArgumentError(f"value of {self.name} must be in [{self.low}, {self.high}]")


#: ``TopicAttributes.ALL``.
TOPIC_ATTRIBUTES: dict[str, _Attribute] = {
    a.name: a
    for a in (
        _Attribute("queue.type", False, frozenset({"BatchCQ", "SimpleCQ"})),
        _Attribute("cleanup.policy", False, frozenset({"DELETE", "COMPACTION"})),
        _Attribute(MESSAGE_TYPE, True, frozenset(t.value for t in TopicMessageType)),
        _Attribute("reserve.time", True, None, -1, 2**63 - 1),
    )
}


def alter_attributes(
    current: Mapping[str, str],
    modification: str | None,
    *,
    create: bool,
    enable_mixed: bool = False,
) -> dict[str, str]:
    """``AttributeUtil.alterCurrentAttributes``: apply ``"+k=v,-k2"`` to ``current``.

    Args:
        current: the topic's attributes now (empty when it is created).
        modification: the modification string (None or "" changes nothing).
        create: the topic is being created (only ``+`` entries are allowed).
        enable_mixed: accept ``message.type=MIXED``.

    Raises:
        InvalidArgumentError: a malformed entry, an unknown key, a duplicate key, a value out
            of its set, a change of an attribute fixed at creation, the removal of a missing
            key, or MIXED when not enabled.
    """
    out = dict(current)
    if not modification:
        return out
    seen: set[str] = set()
    for raw in modification.split(","):
        entry = raw.strip()
        if not entry:
            continue
        sign, body = entry[0], entry[1:]
        key, eq, value = body.partition("=")
        if sign not in "+-" or not key or "+" in key or "-" in key:
            raise InvalidArgumentError(f"bad attribute {entry!r}: expected +key=value or -key")
        if key in seen:
            raise InvalidArgumentError(f"attribute {key} given twice")
        seen.add(key)
        attribute = TOPIC_ATTRIBUTES.get(key)
        if attribute is None:
            raise InvalidArgumentError(
                f"unsupported attribute {key!r}; known: {sorted(TOPIC_ATTRIBUTES)}"
            )
        if sign == "-":
            if create or eq:
                raise InvalidArgumentError(f"bad attribute {entry!r}: only +key=value on create")
            if key not in out:
                raise InvalidArgumentError(f"attempt to delete a nonexistent attribute: {key}")
            if not attribute.changeable:
                raise InvalidArgumentError(f"attribute {key} cannot be changed after creation")
            del out[key]
            continue
        if not eq:
            raise InvalidArgumentError(f"bad attribute {entry!r}: expected +key=value")
        attribute.check(value)
        if key == MESSAGE_TYPE and value == TopicMessageType.MIXED.value and not enable_mixed:
            raise InvalidArgumentError(
                "MIXED message type is not supported (enableMixedMessageType=false)"
            )
        if not create and not attribute.changeable and out.get(key) != value:
            raise InvalidArgumentError(f"attribute {key} cannot be changed after creation")
        out[key] = value
    return out


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """``TopicMessageType.parseFromMessageProperty``: the type a message is sent as."""
    if properties.get(TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if (
        DELAY in properties
        or TIMER_DELIVER_MS in properties
        or TIMER_DELAY_SEC in properties
        or TIMER_DELAY_MS in properties
    ):
        return TopicMessageType.DELAY
    if SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def topic_message_type(attributes: Mapping[str, str] | None) -> TopicMessageType:
    """``TopicConfig.getTopicMessageType``: NORMAL without the attribute."""
    value = (attributes or {}).get(MESSAGE_TYPE)
    if not value:
        return TopicMessageType.NORMAL
    try:
        return TopicMessageType(value.upper())
    except ValueError:
        return TopicMessageType.UNSPECIFIED


def check_message_type(expected: TopicMessageType, actual: TopicMessageType) -> str | None:
    """``DefaultTopicMessageTypeValidator``: None when a topic of type ``expected`` accepts a
    message of type ``actual``, else the refusal's text."""
    if expected is TopicMessageType.MIXED or expected is actual:
        return None
    return (
        f"TopicMessageType validate failed, the expected type is {expected.value}, "
        f"but actual type is {actual.value}"
    )
