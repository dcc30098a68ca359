"""Delay levels through the dispatcher: the rewrite to SCHEDULE_TOPIC_XXXX, delivery when due,
delayOffset.json and restarts (no loss, no repeat), on a real store with a manual clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ariane.common.batch import encode_batch
from ariane.common.message import MessageExt
from ariane.common.record import decode_records
from ariane.remoting.protocol.admin_bodies import DelayOffsetSerializeWrapper
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.unit.broker.harness import Broker, run

SCHEDULE = "SCHEDULE_TOPIC_XXXX"
LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def delayed(b: Broker, topic: str = "T", queue_id: int = 0) -> list[MessageExt]:
    b.c.store.wait_dispatched()
    res = b.c.store.get_message("G", topic, queue_id, 0, 500)
    return decode_records(b"".join(res.messages))


def deliver(b: Broker) -> int | None:
    b.c.store.wait_dispatched()
    return b.c.schedule.deliver_due()


async def start(root: Path, advance_ms: int = 0, **config: Any) -> Broker:
    b = Broker(root, **config)
    b.clock.advance(advance_ms)
    return await b.start()


def test_delayed_message_waits_in_its_level_queue(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        r = await b.send("T", b"later", props={"DELAY": "3"}, tags="A", queue_id=2)
        assert r.code == ResponseCode.SUCCESS
        assert r.ext_fields["queueId"] == "2"  # the queue the client asked for
        (entry,) = delayed(b, SCHEDULE, 2)
        assert entry.properties["REAL_TOPIC"] == "T"
        assert entry.properties["REAL_QID"] == "2"
        cq = b.c.store.get_consume_queue(SCHEDULE, 2)
        assert cq is not None
        assert cq.get_entry(0)[2] == entry.store_timestamp_ms + 10_000  # type: ignore[index]
        assert deliver(b) == 10_000
        b.clock.advance(9_999)
        assert deliver(b) == 1
        assert delayed(b, "T", 2) == []
        b.clock.advance(1)
        assert deliver(b) is None
        (msg,) = delayed(b, "T", 2)
        assert msg.body == b"later"
        assert msg.tags == "A"
        assert "DELAY" not in msg.properties
        assert msg.properties["REAL_TOPIC"] == "T"
        assert msg.properties["UNIQ_KEY"] == entry.properties["UNIQ_KEY"]
        assert msg.store_timestamp_ms - entry.store_timestamp_ms >= 10_000
        assert b.c.schedule.offset_table == {3: 1}
        await b.stop()

    run(main())


def test_levels_are_clamped_and_bad_levels_ignored(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, store={"message_delay_level": "1s 2s"})
        await b.send("T", b"far", props={"DELAY": "40"})
        (entry,) = delayed(b, SCHEDULE, 1)
        assert entry.properties["DELAY"] == "2"
        await b.send("T", b"now", props={"DELAY": "abc"})
        await b.send("T", b"zero", props={"DELAY": "0"})
        assert [m.body for m in delayed(b)] == [b"now", b"zero"]
        b.clock.advance(2000)
        deliver(b)
        assert [m.body for m in delayed(b)] == [b"now", b"zero", b"far"]
        await b.stop()

    run(main())


def test_each_level_delivers_in_order_and_independently(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, store={"message_delay_level": "1s 3s"})
        for i in range(3):
            await b.send("T", f"slow{i}".encode(), props={"DELAY": "2"})
            await b.send("T", f"fast{i}".encode(), props={"DELAY": "1"})
            b.clock.advance(100)
        b.clock.advance(900)  # fast2 (sent at +200 ms) is due now, slow0 at +3 s
        assert deliver(b) == 1800
        assert [m.body for m in delayed(b)] == [b"fast0", b"fast1", b"fast2"]
        b.clock.advance(2000)
        deliver(b)
        assert [m.body for m in delayed(b)][3:] == [b"slow0", b"slow1", b"slow2"]
        await b.stop()

    run(main())


def test_progress_file_and_get_all_delay_offset(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await b.send("T", b"x", props={"DELAY": "1"})
        b.clock.advance(1000)
        deliver(b)
        b.c.schedule.persist()
        text = json.loads((tmp_path / "config" / "delayOffset.json").read_text())
        assert text["offsetTable"] == {"1": 1}
        r = await b.answer(RequestCode.GET_ALL_DELAY_OFFSET)
        assert DelayOffsetSerializeWrapper.decode(r.body or b"").offset_table == {1: 1}
        assert b.c.runtime_info()["scheduleMessageOffset_1"] == "1,1"
        await b.stop()

    run(main())


def test_restart_without_saved_progress_delivers_nothing_twice(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, store={"message_delay_level": "1s 2s"})
        for i in range(6):
            await b.send("T", f"m{i}".encode(), props={"DELAY": "1"})
            b.clock.advance(10)
        await b.send("T", b"retry", props={"DELAY": "1"}, reconsume_times=1)
        b.clock.advance(1000)
        b.c.schedule.persist()  # progress 0 on disk...
        (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{1:2}}')
        b.clock.advance(100)
        deliver(b)  # ...then everything delivered: the crash comes before the next write
        assert len(delayed(b)) == 7
        await b.send("T", b"after", props={"DELAY": "1"})
        await b.stop()
        b = await start(tmp_path, 5000, store={"message_delay_level": "1s 2s"})
        assert b.c.schedule.offset_table == {1: 2}
        deliver(b)
        bodies = [m.body for m in delayed(b)]
        assert bodies == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5", b"retry", b"after"]
        assert b.c.schedule.skipped_as_delivered == 5
        assert b.c.schedule.offset_table == {1: 8}
        await b.stop()

    run(main())


def test_pending_delays_survive_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await b.send("T", b"x", props={"DELAY": "4"})  # 30 s
        b.clock.advance(10_000)
        deliver(b)
        await b.stop()
        b = await start(tmp_path, 20_000)  # 20 s after the send
        assert deliver(b) == 10_000
        b.clock.advance(10_000)
        deliver(b)
        assert [m.body for m in delayed(b)] == [b"x"]
        await b.stop()

    run(main())


def test_clock_going_back_delivers_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, 3_600_000)
        await b.send("T", b"x", props={"DELAY": "2"})
        await b.stop()
        b = await start(tmp_path)  # an hour earlier: the entry looks due in 1 h 5 s
        assert deliver(b) is None
        assert [m.body for m in delayed(b)] == [b"x"]
        await b.stop()

    run(main())


def test_timer_messages_without_the_wheel_and_delayed_batches_are_refused(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        b = await start(tmp_path, store={"timer_wheel_enable": False})
        r = await b.send("T", b"x", props={"TIMER_DELIVER_MS": "1700000100000"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert "timer" in (r.remark or "")
        r = await b.send("T", b"x", props={"TIMER_DELAY_SEC": "5", "DELAY": "1"})
        assert r.code == ResponseCode.SUCCESS  # DELAY wins
        (entry,) = delayed(b, SCHEDULE, 0)
        assert "TIMER_DELAY_SEC" not in entry.properties
        header = b.send_header("T", 0, batch=True).to_v2()
        body = encode_batch([(b"a", 0, {"DELAY": "2"})])
        r = await b.answer(RequestCode.SEND_BATCH_MESSAGE, header, body)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        await b.stop()

    run(main())


def test_missing_or_undecodable_entries_are_skipped(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await b.send("T", b"x", props={"DELAY": "1"})
        await b.send("T", b"y", props={"DELAY": "1"})
        b.c.store.wait_dispatched()
        first = b.c.store.get_consume_queue(SCHEDULE, 0).get_entry(0)  # type: ignore[union-attr]
        assert first is not None
        b.c.store.commit_log.queue.files[0].mm[first[0] + 4 : first[0] + 8] = b"\0\0\0\0"
        b.clock.advance(1000)
        deliver(b)
        assert [m.body for m in delayed(b)] == [b"y"]
        assert b.c.schedule.offset_table == {1: 2}
        await b.stop()

    run(main())


def test_a_zeroed_queue_entry_is_skipped_not_looped_on(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await b.send("T", b"x", props={"DELAY": "1"})
        await b.send("T", b"y", props={"DELAY": "1"})
        b.c.store.wait_dispatched()
        cq = b.c.store.get_consume_queue(SCHEDULE, 0)
        assert cq is not None
        cq.queue.files[0].mm[0:20] = bytes(20)
        b.clock.advance(1000)
        deliver(b)
        assert [m.body for m in delayed(b)] == [b"y"]
        assert b.c.schedule.offset_table == {1: 2}
        await b.stop()

    run(main())
