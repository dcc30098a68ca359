"""Transactional messages end to end: commit, rollback, and unknown resolved by a check-back.

Needs the broker side of transactions (issue 4: half topic, END_TRANSACTION, the check
service). The broker is configured with RocketMQ's key names to check unresolved half
messages after one second.

"Nothing more happens" is shown by events, not by waiting: the broker's transaction check
commits its progress through the half queue (group ``CID_RMQ_SYS_TRANS``); once it has moved
past every half message, no half message can be checked or resolved again.
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
from tests.integration.client.conftest import run, wait_for_route
from tests.support import rpc
from tests.support.cluster import Cluster
from tests.support.polling import await_for, await_until

pytestmark = pytest.mark.integration

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
BROKER_CONF = {
    "transactionCheckInterval": 1000,
    "transactionTimeOut": 1000,
    "transactionCheckMax": 15,
}


@pytest.fixture(scope="module")
def tx_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("tx-cluster"))
    try:
        yield c.start(**BROKER_CONF)
    finally:
        c.stop()


async def _checks_settled(cluster: Cluster) -> None:
    await await_until(
        lambda: asyncio.to_thread(rpc.transaction_checks_settled, cluster.broker_addr()),
        timeout_s=30,
        what="the transaction check to pass every half message",
    )


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
            await _checks_settled(tx_cluster)  # nothing may resurrect it afterwards
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
            await _checks_settled(tx_cluster)
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
