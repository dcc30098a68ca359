"""Timer messages through the dispatcher, on a real store with a manual clock: the send hook,
delivery at the slot boundary, many timers in one slot, rolls, restarts (graceful and in the
middle of a slot) and downtime catch-up, 4.x delay levels next to them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ariane.common.message import MessageExt
from ariane.common.record import decode_records
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.store.results import PutResult, PutStatus
from ariane.store.timer import copies as timer_copies
from ariane.store.timer import service as timer_service
from tests.unit.broker.harness import Broker, run

TIMER = "rmq_sys_wheel_timer"
T0 = 1_700_000_000_000  # the harness clock's start


def messages(b: Broker, topic: str = "T", queue_id: int = 0) -> list[MessageExt]:
    b.c.store.wait_dispatched()
    res = b.c.store.get_message("G", topic, queue_id, 0, 10_000)
    out: list[MessageExt] = []
    offset = 0
    while res.messages:
        out += decode_records(b"".join(res.messages))
        offset = res.next_begin_offset
        res = b.c.store.get_message("G", topic, queue_id, offset, 10_000)
    return out


def deliver(b: Broker) -> int:
    b.c.store.wait_dispatched()
    n = b.c.timer.wheel.run_pass()
    b.c.store.wait_dispatched()
    return n


async def start(root: Path, clock_ms: int = T0, **store: Any) -> Broker:
    b = Broker(root, store=store)
    b.clock.advance(clock_ms - T0)
    return await b.start()


def test_timer_message_is_delivered_at_its_slot_boundary(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        b.clock.advance(123)
        due = T0 + 30_500
        r = await b.send("T", b"later", queue_id=2, tags="A", props={"TIMER_DELIVER_MS": str(due)})
        assert r.code == ResponseCode.SUCCESS, r.remark
        hdr = h.SendMessageResponseHeader.from_ext_fields(r.ext_fields)
        assert (hdr.queue_id, hdr.queue_offset) == (2, 0)  # queue offset: the timer queue's
        (parked,) = messages(b, TIMER)
        assert parked.properties["TIMER_OUT_MS"] == str(T0 + 30_000)
        assert parked.properties["REAL_TOPIC"] == "T"
        assert parked.properties["REAL_QID"] == "2"
        assert deliver(b) == 0
        b.clock.advance(30_999 - 123)  # T0 + 30 999: slot 30 000 is not over yet
        assert deliver(b) == 0
        assert messages(b, "T", 2) == []
        b.clock.advance(1)  # T0 + 31 000
        assert deliver(b) == 1
        (msg,) = messages(b, "T", 2)
        assert msg.body == b"later"
        assert msg.tags == "A"
        assert msg.msg_id == parked.msg_id
        assert "REAL_TOPIC" not in msg.properties
        assert "REAL_QID" not in msg.properties
        assert msg.properties["TIMER_OUT_MS"] == str(T0 + 30_000)
        assert msg.properties["TIMER_DELIVER_MS"] == str(due)
        assert msg.properties["TIMER_DEQUEUE_MS"] == str(T0 + 31_000)
        assert msg.properties["TIMER_ENQUEUE_MS"] == str(T0)
        assert deliver(b) == 0  # once
        await b.stop()

    run(main())


def test_relative_delays_past_times_and_refusals(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, timer_max_delay_sec=3600)
        await b.send("T", b"sec", props={"TIMER_DELAY_SEC": "5", "TIMER_DELIVER_MS": "1"})
        await b.send("T", b"ms", props={"TIMER_DELAY_MS": "2500"})
        r = await b.send("T", b"past", props={"TIMER_DELIVER_MS": str(T0 - 1)})
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in messages(b)] == [b"past"]  # not timed
        assert [m.properties["TIMER_OUT_MS"] for m in messages(b, TIMER)] == [
            str(T0 + 4000), str(T0 + 2000),
        ]  # fmt: skip
        too_far = await b.send("T", b"x", props={"TIMER_DELAY_SEC": "3601"})
        assert too_far.code == ResponseCode.MESSAGE_ILLEGAL
        assert "max delay 3600000ms" in (too_far.remark or "")
        bad = await b.send("T", b"x", props={"TIMER_DELIVER_MS": "soon"})
        assert bad.code == ResponseCode.MESSAGE_ILLEGAL
        level = await b.send("T", b"level", props={"DELAY": "1", "TIMER_DELAY_SEC": "100"})
        assert level.code == ResponseCode.SUCCESS
        b.clock.advance(3000)
        deliver(b)
        assert [m.body for m in messages(b)] == [b"past", b"ms"]
        b.clock.advance(2000)
        deliver(b)
        assert [m.body for m in messages(b)] == [b"past", b"ms", b"sec"]
        b.c.schedule.deliver_due()  # the 4.x level (1 s) wins over the timer properties
        assert [m.body for m in messages(b)][-1] == b"level"
        await b.stop()

    run(main())


def test_many_timers_in_one_slot_are_each_delivered_once(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, mapped_file_size_timer_log=52 * 200 + 16)
        n = 1500
        for i in range(n):
            r = await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": str(T0 + 10_000 + i % 7)})
            assert r.code == ResponseCode.SUCCESS
        b.clock.advance(5_000)
        assert deliver(b) == 0
        assert b.c.timer.wheel.stats.enqueued == n
        b.clock.advance(6_000)
        assert deliver(b) == n
        got = messages(b)
        assert sorted(int(m.body) for m in got) == list(range(n))
        assert len({m.msg_id for m in got}) == n
        assert deliver(b) == 0
        await b.stop()

    run(main())


def test_far_timers_roll_through_the_window(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, timer_roll_window_slot=10)
        # 12 s > the 10 s window: parked in the slot at +5 s (half the window), then rolled
        await b.send("T", b"far", props={"TIMER_DELAY_SEC": "12"})
        deliver(b)
        b.clock.advance(5_999)
        deliver(b)
        assert [m for m in messages(b, TIMER) if "TIMER_ROLL_TIMES" in m.properties] == []
        b.clock.advance(1)
        deliver(b)
        (rolled,) = [m for m in messages(b, TIMER) if "TIMER_ROLL_TIMES" in m.properties]
        assert rolled.properties["TIMER_ROLL_TIMES"] == "1"
        assert b.c.timer.wheel.stats.rolled == 1
        deliver(b)  # the rolled copy is enqueued again, into its own slot now
        b.clock.advance(5_999)
        deliver(b)
        assert messages(b) == []
        b.clock.advance(1)
        deliver(b)
        (msg,) = messages(b)
        assert msg.body == b"far"
        assert msg.properties["TIMER_ROLL_TIMES"] == "1"
        await b.stop()

    run(main())


def test_restart_between_slots_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        for i in range(40):
            await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": str(T0 + 1000 * (i % 8 + 1))})
        b.clock.advance(4_000)
        deliver(b)
        first = sorted(int(m.body) for m in messages(b))
        assert len(first) == 20  # slots 1..3 s
        b.c.timer.shutdown()
        for f in (b.c.topics.file, b.c.offsets.file):
            f.write_now()
        await b.stop()
        b.c.store.shutdown()
        b2 = await start(tmp_path, T0 + 4_000)
        b2.clock.advance(60_000)  # down for a minute: the overdue slots come at once
        assert deliver(b2) == 20
        got = sorted(int(m.body) for m in messages(b2))
        assert got == list(range(40))
        await b2.stop()

    run(main())


def test_crash_in_the_middle_of_a_slot_delivers_nothing_twice(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        for i in range(30):
            await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": str(T0 + 2_000)})
        await b.send("T", b"later", props={"TIMER_DELIVER_MS": str(T0 + 9_000)})
        b.clock.advance(3_000)
        assert deliver(b) == 30
        # the crash: the slot's copies are stored, the progress past it is not
        wheel = b.c.timer.wheel
        wheel.read_time_ms = T0 + 1_000
        wheel._write_checkpoint()
        wheel.flush()
        for f in (b.c.topics.file, b.c.offsets.file):
            f.write_now()
        await b.c.hold.stop()
        await b.c.registration.stop()
        b.c.store.close_without_cleanup()  # the abort file stays: an abnormal exit
        wheel.shutdown()
        b2 = await start(tmp_path, T0 + 3_000)
        assert not b2.c.store.last_exit_ok
        deliver(b2)
        assert b2.c.timer.wheel.stats.skipped_as_delivered == 30
        assert sorted(m.body for m in messages(b2)) == sorted(b"%d" % i for i in range(30))
        b2.clock.advance(7_000)
        assert deliver(b2) == 1
        assert len(messages(b2)) == 31
        await b2.stop()

    run(main())


def test_timer_queue_entries_not_yet_in_the_log_are_enqueued_after_a_restart(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        for i in range(5):
            await b.send("T", b"%d" % i, props={"TIMER_DELAY_SEC": "3"})
        b.c.store.wait_dispatched()  # stored in the timer queue, never enqueued
        b.c.timer.shutdown()
        await b.stop()
        b2 = await start(tmp_path, T0)
        b2.clock.advance(3_000)
        assert deliver(b2) == 5
        assert sorted(m.body for m in messages(b2)) == [b"%d" % i for i in range(5)]
        await b2.stop()

    run(main())


def test_fine_precision(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, timer_precision_ms=150)  # snaps to 100 ms
        assert b.c.store_config.timer_precision_ms == 100
        await b.send("T", b"soon", props={"TIMER_DELAY_MS": "250"})
        b.clock.advance(299)
        deliver(b)
        assert messages(b) == []
        b.clock.advance(1)
        deliver(b)
        assert [m.body for m in messages(b)] == [b"soon"]
        r = await b.answer(RequestCode.GET_TIMER_CHECK_POINT)
        assert r.code == ResponseCode.SUCCESS
        assert int.from_bytes((r.body or b"")[:8], "big") == T0 + 300
        await b.stop()

    run(main())


def test_timer_transaction_counts_from_the_commit(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        r = await b.send(
            "T", b"tx", props={"TRAN_MSG": "true", "PGROUP": "PG", "TIMER_DELAY_SEC": "2"}
        )
        assert r.code == ResponseCode.SUCCESS
        hdr = h.SendMessageResponseHeader.from_ext_fields(r.ext_fields)
        b.clock.advance(10_000)
        end = h.EndTransactionRequestHeader(
            producer_group="PG", tran_state_table_offset=hdr.queue_offset,
            commit_log_offset=int(hdr.msg_id[-16:], 16), commit_or_rollback=8,
            from_transaction_check=False, msg_id=hdr.msg_id, transaction_id=hdr.transaction_id,
        )  # fmt: skip
        r = await b.answer(RequestCode.END_TRANSACTION, end)
        assert r.code == ResponseCode.SUCCESS, r.remark
        deliver(b)
        assert messages(b) == []
        b.clock.advance(2_000)
        deliver(b)
        assert [m.body for m in messages(b)] == [b"tx"]
        await b.stop()

    run(main())


def test_slots_read_ahead_take_late_arrivals_and_recalls(tmp_path: Path) -> None:
    """Slots due within 3 s are read before their boundary; what reaches the slot after that
    (more timers, a recall marker for a prepared one) is delivered or honoured all the same,
    each copy once, at the boundary."""

    async def main() -> None:
        b = await start(tmp_path)
        due = str(T0 + 10_000)
        for i in range(50):
            await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": due, "UNIQ_KEY": f"U{i}"})
        b.clock.advance(8_000)
        assert deliver(b) == 0
        wheel = b.c.timer.wheel
        assert wheel._ahead_count == 50  # read ahead: decoded and prepared, nothing written
        assert messages(b) == []
        recall = {"TIMER_DELIVER_MS": due, "TIMER_DEL_UNIQKEY": "T+U3", "UNIQ_KEY": "R3"}
        assert (await b.send("T", b"", props=recall)).code == ResponseCode.SUCCESS
        for i in range(50, 57):
            await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": due, "UNIQ_KEY": f"U{i}"})
        b.clock.advance(1_999)  # due at T0 + 10 000: the boundary that ends slot 9 000
        assert deliver(b) == 0
        assert messages(b) == []
        b.clock.advance(1)
        assert deliver(b) == 56
        got = messages(b)
        assert [int(m.body) for m in got] == [i for i in range(57) if i != 3]  # unit order
        assert {m.properties["TIMER_DEQUEUE_MS"] for m in got} == {due}
        assert wheel.stats.recalled == 1
        assert wheel._ahead_count == 0
        assert deliver(b) == 0
        await b.stop()

    run(main())


def test_restart_after_a_read_ahead_delivers_each_timer_once(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        for i in range(20):
            await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": str(T0 + 5_000)})
        b.clock.advance(3_000)
        assert deliver(b) == 0
        assert b.c.timer.wheel._ahead_count == 20
        b.c.timer.shutdown()
        for f in (b.c.topics.file, b.c.offsets.file):
            f.write_now()
        await b.stop()
        b.c.store.shutdown()
        b2 = await start(tmp_path, T0 + 3_000)
        b2.clock.advance(1_999)
        assert deliver(b2) == 0
        b2.clock.advance(1)
        assert deliver(b2) == 20
        assert sorted(int(m.body) for m in messages(b2)) == list(range(20))
        assert deliver(b2) == 0
        await b2.stop()

    run(main())


def test_read_ahead_holds_at_most_its_byte_cap(tmp_path: Path, monkeypatch: Any) -> None:
    """Big timer messages are read ahead only up to ``_AHEAD_MAX_BYTES``; the rest of the
    slot is read at the boundary, and every timer is delivered once, in unit order."""
    monkeypatch.setattr(timer_service, "_AHEAD_MAX_BYTES", 3 * 10_500)

    async def main() -> None:
        b = await start(tmp_path)
        due = str(T0 + 5_000)
        for i in range(8):
            await b.send("T", b"%d" % i + b"x" * 10_000, props={"TIMER_DELIVER_MS": due})
        b.clock.advance(2_000)
        assert deliver(b) == 0
        wheel = b.c.timer.wheel
        assert wheel._ahead_count == 3
        assert 3 * 10_000 < wheel._ahead_bytes <= 3 * 10_500
        assert deliver(b) == 0  # full: nothing more is read ahead
        assert wheel._ahead_count == 3
        b.clock.advance(3_000)
        assert deliver(b) == 8
        assert [m.body[:1] for m in messages(b)] == [b"%d" % i for i in range(8)]
        assert (wheel._ahead_count, wheel._ahead_bytes) == (0, 0)
        assert deliver(b) == 0
        await b.stop()

    run(main())


def test_runtime_info_reports_the_wheel_backlog_and_rates(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)

        def timer_keys() -> dict[str, str]:
            info = b.c.runtime_info()
            return {k: v for k, v in info.items() if k.startswith("timer")}

        for i in range(3):
            r = await b.send("T", b"m%d" % i, props={"TIMER_DELIVER_MS": str(T0 + 30_500)})
            assert r.code == ResponseCode.SUCCESS, r.remark
        b.c.store.wait_dispatched()
        assert timer_keys() == {
            "timerReadBehind": "0",
            "timerOffsetBehind": "3",  # in the timer queue, not yet in the wheel
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
        }
        assert deliver(b) == 0
        b.clock.advance(31_000)  # slot T0 + 30 000 is due, the wheel has not read it yet
        assert timer_keys() == {
            "timerReadBehind": "31",
            "timerOffsetBehind": "0",
            "timerCongestNum": "3",
            "timerEnqueueTps": "0.1",  # 3 enqueued over the 31 s between the two samples
            "timerDequeueTps": "0.0",
        }
        assert deliver(b) == 3
        b.clock.advance(1_000)  # the wheel read up to T0 + 31 000 and has not run since
        assert timer_keys() == {
            "timerReadBehind": "1",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.1",
            "timerDequeueTps": "0.1",
        }
        await b.stop()

    run(main())


def test_a_block_refused_for_a_passing_reason_is_retried_until_stored(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The store takes the first 3 copies of a slot's block, then refuses (not writeable):
    the rest is written again after the wait, each timer delivered once, in unit order."""
    monkeypatch.setattr(timer_copies, "_RETRY_WAIT_S", 0)

    async def main() -> None:
        b = await start(tmp_path)
        for i in range(10):
            await b.send("T", b"%d" % i, props={"TIMER_DELIVER_MS": str(T0 + 2_000)})
        store = b.c.store
        real = store.submit_block
        calls: list[int] = []

        def flaky(recs: Any) -> Any:
            calls.append(len(recs))
            if len(calls) == 1:
                stored, _, durable = real(recs[:3])
                return stored, PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="busy"), durable
            return real(recs)

        monkeypatch.setattr(store, "submit_block", flaky)
        b.clock.advance(3_000)
        assert deliver(b) == 10
        assert calls == [10, 7]
        got = messages(b)
        assert [m.body for m in got] == [b"%d" % i for i in range(10)]
        assert len({m.msg_id for m in got}) == 10
        assert deliver(b) == 0
        await b.stop()

    run(main())
