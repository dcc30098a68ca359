"""A transaction check-back across a broker crash, with the SDK's real ``TransactionProducer``.

Half messages are sent, one transaction is committed at once, two stay unknown; the broker is
SIGKILLed before its first check. After the restart the broker's check service asks the same
producer (re-registered by heartbeat) about the two unknown ones, the checker commits one and
rolls back the other. Then every half message has been passed by the check ("nothing more
happens" as an event, not a wait), the committed ones are visible exactly once and the rolled
back one never, and the directly committed one was never checked.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from ariane.client import (
    Admin,
    LocalTransactionState,
    Message,
    MessageExt,
    TransactionProducer,
)
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import create_topic, fast_config
from tests.support import rpc
from tests.support.cluster import Cluster
from tests.support.polling import await_until

pytestmark = pytest.mark.integration

TOPIC = "TxCrash"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


async def _query(admin: Admin, key: str) -> list[MessageExt]:
    try:
        return await admin.query_message(TOPIC, key)
    except Exception:  # not found (yet)
        return []


def test_check_back_across_a_broker_crash(fresh_cluster: Cluster) -> None:
    # the first check comes 3 s after a half message: the crash comes before it
    fresh_cluster.start(
        transactionCheckInterval=1000, transactionTimeOut=3000, transactionCheckMax=15
    )
    checked: list[str] = []
    lock = threading.Lock()
    answers = {"tx-commit-later": COMMIT, "tx-rollback-later": ROLLBACK}

    def checker(msg: MessageExt) -> LocalTransactionState:
        with lock:
            checked.append(msg.properties.get("KEYS", ""))
        return answers.get(msg.properties.get("KEYS", ""), UNKNOW)

    async def go() -> None:
        await create_topic(fresh_cluster, TOPIC, 2)
        producer = TransactionProducer(
            "txg_crash", checker=checker, client_config=fast_config(fresh_cluster, "txc")
        )
        async with producer, Admin(namesrv_addr=fresh_cluster.namesrv_addr) as admin:
            now = await producer.send_in_transaction(
                Message(TOPIC, b"now", keys="tx-commit-now"), lambda m, a: COMMIT
            )
            assert now.local_transaction_state is COMMIT
            for key in answers:
                r = await producer.send_in_transaction(
                    Message(TOPIC, key.encode(), keys=key), lambda m, a: UNKNOW
                )
                assert r.local_transaction_state is UNKNOW
            assert not checked, "checked before the crash: the test lost its point"
            await asyncio.to_thread(fresh_cluster.restart_broker, "broker-a", crash=True)
            await await_until(
                lambda: sorted(set(checked)) == sorted(answers), timeout_s=60, what="check-backs"
            )
            await await_until(
                lambda: asyncio.to_thread(
                    rpc.transaction_checks_settled, fresh_cluster.broker_addr()
                ),
                timeout_s=60,
                what="the transaction check to pass every half message",
            )
            await await_until(lambda: _query(admin, "tx-commit-later"), what="visible")
            for key, want in (("tx-commit-now", b"now"), ("tx-commit-later", b"tx-commit-later")):
                found = await _query(admin, key)
                assert [m.body for m in found] == [want], key
            assert await _query(admin, "tx-rollback-later") == []
        assert set(checked) == set(answers), "only the unknown transactions were checked"

    run(go())
