"""Transactional messages through the dispatcher: half messages, END_TRANSACTION, op records,
the check-back and the at-most-once resolution, on a real store (no sockets, manual clock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ariane.broker.transaction import END_TYPE, Resolution
from ariane.broker.transaction_check import CheckStats
from ariane.common.message import MessageExt
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import encode_properties
from ariane.common.record import decode_record, decode_records
from ariane.common.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.unit.broker.harness import Broker, FakeChannel, run

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


class Half:
    """A half message as the producer knows it from the send answer."""

    def __init__(self, response: RemotingCommand) -> None:
        assert response.code == ResponseCode.SUCCESS, response.remark
        self.msg_id = response.ext_fields["msgId"]
        self.phys = decode_offset_msg_id(self.msg_id).phys_offset
        self.queue_offset = int(response.ext_fields["queueOffset"])
        self.uniq = response.ext_fields["transactionId"]


async def send_half(b: Broker, topic: str, body: bytes, **props: str) -> Half:
    p = {"TRAN_MSG": "true", "PGROUP": "PG", **props}
    return Half(await b.send(topic, body, props=p, queue_id=1))


def end_header(
    half: Half | MessageExt | h.CheckTransactionStateRequestHeader,
    kind: int,
    *,
    from_check: bool = False,
    group: str = "PG",
) -> h.EndTransactionRequestHeader:
    if isinstance(half, Half):
        qo, phys, uniq = half.queue_offset, half.phys, half.uniq
    elif isinstance(half, MessageExt):
        qo, phys, uniq = half.queue_offset, half.commit_log_offset, half.msg_id
    else:
        qo, phys, uniq = half.tran_state_table_offset, half.commit_log_offset, half.msg_id or ""
    return h.EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=qo,
        commit_log_offset=phys,
        commit_or_rollback=kind,
        msg_id=uniq,
        from_transaction_check=from_check,
    )


async def end(b: Broker, half: Any, kind: int, **kwargs: Any) -> RemotingCommand:
    r = await b.answer(RequestCode.END_TRANSACTION, end_header(half, kind, **kwargs))
    b.c.store.wait_dispatched()
    return r


def visible(b: Broker, topic: str = "T", queue_id: int = 1) -> list[MessageExt]:
    b.c.store.wait_dispatched()
    res = b.c.store.get_message("G", topic, queue_id, 0, 100)
    return decode_records(b"".join(res.messages))


def check_round(b: Broker) -> CheckStats:
    b.c.store.wait_dispatched()  # copies put back by the last round are visible
    return b.c.tx_check.check_once()


def checks(channel: FakeChannel) -> list[tuple[h.CheckTransactionStateRequestHeader, MessageExt]]:
    out = []
    for cmd in channel.oneway:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            header = h.CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
            out.append((header, decode_record(cmd.body or b"")[0]))
    channel.oneway.clear()
    return out


def test_half_message_is_invisible_until_committed(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        half = await send_half(b, "T", b"order-1", DELAY="3")
        assert visible(b) == []
        assert b.c.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 0  # not delayed
        (stored,) = visible(b, HALF, 0)
        assert stored.properties["REAL_TOPIC"] == "T"
        assert stored.properties["REAL_QID"] == "1"
        assert stored.properties["__transactionId__"] == half.uniq
        assert stored.sys_flag & 0xC == TRANSACTION_NOT_TYPE
        assert "DELAY" not in stored.properties
        r = await end(b, half, TRANSACTION_COMMIT_TYPE)
        assert r.code == ResponseCode.SUCCESS, r.remark
        (msg,) = visible(b)
        assert msg.body == b"order-1"
        assert msg.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE
        assert msg.prepared_transaction_offset == half.phys
        assert msg.properties["UNIQ_KEY"] == half.uniq
        for gone in ("TRAN_MSG", "REAL_TOPIC", "REAL_QID"):
            assert gone not in msg.properties
        (op,) = visible(b, OP, 0)
        assert op.tags == "d"
        assert op.body == f"{half.queue_offset},".encode()
        assert op.properties[END_TYPE] == "COMMIT"
        await b.stop()

    run(main())


def test_rollback_and_the_late_resolution_rule(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        a = await send_half(b, "T", b"a")
        c = await send_half(b, "T", b"c")
        assert (await end(b, a, TRANSACTION_ROLLBACK_TYPE)).code == ResponseCode.SUCCESS
        late = await end(b, a, TRANSACTION_COMMIT_TYPE)
        assert late.code == ResponseCode.ILLEGAL_OPERATION
        assert "rolled back" in (late.remark or "")
        again = await end(b, a, TRANSACTION_ROLLBACK_TYPE)  # same outcome: harmless
        assert again.code == ResponseCode.SUCCESS
        assert (await end(b, c, TRANSACTION_COMMIT_TYPE)).code == ResponseCode.SUCCESS
        assert (await end(b, c, TRANSACTION_COMMIT_TYPE)).code == ResponseCode.SUCCESS
        refused = await end(b, c, TRANSACTION_ROLLBACK_TYPE, from_check=True)
        assert refused.code == ResponseCode.ILLEGAL_OPERATION
        assert [m.body for m in visible(b)] == [b"c"]  # committed once, never twice
        assert len(visible(b, OP, 0)) == 2
        await b.stop()

    run(main())


def test_end_transaction_checks_the_half_message(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        half = await send_half(b, "T", b"x")
        normal = await b.send("T", b"plain")
        r = await end(b, half, TRANSACTION_COMMIT_TYPE, group="OTHER")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        header = end_header(half, TRANSACTION_COMMIT_TYPE)
        header.tran_state_table_offset += 5
        r = await b.answer(RequestCode.END_TRANSACTION, header)
        assert r.remark == "The transaction state table offset wrong"
        header = end_header(half, TRANSACTION_COMMIT_TYPE)
        header.commit_log_offset = decode_offset_msg_id(normal.ext_fields["msgId"]).phys_offset
        r = await b.answer(RequestCode.END_TRANSACTION, header)  # not a half message
        assert r.remark == "Find prepared transaction message failed"
        header.commit_log_offset = 10**12
        r = await b.answer(RequestCode.END_TRANSACTION, header)
        assert r.code == ResponseCode.SYSTEM_ERROR
        r = await end(b, half, TRANSACTION_NOT_TYPE)  # unknown: nothing happens
        assert r.code == ResponseCode.SUCCESS
        assert b.c.transactions.table.get(half.queue_offset) is Resolution.PENDING
        assert [m.body for m in visible(b)] == []
        await b.stop()

    run(main())


def test_one_way_end_transaction_commits_without_an_answer(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        half = await send_half(b, "T", b"x")
        fields = end_header(half, TRANSACTION_COMMIT_TYPE).to_ext_fields()
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, fields).mark_oneway()
        before = len(b.channel.sent)
        b.c.remoting.dispatcher.handle_request(b.channel, request)  # type: ignore[arg-type]
        b.c.store.wait_dispatched()
        assert len(b.channel.sent) == before
        assert [m.body for m in visible(b)] == [b"x"]
        await b.stop()

    run(main())


async def later(b: Broker, ms: int) -> Broker:
    """Start a restarted broker ``ms`` later than the first one (a new manual clock)."""
    b.clock.advance(ms)
    return await b.start()


async def producer(b: Broker) -> FakeChannel:
    ch = FakeChannel("127.0.0.1:60000")
    r = await b.heartbeat("producer-1", group="", channel=ch, producer_group="PG")
    assert r.code == ResponseCode.SUCCESS
    return ch


def test_unknown_then_commit_on_check_back(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, transaction_timeout_ms=6000).start()
        ch = await producer(b)
        halves = [await send_half(b, "T", f"m{i}".encode()) for i in range(4)]
        await end(b, halves[0], TRANSACTION_COMMIT_TYPE)
        await end(b, halves[1], TRANSACTION_ROLLBACK_TYPE)
        await end(b, halves[2], TRANSACTION_NOT_TYPE)  # unknown: left to the check
        check_round(b)
        assert checks(ch) == []  # younger than transactionTimeOut
        b.clock.advance(6001)
        stats = check_round(b)
        assert (stats.checked, stats.done) == (2, True)
        asked = checks(ch)
        assert sorted(m.body for _, m in asked) == [b"m2", b"m3"]
        for header, msg in asked:
            assert msg.topic == "T"  # shown with the real topic and queue
            assert msg.queue_id == 1
            assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert header.transaction_id == msg.properties["UNIQ_KEY"]
            assert header.commit_log_offset == msg.commit_log_offset
            assert header.broker_name == "broker-a"
            kind = TRANSACTION_COMMIT_TYPE if msg.body == b"m2" else TRANSACTION_NOT_TYPE
            r = await end(b, header, kind, from_check=True)
            assert r.code == ResponseCode.SUCCESS, r.remark
        assert sorted(m.body for m in visible(b)) == [b"m0", b"m2"]
        b.clock.advance(6001)
        check_round(b)
        (again,) = checks(ch)  # m3 only: m2 was resolved through its copy
        assert again[1].body == b"m3"
        assert again[1].properties["TRANSACTION_CHECK_TIMES"] == "2"
        # the producer's own (late) commit names the first half message: same transaction
        assert (await end(b, halves[3], TRANSACTION_COMMIT_TYPE)).code == ResponseCode.SUCCESS
        r = await end(b, again[0], TRANSACTION_COMMIT_TYPE, from_check=True)
        assert r.code == ResponseCode.SUCCESS
        assert sorted(m.body for m in visible(b)) == [b"m0", b"m2", b"m3"]
        b.clock.advance(60_000)
        check_round(b)
        assert checks(ch) == []
        await b.stop()

    run(main())


def test_check_gives_up_after_transaction_check_max(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, transaction_timeout_ms=1000, transaction_check_max=2).start()
        ch = await producer(b)
        half = await send_half(b, "T", b"never")
        for _ in range(2):
            b.clock.advance(1001)
            check_round(b)
            assert len(checks(ch)) == 1
        b.clock.advance(1001)
        stats = check_round(b)
        assert stats.discarded == 1
        assert checks(ch) == []
        (kept,) = visible(b, "TRANS_CHECK_MAX_TIME_TOPIC", 0)
        assert kept.body == b"never"
        assert kept.properties["REAL_TOPIC"] == "T"
        r = await end(b, half, TRANSACTION_COMMIT_TYPE)
        assert r.code == ResponseCode.ILLEGAL_OPERATION
        assert "discarded" in (r.remark or "")
        assert visible(b) == []
        await b.stop()

    run(main())


def test_check_without_producer_counts_and_custom_immunity(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, transaction_timeout_ms=1000).start()
        half = await send_half(b, "T", b"slow", CHECK_IMMUNITY_TIME_IN_SECONDS="5")
        b.clock.advance(1001)
        stats = check_round(b)
        assert stats.checked == 0  # immune for 5 s: put back, not checked
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue(HALF, 0) == 2
        b.clock.advance(5000)
        stats = check_round(b)
        assert (stats.checked, stats.no_producer) == (1, 1)
        # past its own immunity a producer's commit is refused: it must wait for the check
        r = await end(b, half, TRANSACTION_COMMIT_TYPE)
        assert r.code == ResponseCode.ILLEGAL_OPERATION
        r = await end(b, half, TRANSACTION_COMMIT_TYPE, from_check=True)
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in visible(b)] == [b"slow"]
        await b.stop()

    run(main())


def test_restart_keeps_outcomes_and_progress(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, transaction_timeout_ms=1000).start()
        ch = await producer(b)
        done = await send_half(b, "T", b"done")
        await send_half(b, "T", b"open")
        await end(b, done, TRANSACTION_ROLLBACK_TYPE)
        b.clock.advance(1001)
        check_round(b)
        assert [m.body for _, m in checks(ch)] == [b"open"]
        b.c.offsets.file.write_now()
        await b.stop()
        b = await later(Broker(tmp_path, transaction_timeout_ms=1000), 3000)
        assert b.c.transactions.table.get(done.queue_offset) is Resolution.ROLLED_BACK
        assert (await end(b, done, TRANSACTION_COMMIT_TYPE)).code == ResponseCode.ILLEGAL_OPERATION
        ch = await producer(b)
        check_round(b)
        ((header, msg),) = checks(ch)  # the open one again, from its copy; not "done"
        assert msg.body == b"open"
        assert msg.properties["TRANSACTION_CHECK_TIMES"] == "2"
        await end(b, header, TRANSACTION_COMMIT_TYPE, from_check=True)
        await b.stop()
        b = await later(Broker(tmp_path, transaction_timeout_ms=1000), 10_000)
        ch = await producer(b)
        check_round(b)
        assert checks(ch) == []  # resolved transactions are never checked again
        assert [m.body for m in visible(b)] == [b"open"]
        await b.stop()

    run(main())


def test_commit_whose_op_record_was_lost_is_found_after_restart(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, transaction_timeout_ms=1000).start()
        half = await send_half(b, "T", b"once")
        msg = b.c.transactions.half_message(half.phys)
        assert msg is not None
        from ariane.broker.transaction import committed_message

        b.c.store.put_message(committed_message(msg, half.phys))  # crash before the op record
        b.c.store.wait_dispatched()
        await b.stop()
        b = await later(Broker(tmp_path, transaction_timeout_ms=1000), 2000)
        ch = await producer(b)
        stats = check_round(b)
        assert stats.checked == 0
        assert checks(ch) == []
        r = await end(b, half, TRANSACTION_ROLLBACK_TYPE)
        assert r.code == ResponseCode.ILLEGAL_OPERATION
        r = await end(b, half, TRANSACTION_COMMIT_TYPE)
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in visible(b)] == [b"once"]
        await b.stop()

    run(main())


def test_end_transaction_right_after_the_send_is_recorded(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        header = b.send_header("T", 1, encode_properties({"TRAN_MSG": "true"}))
        half = Half(await b.answer(RequestCode.SEND_MESSAGE, header, b"quick"))
        # no wait for the dispatch: the half message may not be in its ConsumeQueue yet
        r = await b.answer(RequestCode.END_TRANSACTION, end_header(half, TRANSACTION_COMMIT_TYPE))
        assert r.code == ResponseCode.SUCCESS
        assert b.c.transactions.table.get(half.queue_offset) is Resolution.COMMITTED
        await b.stop()

    run(main())


def test_transaction_sends_keep_the_asked_queue_in_the_answer(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.send("T", b"x", props={"TRAN_MSG": "true"}, queue_id=3)
        assert r.code == ResponseCode.SUCCESS
        assert r.ext_fields["queueId"] == "3"
        (half,) = visible(b, HALF, 0)
        assert half.properties["PGROUP"] == "PG"  # from the header when the client sent none
        assert half.properties["REAL_QID"] == "3"
        await b.stop()

    run(main())


def test_transaction_bits_without_tran_msg_do_not_hide_a_message(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        header = b.send_header("T", 1, encode_properties({"DELAY": "1", "TRAN_MSG": "true"}))
        header.sys_flag = 0x4  # an old client's retry of a transactional message
        header.reconsume_times = 1
        r = await b.answer(RequestCode.SEND_MESSAGE, header, b"retry")
        assert r.code == ResponseCode.SUCCESS
        b.clock.advance(1000)
        b.c.store.wait_dispatched()
        b.c.schedule.deliver_due()
        assert [m.body for m in visible(b)] == [b"retry"]
        await b.stop()

    run(main())


def test_resolution_table() -> None:
    from ariane.broker.transaction import ResolutionTable, op_offsets

    t = ResolutionTable(base=10)
    assert t.get(12) is Resolution.PENDING
    assert t.set(12, Resolution.COMMITTED)
    assert not t.set(13, Resolution.COMMITTED, limit=13)  # op records past the queue's end
    assert not t.set(10**12, Resolution.COMMITTED)  # absurd offsets do not grow the table
    assert not t.set(5, Resolution.ROLLED_BACK, limit=100)  # old op records: ignored
    assert t.set(5, Resolution.ROLLED_BACK)  # a live end of an old transaction: kept
    assert (t.get(5), t.get(12), t.get(11)) == (
        Resolution.ROLLED_BACK, Resolution.COMMITTED, Resolution.PENDING,
    )  # fmt: skip
    t.prune(12)
    assert (t.base, t.get(12)) == (12, Resolution.COMMITTED)
    assert list(op_offsets(b"3,4,")) == [3, 4]
    assert list(op_offsets(b"7")) == [7]  # RocketMQ 4.x wrote no trailing comma
    assert list(op_offsets(b"x,,\xff9,")) == []


def test_half_messages_born_before_the_retention_are_discarded(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, transaction_timeout_ms=1000).start()
        await send_half(b, "T", b"ancient")
        header = b.send_header("T", 1, encode_properties({"TRAN_MSG": "true"}))
        header.born_timestamp = 0  # a client without a clock: checked, never "too old"
        Half(await b.answer(RequestCode.SEND_MESSAGE, header, b"no-clock"))
        ch = await producer(b)
        b.clock.advance(73 * 3_600_000)  # fileReservedTime is 72 h
        stats = check_round(b)
        assert (stats.discarded, stats.checked) == (1, 1)
        assert [m.body for _, m in checks(ch)] == [b"no-clock"]
        assert [m.body for m in visible(b, "TRANS_CHECK_MAX_TIME_TOPIC", 0)] == [b"ancient"]
        await b.stop()

    run(main())
