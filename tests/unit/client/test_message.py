"""The public Message type and results."""

from __future__ import annotations

import pytest

from ariane.client.message import LocalTransactionState, Message, SendResult, SendStatus
from ariane.common.message import Message as CommonMessage
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.client_bodies import MessageQueue


def test_keyword_conveniences_become_properties() -> None:
    msg = Message(
        "T",
        b"body",
        tags="TagA",
        keys=["a", "", "b"],
        properties={"user": "1"},
        delay_level=3,
        wait_store_msg_ok=False,
        flag=9,
    )
    assert isinstance(msg, CommonMessage)
    assert msg.properties == {
        "user": "1",
        "TAGS": "TagA",
        "KEYS": "a b",
        "DELAY": "3",
        "WAIT": "false",
    }
    assert (msg.tags, msg.keys, msg.delay_level, msg.flag) == ("TagA", ["a", "b"], 3, 9)


def test_setters_remove_when_cleared() -> None:
    msg = Message("T", b"x", tags="A", keys="k", delay_level=2)
    msg.tags = None
    msg.keys = []
    msg.delay_level = 0
    assert msg.properties == {}
    with pytest.raises(InvalidArgumentError):
        msg.delay_level = -1


@pytest.mark.parametrize(("name", "value"), [("", "v"), ("n", ""), ("a\x01", "v"), ("a", "v\x02")])
def test_put_property_refuses_what_would_corrupt_the_encoding(name: str, value: str) -> None:
    with pytest.raises(InvalidArgumentError):
        Message("T", b"x").put_property(name, value)


def test_results() -> None:
    result = SendResult(SendStatus.SEND_OK, "id", "off", MessageQueue("T", "b", 0), 5)
    assert result.ok
    assert LocalTransactionState.COMMIT_MESSAGE.sys_flag == 8
    assert LocalTransactionState.ROLLBACK_MESSAGE.sys_flag == 12
    assert LocalTransactionState.UNKNOW.sys_flag == 0
