"""Transactional messages end to end: commit, rollback, and unknown resolved by a check-back.

Needs the broker side of transactions (issue 4: half topic, END_TRANSACTION, the check
service). The broker is configured with RocketMQ's key names to check unresolved half
messages after one second.

Until the broker stores half messages, every test here is an expected failure *of exactly
that kind*: the ``tx_cluster`` fixture asks the broker, and when it refuses transactional
sends (NO_PERMISSION, "not supported") each test is marked ``xfail(strict=True,
raises=SendError)``; the tests still run in full, any other failure still fails, and once the
broker supports transactions the mark disappears by itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from ariane.client import (
    Admin,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    SyncTransactionProducer,
    TransactionProducer,
)
from ariane.client.errors import SendError
from ariane.remoting.protocol.codes import ResponseCode
from tests.integration.client.conftest import run, wait_for_route
from tests.support import rpc
from tests.support.cluster import Cluster
from tests.support.polling import await_for

pytestmark = pytest.mark.integration

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
BROKER_CONF = {
    "transactionCheckInterval": 1000,
    "transactionTimeOut": 1000,
    "transactionCheckMax": 15,
}


def _broker_refuses_transactions(broker_addr: str) -> bool:
    half = rpc.send_message(
        broker_addr, "TxProbe", b"probe", properties="TRAN_MSG\x01true\x02PGROUP\x01probe\x02"
    )
    return half.code == ResponseCode.NO_PERMISSION and "not supported" in (half.remark or "")


@pytest.fixture(scope="module")
def tx_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, bool]]:
    c = Cluster(tmp_path_factory.mktemp("tx-cluster"))
    try:
        c.start(**BROKER_CONF)
        yield c, _broker_refuses_transactions(c.broker_addr())
    finally:
        c.stop()


@pytest.fixture
def tx_cluster(tx_broker: tuple[Cluster, bool], request: pytest.FixtureRequest) -> Cluster:
    cluster, refused = tx_broker
    if refused:
        request.applymarker(
            pytest.mark.xfail(
                reason="the broker does not store half messages yet (issue 4)",
                strict=True,
                raises=SendError,
            )
        )
    return cluster


async def _visible(admin: Admin, topic: str, key: str) -> list[MessageExt]:
    async def probe() -> list[MessageExt]:
        try:
            return await admin.query_message(topic, key)
        except Exception:
            return []

    return await await_for(probe, bool, timeout_s=30)


def test_commit_makes_the_message_visible(tx_cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            TransactionProducer(
                "txg_commit", checker=lambda m: COMMIT, namesrv_addr=tx_cluster.namesrv_addr
            ) as producer,
            Admin(namesrv_addr=tx_cluster.namesrv_addr) as admin,
        ):
            ran: list[str] = []

            async def local(msg: Message, arg: object) -> LocalTransactionState:
                ran.append(str(arg))
                return COMMIT

            msg = Message("TxCommit", b"paid", keys="tx-commit", properties={"k": "v"})
            result = await producer.send_in_transaction(msg, local, "order-1")
            assert ran == ["order-1"]
            assert result.send_result.ok
            assert result.local_transaction_state is COMMIT
            (stored,) = await _visible(admin, "TxCommit", "tx-commit")
            assert stored.body == b"paid"
            assert stored.msg_id == result.msg_id
            assert stored.properties["k"] == "v"
            assert stored.properties.get("TRAN_MSG") != "true"

    run(go())


def test_rollback_never_shows_the_message(tx_cluster: Cluster) -> None:
    checked: list[str] = []

    async def go() -> None:
        async with (
            TransactionProducer(
                "txg_rollback",
                checker=lambda m: checked.append(m.msg_id) or COMMIT,
                namesrv_addr=tx_cluster.namesrv_addr,
            ) as producer,
            Producer("pg_marker", namesrv_addr=tx_cluster.namesrv_addr) as plain,
            Admin(namesrv_addr=tx_cluster.namesrv_addr) as admin,
        ):
            result = await producer.send_in_transaction(
                Message("TxRollback", b"cancelled", keys="tx-rollback"), lambda m, a: ROLLBACK
            )
            assert result.local_transaction_state is ROLLBACK
            # a plain message sent afterwards becomes visible; the rolled back one never does
            await plain.send(Message("TxRollback", b"marker", keys="marker"))
            await _visible(admin, "TxRollback", "marker")
            await wait_for_route(admin, "TxRollback")
            await asyncio.sleep(3)  # several check intervals: nothing may resurrect it
            assert await admin.query_message("TxRollback", "tx-rollback") == []
            stats = await admin.topic_stats("TxRollback")
            assert sum(o.max_offset for o in stats.offset_table.values()) == 1
            assert result.msg_id not in checked

    run(go())


def test_unknown_is_resolved_by_the_checker(tx_cluster: Cluster) -> None:
    checked: list[MessageExt] = []
    called = threading.Event()

    def checker(msg: MessageExt) -> LocalTransactionState:
        checked.append(msg)
        called.set()
        return COMMIT

    async def go() -> None:
        async with (
            TransactionProducer(
                "txg_unknown", checker=checker, namesrv_addr=tx_cluster.namesrv_addr
            ) as producer,
            Admin(namesrv_addr=tx_cluster.namesrv_addr) as admin,
        ):
            result = await producer.send_in_transaction(
                Message("TxUnknown", b"maybe", keys="tx-unknown"), lambda m, a: UNKNOW
            )
            assert result.local_transaction_state is UNKNOW
            (stored,) = await _visible(admin, "TxUnknown", "tx-unknown")
            assert stored.body == b"maybe"
            assert called.is_set()
            assert checked[0].topic == "TxUnknown"
            assert checked[0].properties["UNIQ_KEY"] == result.msg_id

    run(go())


def test_unknown_then_rolled_back_by_the_checker_stays_invisible(tx_cluster: Cluster) -> None:
    called = threading.Event()

    def checker(msg: MessageExt) -> LocalTransactionState:
        called.set()
        return ROLLBACK

    async def go() -> None:
        async with (
            TransactionProducer(
                "txg_unknown_rb", checker=checker, namesrv_addr=tx_cluster.namesrv_addr
            ) as producer,
            Admin(namesrv_addr=tx_cluster.namesrv_addr) as admin,
        ):
            await producer.send_in_transaction(
                Message("TxUnknownRb", b"no", keys="tx-unknown-rb"), lambda m, a: UNKNOW
            )
            assert await await_for(lambda: asyncio.to_thread(called.wait, 0.2), bool, timeout_s=30)
            await asyncio.sleep(2)
            await wait_for_route(admin, "TxUnknownRb")
            assert await admin.query_message("TxUnknownRb", "tx-unknown-rb") == []

    run(go())


def test_blocking_transaction_producer_runs_the_local_transaction_in_the_caller_thread(
    tx_cluster: Cluster,
) -> None:
    threads: list[int] = []

    def local(msg: Message, arg: object) -> LocalTransactionState:
        threads.append(threading.get_ident())
        return COMMIT

    with SyncTransactionProducer(
        "txg_blocking", checker=lambda m: COMMIT, namesrv_addr=tx_cluster.namesrv_addr
    ) as producer:
        result = producer.send_in_transaction(Message("TxBlocking", b"x", keys="tx-b"), local)
    assert threads == [threading.get_ident()]
    assert result.local_transaction_state is COMMIT

    async def check() -> None:
        async with Admin(namesrv_addr=tx_cluster.namesrv_addr) as admin:
            (stored,) = await _visible(admin, "TxBlocking", "tx-b")
            assert stored.msg_id == result.msg_id

    run(check())
