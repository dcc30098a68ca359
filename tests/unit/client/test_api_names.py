"""Issue 20 item 3: the names a RocketMQ user types exist (no sockets)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

import ariane.client as client
from ariane.client.config import ClientConfig
from ariane.client.message import (
    LocalTransactionState,
    Message,
    MessageQueue,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from ariane.common.clock import ManualClock
from tests.unit.client.fakes import install, run

ASYNC_CLASSES = [
    client.Producer,
    client.TransactionProducer,
    client.PushConsumer,
    client.PullConsumer,
    client.SimpleConsumer,
    client.Admin,
]
SYNC_CLASSES = [
    client.SyncProducer,
    client.SyncTransactionProducer,
    client.SyncPushConsumer,
    client.SyncPullConsumer,
    client.SyncSimpleConsumer,
    client.SyncAdmin,
]


@pytest.mark.parametrize("cls", ASYNC_CLASSES, ids=lambda c: c.__name__)
def test_every_asyncio_client_has_close_and_shutdown(cls: type) -> None:
    assert inspect.iscoroutinefunction(cls.close)
    assert inspect.iscoroutinefunction(cls.shutdown)


@pytest.mark.parametrize("cls", SYNC_CLASSES, ids=lambda c: c.__name__)
def test_every_blocking_client_has_close_and_shutdown(cls: type) -> None:
    assert callable(cls.close)
    assert not inspect.iscoroutinefunction(cls.close)
    assert callable(cls.shutdown)
    assert not inspect.iscoroutinefunction(cls.shutdown)


def test_shutdown_closes() -> None:
    async def go() -> tuple[bool, bool]:
        config = ClientConfig(namesrv_addr="127.0.0.1:9876", instance_name="names")
        producer = client.Producer("names_pg", client_config=config)
        await producer.start()
        await producer.shutdown()
        consumer = client.PushConsumer("names_cg", client_config=config)
        consumer.subscribe("T", "*")
        await consumer.shutdown()  # never started: nothing to do, no error
        return producer._closed, consumer._closed

    assert asyncio.run(go()) == (True, True)


def test_transaction_send_result_is_a_send_result_with_the_local_state() -> None:
    clock = ManualClock()
    config = ClientConfig(namesrv_addr="127.0.0.1:9876", clock=clock)
    producer = client.TransactionProducer(
        "TXN", checker=lambda m: LocalTransactionState.COMMIT_MESSAGE, client_config=config
    )
    install(producer, clock, {"a": "127.0.0.1:1001"})
    result = run(
        lambda: producer.send_in_transaction(
            Message("T", b"x"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE
        )
    )
    assert isinstance(result, SendResult)
    assert result.status is SendStatus.SEND_OK
    assert result.ok
    assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    assert result.message_queue.topic == "T"
    assert result.send_result is result  # the older spelling still works


def test_transaction_send_result_copies_every_field() -> None:
    base = SendResult(
        SendStatus.FLUSH_DISK_TIMEOUT,
        "uniq",
        "offset-id",
        MessageQueue("T", "b", 3),
        17,
        transaction_id="tx",
        region_id="R",
        trace_on=False,
    )
    tx = TransactionSendResult.of(base, LocalTransactionState.ROLLBACK_MESSAGE)
    assert (tx.status, tx.msg_id, tx.offset_msg_id, tx.message_queue, tx.queue_offset) == (
        SendStatus.FLUSH_DISK_TIMEOUT,
        "uniq",
        "offset-id",
        MessageQueue("T", "b", 3),
        17,
    )
    assert (tx.transaction_id, tx.region_id, tx.trace_on) == ("tx", "R", False)
    assert not tx.ok
    assert tx.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
