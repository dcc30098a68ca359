"""Topic attributes (RocketMQ 5's AttributeUtil rules) and message types."""

from __future__ import annotations

import pytest

from ariane.common.topic_attributes import (
    TopicMessageType,
    alter_attributes,
    check_message_type,
    message_type_of,
    topic_message_type,
)
from ariane.errors import InvalidArgumentError


def test_alter_attributes_creates_updates_and_deletes() -> None:
    created = alter_attributes({}, "+message.type=FIFO,+queue.type=SimpleCQ", create=True)
    assert created == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    updated = alter_attributes(created, "+message.type=DELAY", create=False)
    assert updated == {"message.type": "DELAY", "queue.type": "SimpleCQ"}
    # re-sending an unchangeable attribute with its value is no change
    assert alter_attributes(updated, "+queue.type=SimpleCQ", create=False) == updated
    assert alter_attributes(updated, "-message.type", create=False) == {"queue.type": "SimpleCQ"}
    assert alter_attributes(updated, None, create=False) == updated
    assert alter_attributes({}, "+reserve.time=3600000", create=True) == {"reserve.time": "3600000"}


@pytest.mark.parametrize(
    ("current", "text", "create", "problem"),
    [
        ({}, "+message.type=WEIRD", True, "must be one of"),
        ({}, "+message.type=MIXED", True, "MIXED"),
        ({}, "+colour=red", True, "unsupported"),
        ({}, "-message.type", True, "only \\+key=value"),
        ({}, "message.type=FIFO", True, "expected"),
        ({}, "+message.type=FIFO,+message.type=NORMAL", True, "twice"),
        ({"message.type": "FIFO"}, "-queue.type", False, "nonexistent"),
        ({"queue.type": "SimpleCQ"}, "+queue.type=BatchCQ", False, "cannot be changed"),
        ({}, "+reserve.time=soon", True, "number"),
        ({}, "+message.type", True, "expected \\+key=value"),
    ],
)
def test_alter_attributes_refusals(
    current: dict[str, str], text: str, create: bool, problem: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        alter_attributes(current, text, create=create)


def test_mixed_when_enabled() -> None:
    assert alter_attributes({}, "+message.type=MIXED", create=True, enable_mixed=True) == {
        "message.type": "MIXED"
    }


def test_message_types_of_messages_and_topics() -> None:
    assert message_type_of({}) is TopicMessageType.NORMAL
    assert message_type_of({"__SHARDINGKEY": "g"}) is TopicMessageType.FIFO
    assert message_type_of({"TIMER_DELAY_MS": "5", "__SHARDINGKEY": "g"}) is TopicMessageType.DELAY
    assert message_type_of({"DELAY": "3"}) is TopicMessageType.DELAY
    assert message_type_of({"TRAN_MSG": "true", "DELAY": "3"}) is TopicMessageType.TRANSACTION
    assert topic_message_type(None) is TopicMessageType.NORMAL
    assert topic_message_type({"message.type": "fifo"}) is TopicMessageType.FIFO
    assert topic_message_type({"message.type": "??"}) is TopicMessageType.UNSPECIFIED
    assert check_message_type(TopicMessageType.MIXED, TopicMessageType.DELAY) is None
    assert check_message_type(TopicMessageType.FIFO, TopicMessageType.FIFO) is None
    assert check_message_type(TopicMessageType.FIFO, TopicMessageType.NORMAL) == (
        "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
    )
