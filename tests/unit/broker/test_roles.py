"""Broker roles through the dispatcher (no sockets): what a slave refuses and how it answers
pulls, a SYNC_MASTER without slaves, the read suggestion, and switching roles at run time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ariane.common.roles import BrokerRole
from ariane.common.sysflag import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND
from ariane.ha.slave import SlaveState
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.unit.broker.harness import Broker, run


def test_a_slave_refuses_writes_and_never_moves_consumers(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        for i in range(3):
            assert (await b.send("T", f"m{i}".encode())).code == ResponseCode.SUCCESS
        await b.c.change_role(BrokerRole.SLAVE, 1)
        try:
            assert b.c.role is BrokerRole.SLAVE
            assert b.c.config.broker_id == 1
            refused = await b.send("T", b"no")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "slave mode" in (refused.remark or "")
            sub = PULL_SUBSCRIPTION | PULL_COMMIT_OFFSET
            r = await b.answer(
                RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub, commit_offset=2)
            )
            assert r.code == ResponseCode.SUCCESS
            assert r.ext_fields["suggestWhichBrokerId"] == "0"  # back to the master
            assert b.c.offsets.query("G", "T", 0) == -1  # a slave stores no pull commit
            r = await b.answer(
                RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=PULL_SUBSCRIPTION, offset=9)
            )
            assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # maybe just behind
            assert r.ext_fields["nextBeginOffset"] == "9"
            end = h.EndTransactionRequestHeader(
                producer_group="PG", tran_state_table_offset=0, commit_log_offset=0,
                commit_or_rollback=8, msg_id="x",
            )  # fmt: skip
            r = await b.answer(RequestCode.END_TRANSACTION, end)
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
            info = b.c.runtime_info()
            assert info["brokerRole"] == "SLAVE"
            assert info["haClientState"] == "IDLE"  # no master known yet
            await b.c.change_role(BrokerRole.ASYNC_MASTER)
            assert b.c.config.broker_id == 0
            r = await b.send("T", b"m3")
            assert r.code == ResponseCode.SUCCESS
            assert h.SendMessageResponseHeader.from_ext_fields(r.ext_fields).queue_offset == 3
        finally:
            await b.c.replication.stop()
            await b.c._stop_master_services()
            await b.stop()

    run(main())


def test_sync_master_without_slave_answers_slave_not_available(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, broker_role="SYNC_MASTER").start()
        try:
            r = await b.send("T", b"stored anyway")
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
            assert h.SendMessageResponseHeader.from_ext_fields(r.ext_fields).queue_offset == 0
            r = await b.send("T", b"no wait", props={"WAIT": "false"})
            assert r.code == ResponseCode.SUCCESS
            assert b.c.store.get_max_offset_in_queue("T", 0) == 2
            assert b.c.replication.metrics().sync_not_available == 1
        finally:
            await b.stop()

    run(main())


def test_sync_master_with_in_sync_replicas_one_does_not_wait(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, broker_role="SYNC_MASTER", in_sync_replicas=1).start()
        try:
            assert (await b.send("T", b"x")).code == ResponseCode.SUCCESS
        finally:
            await b.stop()

    run(main())


def test_a_slave_sends_consumers_back_to_a_live_master(tmp_path: Path) -> None:
    """While its master is up (replication transfers), a slave answers a read that is not
    cold with the master's id and holds one that finds nothing a short poll only (then
    suggests the master); with the master down it holds the pull as long as asked."""

    async def main() -> None:
        b = await Broker(tmp_path, slave_read_enable=True).start()
        for i in range(3):
            assert (await b.send("T", f"m{i}".encode())).code == ResponseCode.SUCCESS
        await b.c.change_role(BrokerRole.SLAVE, 1)
        suspend = PULL_SUBSCRIPTION | PULL_SUSPEND
        try:
            b.c.replication.client.state = SlaveState.TRANSFER  # as if copying from its master
            r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=suspend))
            assert (r.code, r.ext_fields["suggestWhichBrokerId"]) == (ResponseCode.SUCCESS, "0")
            await b.call(
                RequestCode.PULL_MESSAGE,
                b.pull_header("T", sys_flag=suspend, offset=3, suspend_ms=60_000),
                expect_answer=False,
            )
            (held,) = [p for pulls in b.c.hold.table.values() for p in pulls]
            assert held.timer is not None
            left = held.timer.when() - asyncio.get_running_loop().time()
            assert 0 < left <= b.c.config.short_polling_time_ms / 1000  # not the 60 s asked
            b.c.hold._timed_out(held)  # the short poll ends: back to the master
            r = b.channel.sent[-1]
            assert r.code == ResponseCode.PULL_NOT_FOUND
            assert r.ext_fields["suggestWhichBrokerId"] == "0"
            assert r.ext_fields["nextBeginOffset"] == "3"
            assert b.c.hold.held_count == 0
            b.c.replication.client.state = SlaveState.CONNECTING  # the master is gone
            answer = await b.call(
                RequestCode.PULL_MESSAGE,
                b.pull_header("T", sys_flag=suspend, offset=3),
                expect_answer=False,
            )
            assert answer is None  # held, as a master holds it
            (again,) = [p for pulls in b.c.hold.table.values() for p in pulls]
            assert again.timer is not None
            assert again.timer.when() - asyncio.get_running_loop().time() > 10  # 15 s asked
        finally:
            await b.c.replication.stop()
            await b.c._stop_master_services()
            await b.stop()

    run(main())


@pytest.mark.parametrize("mode", ["enable_auto_in_sync_replicas", "all_ack_in_sync_state_set"])
@pytest.mark.parametrize(("minimum", "expect"), [(2, ResponseCode.SYSTEM_ERROR), (1, None)])
def test_adaptive_in_sync_replicas_refuse_below_the_minimum(
    tmp_path: Path, mode: str, minimum: int, expect: ResponseCode | None
) -> None:
    """Fewer replicas in sync than minInSyncReplicas (no slave: one): refused before the put,
    nothing stored; at the minimum (the master alone) the send is stored and SEND_OK."""

    async def main() -> None:
        b = await Broker(
            tmp_path, broker_role="SYNC_MASTER", in_sync_replicas=3,
            min_in_sync_replicas=minimum, **{mode: True},
        ).start()  # fmt: skip
        try:
            r = await b.send("T", b"x")
            stored = b.c.store.get_max_offset_in_queue("T", 0)
            if expect is None:
                assert (r.code, stored) == (ResponseCode.SUCCESS, 1)
                assert b.c.replication.metrics().sync_refused == 0
            else:
                assert (r.code, r.remark, stored) == (expect, "in-sync replicas not enough", 0)
                assert b.c.replication.metrics().sync_refused == 1
                r = await b.send("T", b"no wait", props={"WAIT": "false"})
                assert r.code == ResponseCode.SUCCESS  # nothing to wait for, nothing refused
                assert b.c.store.get_max_offset_in_queue("T", 0) == 1
        finally:
            await b.stop()

    run(main())


@pytest.mark.parametrize(("slave_read", "expect"), [(True, "1"), (False, "0")])
def test_a_master_suggests_a_slave_for_cold_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slave_read: bool, expect: str
) -> None:
    monkeypatch.setattr("ariane.store.reads._MEMORY", 1000)  # 40 % of it: 400 bytes "in memory"

    async def main() -> None:
        b = await Broker(tmp_path, slave_read_enable=slave_read).start()
        try:
            for _ in range(10):
                await b.send("T", b"x" * 200)
            r = await b.answer(
                RequestCode.PULL_MESSAGE,
                b.pull_header("T", sys_flag=PULL_SUBSCRIPTION, max_nums=1),
            )
            assert r.code == ResponseCode.SUCCESS
            assert r.ext_fields["suggestWhichBrokerId"] == expect
            r = await b.answer(
                RequestCode.PULL_MESSAGE,
                b.pull_header("T", sys_flag=PULL_SUBSCRIPTION, offset=9, max_nums=1),
            )
            assert r.ext_fields["suggestWhichBrokerId"] == "0"  # the tail is hot
        finally:
            await b.stop()

    run(main())
