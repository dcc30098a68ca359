"""Topic ``message.type`` through the dispatcher: attributes set and refused as RocketMQ 5's
broker does, and the (opt-in) remoting send check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ariane.client._selector import SelectMessageQueueByGroup, SendTarget
from ariane.client.message import Message, MessageQueue
from ariane.common.hashing import consistent_hash, java_string_hash
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.unit.broker.harness import Broker, run


def create(topic: str, attributes: str) -> h.CreateTopicRequestHeader:
    return h.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4, perm=6,
        topic_filter_type="SINGLE_TAG", attributes=attributes,
    )  # fmt: skip


def test_message_type_attribute_rules(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create("F", "+message.type=FIFO"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert b.c.topics.table["F"].attributes == {"message.type": "FIFO"}
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create("F", "+message.type=DELAY"))
        assert r.code == ResponseCode.SUCCESS
        assert b.c.topics.table["F"].attributes == {"message.type": "DELAY"}
        for bad, words in (
            ("+message.type=MIXED", "MIXED"),
            ("+message.type=SOMETIMES", "must be one of"),
            ("+no.such=1", "unsupported"),
        ):
            r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create("G", bad))
            assert r.code == ResponseCode.INVALID_PARAMETER
            assert words in (r.remark or "")
        assert "G" not in b.c.topics.table
        await b.stop()

    run(main())


def test_mixed_allowed_when_enabled(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, enable_mixed_message_type=True).start()
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create("M", "+message.type=MIXED"))
        assert r.code == ResponseCode.SUCCESS
        await b.stop()

    run(main())


def test_remoting_sends_checked_only_when_asked(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create("F", "+message.type=FIFO"))
        assert (await b.send("F", b"plain")).code == ResponseCode.SUCCESS  # RocketMQ's default
        b.c._apply(dataclasses.replace(b.c.config, enable_remoting_message_type_check=True))
        r = await b.send("F", b"plain")
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        assert r.remark == (
            "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
        )
        assert (await b.send("F", b"grouped", props={"__SHARDINGKEY": "g1"})).code == 0
        r = await b.send("F", b"timed", props={"TIMER_DELAY_SEC": "5", "__SHARDINGKEY": "g"})
        assert r.code == ResponseCode.MESSAGE_ILLEGAL  # a timer message is DELAY
        assert (await b.send("Untyped", b"n")).code == ResponseCode.SUCCESS  # NORMAL topic
        assert (await b.send("%RETRY%G", b"r", reconsume_times=1)).code == ResponseCode.SUCCESS
        await b.stop()

    run(main())


def test_message_group_picks_the_proxys_queue() -> None:
    msg = Message("T", b"x", message_group="order-42")
    assert msg.message_group == "order-42"
    assert msg.properties["__SHARDINGKEY"] == "order-42"
    target = SendTarget.for_message(msg, None, None, None, None)
    assert target is not None
    mqs = [MessageQueue("T", "broker-a", i) for i in range(8)]
    picked = SelectMessageQueueByGroup().select(mqs, msg, target.arg)
    assert picked.queue_id == consistent_hash(java_string_hash("order-42"), 8)
    assert SendTarget.for_message(Message("T", b"x"), None, None, None, None) is None
