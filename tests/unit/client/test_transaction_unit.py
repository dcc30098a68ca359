"""TransactionProducer without sockets: END_TRANSACTION contents and check-backs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ariane.client._transaction import TransactionProducer, call_user
from ariane.client.config import ClientConfig
from ariane.client.message import LocalTransactionState, Message, MessageExt
from ariane.common.clock import ManualClock
from ariane.common.msgid import decode_offset_msg_id
from ariane.remoting.protocol import headers as h
from tests.unit.client.fakes import FakeApi, install, run

BROKERS = {"a": "127.0.0.1:1001"}
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _tp(
    clock: ManualClock, checker: Any = lambda msg: COMMIT
) -> tuple[TransactionProducer, FakeApi]:
    config = ClientConfig(namesrv_addr="127.0.0.1:9876", clock=clock)
    producer = TransactionProducer("TXG", checker=checker, client_config=config)
    return producer, install(producer, clock, BROKERS)


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK, UNKNOW])
def test_end_transaction_reports_the_local_outcome_for_the_half_message(
    clock: ManualClock, state: LocalTransactionState
) -> None:
    producer, api = _tp(clock)
    seen: list[tuple[Message, object]] = []

    def local(msg: Message, arg: object) -> LocalTransactionState:
        seen.append((msg, arg))
        return state

    msg = Message("T", b"order", delay_level=3)
    result = run(lambda: producer.send_in_transaction(msg, local, "arg"))
    assert result.local_transaction_state is state
    assert seen == [(msg, "arg")]
    half = api.calls[0].request
    props = h.SendMessageRequestHeaderV2.from_ext_fields(half.ext_fields)
    assert props.sys_flag & 0x4
    assert "TRAN_MSG\x01true" in (props.properties or "")
    assert "PGROUP\x01TXG" in (props.properties or "")
    assert "DELAY" not in (props.properties or "")
    ((addr, end, remark),) = api.ends
    send = result.send_result
    assert addr == "127.0.0.1:1001"
    assert remark is None
    assert end.producer_group == "TXG"
    assert end.commit_or_rollback == state.sys_flag
    assert end.tran_state_table_offset == send.queue_offset
    assert end.commit_log_offset == decode_offset_msg_id(send.offset_msg_id).phys_offset
    assert end.msg_id == send.msg_id == msg.properties["UNIQ_KEY"]
    assert end.transaction_id == send.transaction_id
    assert not end.from_transaction_check


def test_a_raising_local_transaction_is_unknown_with_a_remark(clock: ManualClock) -> None:
    producer, api = _tp(clock)

    def local(msg: Message, arg: object) -> LocalTransactionState:
        raise RuntimeError("db down")

    result = run(lambda: producer.send_in_transaction(Message("T", b"x"), local))
    assert result.local_transaction_state is UNKNOW
    ((_, end, remark),) = api.ends
    assert end.commit_or_rollback == 0
    assert remark is not None
    assert "db down" in remark


def test_a_half_message_not_stored_ok_is_rolled_back_without_running_anything(
    clock: ManualClock,
) -> None:
    producer, api = _tp(clock)
    api.script["127.0.0.1:1001"] = [10]  # FLUSH_DISK_TIMEOUT
    ran: list[bool] = []
    result = run(
        lambda: producer.send_in_transaction(Message("T", b"x"), lambda m, a: ran.append(True))
    )
    assert not ran
    assert result.local_transaction_state is ROLLBACK
    assert api.ends[0][1].commit_or_rollback == 12


def test_async_local_transactions_and_none_results(clock: ManualClock) -> None:
    producer, _api = _tp(clock)

    async def local(msg: Message, arg: object) -> None:
        await asyncio.sleep(0)

    result = run(lambda: producer.send_in_transaction(Message("T", b"x"), local))
    assert result.local_transaction_state is UNKNOW


def _check_header() -> h.CheckTransactionStateRequestHeader:
    return h.CheckTransactionStateRequestHeader(
        tran_state_table_offset=17,
        commit_log_offset=4242,
        topic="T",
        msg_id="UNIQ1",
        transaction_id="TX1",
        offset_msg_id="7F00000100002A9F0000000000001092",
    )


def _half() -> MessageExt:
    return MessageExt("T", b"x", properties={"UNIQ_KEY": "UNIQ1", "PGROUP": "TXG"})


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK, UNKNOW])
def test_a_check_back_answers_with_the_checker_s_state(
    clock: ManualClock, state: LocalTransactionState
) -> None:
    threads: list[str] = []

    def checker(msg: MessageExt) -> LocalTransactionState:
        threads.append(threading.current_thread().name)
        assert msg.properties["__transactionId__"] == "TX1"
        return state

    producer, api = _tp(clock, checker)

    async def go() -> None:
        producer.check_transaction_state("127.0.0.1:1001", _half(), _check_header())
        await asyncio.gather(*producer._checks)

    run(go)
    ((addr, end, remark),) = api.ends
    assert addr == "127.0.0.1:1001"
    assert remark is None
    assert (end.producer_group, end.tran_state_table_offset, end.commit_log_offset) == (
        "TXG",
        17,
        4242,
    )
    assert (end.msg_id, end.transaction_id, end.commit_or_rollback) == (
        "UNIQ1",
        "TX1",
        state.sys_flag,
    )
    assert end.from_transaction_check
    assert threads
    assert threads[0] != threading.main_thread().name


def test_a_raising_checker_answers_unknown(clock: ManualClock) -> None:
    def checker(msg: MessageExt) -> LocalTransactionState:
        raise ValueError("nope")

    producer, api = _tp(clock, checker)

    async def go() -> None:
        producer.check_transaction_state("127.0.0.1:1001", _half(), _check_header())
        await asyncio.gather(*producer._checks)

    run(go)
    ((_, end, remark),) = api.ends
    assert end.commit_or_rollback == 0
    assert remark is not None
    assert "nope" in remark


def test_call_user_refuses_results_that_are_not_states() -> None:
    with pytest.raises(TypeError):
        asyncio.run(call_user(lambda: "COMMIT"))
