"""PushConsumer pieces without sockets: settings checks and the send-back fallback."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from ariane.client import Message, MessageSelector, PushConsumer
from ariane.client.errors import ClientStateError
from ariane.common import properties as props
from ariane.common.message import MessageExt
from ariane.errors import ConnectError, InvalidArgumentError


@dataclass
class FakeProducer:
    sent: list[Message] = field(default_factory=list)

    async def send(self, msg: Message) -> None:
        self.sent.append(msg)


@dataclass
class FakeApi:
    fail: bool = True
    calls: list[tuple[str, int, int | None]] = field(default_factory=list)

    async def consumer_send_message_back(
        self, addr: str, msg: MessageExt, group: str, delay: int, **kw: Any
    ) -> None:
        self.calls.append((addr, delay, kw.get("max_reconsume_times")))
        if self.fail:
            raise ConnectError("broker gone")


@dataclass
class FakeInstance:
    api: FakeApi = field(default_factory=FakeApi)
    producer: FakeProducer = field(default_factory=FakeProducer)

    def find_broker_addr_in_publish(self, name: str) -> str | None:
        return "10.0.0.1:10911" if name == "broker-a" else None

    async def inner_producer(self, create: object) -> FakeProducer:
        return self.producer


def _consumer(**kw: Any) -> tuple[PushConsumer, FakeInstance]:
    consumer = PushConsumer("cg", namesrv_addr="127.0.0.1:9876", **kw)
    fake = FakeInstance()
    consumer._instance = fake  # type: ignore[assignment]
    return consumer, fake


def test_send_back_goes_to_the_brokers_master_with_the_limit() -> None:
    consumer, fake = _consumer(max_reconsume_times=5)
    fake.api.fail = False
    msg = MessageExt("T", b"x", reconsume_times=1)
    assert asyncio.run(consumer.send_message_back(msg, 0, "broker-a"))
    assert fake.api.calls == [("10.0.0.1:10911", 0, 5)]
    assert fake.producer.sent == []


def test_failed_send_back_falls_back_to_the_retry_topic() -> None:
    consumer, fake = _consumer()
    msg = MessageExt(
        "Orders", b"body", flag=7, properties={"UNIQ_KEY": "ID1", "k": "v", "TRAN_MSG": "true"},
        reconsume_times=2,
    )  # fmt: skip
    assert asyncio.run(consumer.send_message_back(msg, 0, "broker-a"))
    (retry,) = fake.producer.sent
    assert retry.topic == "%RETRY%cg"
    assert retry.body == b"body"
    assert retry.flag == 7
    p = retry.properties
    assert p["k"] == "v"
    assert props.TRANSACTION_PREPARED not in p
    assert p[props.RETRY_TOPIC] == "Orders"
    assert p[props.ORIGIN_MESSAGE_ID] == "ID1"
    assert p[props.RECONSUME_TIME] == "3"
    assert p[props.MAX_RECONSUME_TIMES] == "16"
    assert p[props.DELAY] == "5"  # 3 + reconsumeTimes, as the broker would pick


def test_settings_are_checked_like_java() -> None:
    with pytest.raises(InvalidArgumentError):
        PushConsumer("DEFAULT_CONSUMER", namesrv_addr="127.0.0.1:9876")
    with pytest.raises(InvalidArgumentError):
        PushConsumer("cg", namesrv_addr="127.0.0.1:9876", consume_message_batch_max_size=0)
    with pytest.raises(InvalidArgumentError):
        PushConsumer("cg", namesrv_addr="127.0.0.1:9876", pull_threshold_for_queue=70_000)
    with pytest.raises(InvalidArgumentError):
        PushConsumer("cg", namesrv_addr="127.0.0.1:9876", consume_timestamp="yesterday")
    with pytest.raises(InvalidArgumentError):
        PushConsumer(
            "cg",
            namesrv_addr="127.0.0.1:9876",
            broker_suspend_max_time_ms=30_000,
            consumer_pull_timeout_ms=20_000,
        )
    with pytest.raises(InvalidArgumentError):
        MessageSelector.by_sql("  ")


def test_start_needs_a_listener_and_a_subscription() -> None:
    consumer = PushConsumer("cg", namesrv_addr="127.0.0.1:9876")
    with pytest.raises(ClientStateError):
        asyncio.run(consumer.start())
    consumer.register_message_listener(lambda msgs, ctx: None)
    with pytest.raises(ClientStateError):
        asyncio.run(consumer.start())
    consumer.subscribe("T", "a || b")
    sd = consumer.subscriptions["T"]
    assert sd.tags_set == ["a", "b"]
    assert sd.sub_version > 0
