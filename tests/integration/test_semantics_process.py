"""Delay levels and transactions in real broker processes: restarts and crashes (SIGKILL) in the
middle of delay delivery and of a transaction check never lose or repeat a delivery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ariane.common.properties import encode_properties
from ariane.common.record import decode_records
from ariane.common.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.cluster import Cluster
from tests.support.polling import wait_until
from tests.support.processes import ariane_command
from tests.support.rpc import (
    delays_drained,
    pull,
    request,
    send_message,
    transaction_checks_settled,
)
from tests.support.tx_producer import FakeTransactionProducer

pytestmark = pytest.mark.integration

FAST_LEVELS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop()


def everything(addr: str, topic: str, queues: int = 4) -> list[bytes]:
    """Every message of every queue of ``topic`` (pulled with a throw-away group)."""
    out: list[bytes] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            r = pull(addr, topic, "G_CHECK", queue_id=queue_id, offset=offset)
            if r.code != ResponseCode.SUCCESS:
                break
            msgs = decode_records(r.body or b"")
            out.extend(m.body for m in msgs)
            offset = int(r.ext_fields["nextBeginOffset"])
    return out


def count_delivered(addr: str, topic: str) -> int:
    total = 0
    for queue_id in range(4):
        r = request(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
        total += int(r.ext_fields.get("offset", "0"))
    return total


@pytest.mark.parametrize("crash", [True, False], ids=["sigkill", "sigterm"])
def test_restart_in_the_middle_of_delay_delivery(cluster: Cluster, crash: bool) -> None:
    # progress is written only every minute: a crash leaves it far behind the deliveries
    cluster.start(messageDelayLevel=FAST_LEVELS, flushDelayOffsetInterval=60_000)
    addr = cluster.broker_addr()
    n = 120
    for i in range(n):  # spread over ~1.2 s, due 1-2 s later: deliveries are under way below
        props = encode_properties({"DELAY": str(1 + i % 2)})
        r = send_message(addr, "Delayed", f"d{i}".encode(), queue_id=i % 4, properties=props)
        assert r.code == ResponseCode.SUCCESS, r.remark
        time.sleep(0.01)
    assert wait_until(lambda: count_delivered(addr, "Delayed") >= n // 4, 20, 0.01)
    assert count_delivered(addr, "Delayed") < n, "the restart should come mid-delivery"
    cluster.restart_broker(crash=crash)
    addr = cluster.broker_addr()
    assert wait_until(lambda: count_delivered(addr, "Delayed") >= n, 30)
    assert wait_until(lambda: delays_drained(addr), 30)  # nothing more can come
    got = Counter(everything(addr, "Delayed"))
    assert set(got) == {f"d{i}".encode() for i in range(n)}
    assert [b for b, c in got.items() if c > 1] == []


def test_delay_progress_is_persisted_and_served(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start(messageDelayLevel=FAST_LEVELS, flushDelayOffsetInterval=200)
    addr = cluster.broker_addr()
    r = send_message(addr, "D2", b"x", properties=encode_properties({"DELAY": "1"}))
    assert r.code == ResponseCode.SUCCESS
    assert wait_until(lambda: count_delivered(addr, "D2") == 1, 10)
    path = tmp_path / "cluster" / "broker-a" / "store" / "config" / "delayOffset.json"
    assert wait_until(lambda: path.exists() and '"1":1' in path.read_text(), 10)
    r = request(addr, RequestCode.GET_ALL_DELAY_OFFSET)
    assert b'"1":1' in (r.body or b"")


def test_transactions_survive_a_crash_in_the_middle_of_a_check(cluster: Cluster) -> None:
    cluster.start(transactionCheckInterval=300, transactionTimeOut=200)
    addr = cluster.broker_addr()
    answers = {"u1": TRANSACTION_COMMIT_TYPE, "u2": TRANSACTION_ROLLBACK_TYPE}
    first_checks = threading.Event()

    def decide(uniq: str, attempt: int) -> int | None:
        # the first two checks of every transaction stay unknown, then the producer decides
        if attempt >= 2:
            first_checks.set()
        if attempt < 3:
            return TRANSACTION_NOT_TYPE
        return answers.get(names.get(uniq, ""), TRANSACTION_COMMIT_TYPE)

    names: dict[str, str] = {}
    producer = FakeTransactionProducer(addr, "PG_TX", decide).start()
    try:
        direct_commit = producer.send_half("TxTopic", b"direct-commit")
        direct_rollback = producer.send_half("TxTopic", b"direct-rollback")
        checked = [producer.send_half("TxTopic", f"checked-{i}".encode()) for i in range(3)]
        names[checked[0].uniq] = "u1"
        names[checked[1].uniq] = "u2"
        assert producer.end(direct_commit, TRANSACTION_COMMIT_TYPE).code == ResponseCode.SUCCESS
        assert producer.end(direct_rollback, TRANSACTION_ROLLBACK_TYPE).code == 0
        assert wait_until(lambda: everything(addr, "TxTopic") == [b"direct-commit"], 10)
        assert first_checks.wait(20), "the broker never checked twice"
        cluster.restart_broker(crash=True)  # in the middle of the checks
        addr = cluster.broker_addr()
        assert wait_until(
            lambda: (
                sorted(everything(addr, "TxTopic"))
                == [b"checked-0", b"checked-2", b"direct-commit"]
            ),
            30,
        )
        resolved_at = len(producer.checks)
        cluster.restart_broker(crash=False)
        addr = cluster.broker_addr()
        # once the check has passed every half message, nothing resolved is asked again
        assert wait_until(lambda: transaction_checks_settled(addr), 30)
        assert len(producer.checks) == resolved_at
        late = producer.end(direct_rollback, TRANSACTION_COMMIT_TYPE)
        assert late.code == ResponseCode.ILLEGAL_OPERATION
        late = producer.end(checked[1], TRANSACTION_COMMIT_TYPE)
        assert late.code == ResponseCode.ILLEGAL_OPERATION
        assert not producer.checks_of(direct_commit.uniq)
        assert not producer.checks_of(direct_rollback.uniq)
        got = Counter(everything(addr, "TxTopic"))
        assert got == Counter([b"checked-0", b"checked-2", b"direct-commit"])
    finally:
        producer.stop()


def test_sql92_selector_over_the_wire(cluster: Cluster) -> None:
    cluster.start(enablePropertyFilter="true")
    addr = cluster.broker_addr()
    for i in range(20):
        props = encode_properties({"price": str(i), "color": "red" if i % 2 else "blue"})
        assert send_message(addr, "Sql", f"s{i}".encode(), properties=props).code == 0

    assert wait_until(lambda: count_delivered(addr, "Sql") == 20, 10)

    def select(expression: str) -> tuple[int, list[bytes]]:
        """Pull queue 0 to its end as a client does (following nextBeginOffset)."""
        offset, got = 0, []
        with BlockingRemotingClient() as client:
            while True:
                header = h.PullMessageRequestHeader(
                    consumer_group="G_SQL", topic="Sql", queue_id=0, queue_offset=offset,
                    max_msg_nums=4, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                    sub_version=0, subscription=expression, expression_type="SQL92",
                )  # fmt: skip
                request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
                r = client.invoke(addr, request, 5000)
                if r.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
                    return r.code, got
                got += [m.body for m in decode_records(r.body or b"")]
                offset = int(r.ext_fields["nextBeginOffset"])

    code, got = select("color = 'red' AND price BETWEEN 5 AND 11")
    assert (code, got) == (ResponseCode.PULL_NOT_FOUND, [b"s5", b"s7", b"s9", b"s11"])
    code, got = select("price >")
    assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_bench_semantics_runs() -> None:
    # its own session: on a timeout the bench and the broker it started are stopped together
    proc = subprocess.Popen(
        ariane_command("bench", "semantics", "--messages", "200", "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, out
    results = json.loads(out.strip().splitlines()[-1])
    assert results["delay_delivered"] == 200
    assert results["tx_commit_failures"] == 0
    assert results["pull_tag_delivered"] == results["pull_sql92_delivered"] == 100
