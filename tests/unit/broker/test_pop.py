"""POP consumption through the dispatcher, on a real store with a manual clock: pop, ack,
checkpoints, the revive service and retry topics, change of invisible time, dead letters,
FIFO pops, long polling, peek and notification, restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ariane.broker.pop import PopRequest
from ariane.client._pop_api import PopStatus, decode_pop_response, receipt_handle_of
from ariane.common.message import MessageExt
from ariane.common.pop import REVIVE_GROUP, ReceiptHandle, revive_topic
from ariane.common.record import decode_records
from ariane.common.sysflag import PULL_SUBSCRIPTION
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.headers import pop as hp
from ariane.remoting.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody
from tests.unit.broker.harness import Broker, run

REVIVE = revive_topic("DefaultCluster")


async def start(root: Path, **config: Any) -> Broker:
    config.setdefault("pop_from_retry_probability", 0)
    return await Broker(root, **config).start()


async def pop(
    b: Broker,
    topic: str = "T",
    group: str = "G",
    *,
    queue_id: int = -1,
    n: int = 32,
    invisible: int = 10_000,
    poll: int = 0,
    order: bool = False,
    attempt: str | None = None,
    init_mode: int = 0,
    exp: str | None = None,
    exp_type: str = "TAG",
) -> RemotingCommand:
    header = hp.PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=n,
        invisible_time=invisible, poll_time=poll, born_time=b.clock.now_ms(),
        init_mode=init_mode, exp=exp, exp_type=exp_type if exp else None, order=order,
        attempt_id=attempt,
    )  # fmt: skip
    return await b.answer(RequestCode.POP_MESSAGE, header)


def popped(r: RemotingCommand, order: bool = False) -> list[MessageExt]:
    result = decode_pop_response(r, "broker-a", order)
    return result.messages if result.status is PopStatus.FOUND else []


async def ack(b: Broker, msg: MessageExt, topic: str | None = None) -> RemotingCommand:
    handle = receipt_handle_of(msg)
    header = hp.AckMessageRequestHeader(
        consumer_group="G", topic=topic or handle.real_topic(msg.topic, "G"),
        queue_id=handle.queue_id, extra_info=handle.encode(), offset=handle.queue_offset,
    )  # fmt: skip
    return await b.answer(RequestCode.ACK_MESSAGE, header)


async def change(b: Broker, msg: MessageExt, invisible: int) -> RemotingCommand:
    handle = receipt_handle_of(msg)
    header = hp.ChangeInvisibleTimeRequestHeader(
        consumer_group="G", topic=handle.real_topic(msg.topic, "G"), queue_id=handle.queue_id,
        extra_info=handle.encode(), offset=handle.queue_offset, invisible_time=invisible,
    )  # fmt: skip
    return await b.answer(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header)


async def revive(b: Broker) -> int:
    """Write the checkpoints held too long, deliver the due revive records (timer wheel),
    then revive."""
    b.c.pop.buffer.scan()
    b.c.store.wait_dispatched()
    b.c.timer.wheel.run_pass()
    b.c.store.wait_dispatched()
    n = await b.c.pop.revive.revive_all()
    b.c.store.wait_dispatched()
    return n


async def fill(b: Broker, bodies: list[bytes], queue_id: int = 0, **kw: Any) -> None:
    for body in bodies:
        r = await b.send("T", body, queue_id=queue_id, **kw)
        assert r.code == ResponseCode.SUCCESS, r.remark


def test_pop_leases_messages_commits_at_once_and_answers_210_when_empty(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, enable_pop_buffer_merge=False)
        await fill(b, [b"a", b"b"], queue_id=1)
        await fill(b, [b"c"], queue_id=3)
        r = await pop(b)
        assert r.code == ResponseCode.SUCCESS, r.remark
        hdr = hp.PopMessageResponseHeader.from_ext_fields(r.ext_fields)
        assert hdr.invisible_time == 10_000
        assert 0 <= hdr.revive_qid < 8
        assert hdr.pop_time == b.clock.now_ms()
        assert sorted((hdr.start_offset_info or "").split(";")) == ["0 1 0", "0 3 0"]
        assert sorted((hdr.msg_offset_info or "").split(";")) == ["0 1 0,1", "0 3 0"]
        msgs = popped(r)
        assert sorted(m.body for m in msgs) == [b"a", b"b", b"c"]
        by_body = {m.body: receipt_handle_of(m) for m in msgs}
        assert by_body[b"b"] == ReceiptHandle(
            0, hdr.pop_time, 10_000, hdr.revive_qid, "0", "broker-a", 1, 1
        )
        # the group's offsets moved at pop time, not at ack time
        assert b.c.offsets.query("G", "T", 1) == 2
        assert b.c.offsets.query("G", "T", 3) == 1
        again = await pop(b)
        assert again.code == ResponseCode.POLLING_TIMEOUT
        assert hp.PopMessageResponseHeader.from_ext_fields(again.ext_fields).rest_num == 0
        # one checkpoint per queue went to the revive topic (through the timer wheel)
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0) == 2
        await b.stop()

    run(main())


def test_unacked_messages_come_back_through_the_retry_topic(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"m0", b"m1", b"m2"], tags="A")
        msgs = popped(await pop(b))
        assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"]
        assert (await ack(b, msgs[0])).code == ResponseCode.SUCCESS
        assert (await ack(b, msgs[2])).code == ResponseCode.SUCCESS
        b.clock.advance(9_999)
        assert await revive(b) == 0  # still invisible
        b.clock.advance(1)
        assert await revive(b) == 1
        retry = "%RETRY%G_T"
        assert b.c.store.get_max_offset_in_queue(retry, 0) == 1
        assert b.c.topics.get(retry) is not None
        assert await revive(b) == 0  # revived once only
        (again,) = popped(await pop(b))
        assert again.body == b"m1"
        assert again.topic == "T"  # relabelled
        assert again.reconsume_times == 1
        assert again.tags == "A"
        assert again.msg_id == msgs[1].msg_id
        assert again.properties["1ST_POP_TIME"] == str(receipt_handle_of(msgs[1]).pop_time)
        handle = receipt_handle_of(again)
        assert (handle.retry_flag, handle.queue_id, handle.queue_offset) == ("1", 0, 0)
        assert (await ack(b, again)).code == ResponseCode.SUCCESS
        b.clock.advance(20_000)
        assert await revive(b) == 0
        assert b.c.store.get_max_offset_in_queue(retry, 0) == 1
        # the revive progress moved past everything
        qid = handle.revive_qid
        assert b.c.offsets.query(REVIVE_GROUP, REVIVE, qid) == b.c.store.get_max_offset_in_queue(
            REVIVE, qid
        )
        assert b.c.pop.revive.waiting == 0
        await b.stop()

    run(main())


def test_retry_topic_is_read_first_one_time_in_five(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, pop_from_retry_probability=100)
        await fill(b, [b"old"])
        (_m,) = popped(await pop(b))
        b.clock.advance(10_000)
        assert await revive(b) == 1
        await fill(b, [b"new"])
        r = await pop(b, n=1)
        (first,) = popped(r)
        assert first.body == b"old"
        assert hp.PopMessageResponseHeader.from_ext_fields(r.ext_fields).rest_num == 1
        await b.stop()

    run(main())


def test_change_invisible_time_restarts_the_lease_from_now(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"slow"])
        (m,) = popped(await pop(b))
        b.clock.advance(5_000)
        r = await change(b, m, 30_000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        hdr = hp.ChangeInvisibleTimeResponseHeader.from_ext_fields(r.ext_fields)
        assert (hdr.pop_time, hdr.invisible_time) == (b.clock.now_ms(), 30_000)
        b.clock.advance(10_000)  # past the first lease
        assert await revive(b) == 0
        b.clock.advance(20_000)
        assert await revive(b) == 1
        (again,) = popped(await pop(b))
        assert again.body == b"slow"
        await b.stop()

    run(main())


def test_ack_after_change_uses_the_new_handle(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"x"])
        (m,) = popped(await pop(b))
        result = await b.c.pop.change_by_handle("G", "T", receipt_handle_of(m), 20_000)
        assert result.ok
        assert result.handle is not None
        assert result.handle.ck_start_offset == 0
        assert result.handle.queue_offset == 0
        assert b.c.pop.ack_by_handle("G", "T", result.handle).ok
        b.clock.advance(60_000)
        assert await revive(b) == 0
        await b.stop()

    run(main())


def test_messages_delivered_too_often_go_to_the_dlq(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        b.c.groups.put(SubscriptionGroupConfig("G", retry_max_times=1))
        await fill(b, [b"poison"], props={"KEYS": "k1"})
        (m,) = popped(await pop(b))
        b.clock.advance(10_000)
        assert await revive(b) == 1  # attempt 2 through the retry topic
        (again,) = popped(await pop(b))
        assert again.reconsume_times == 1
        b.clock.advance(10_000)
        assert await revive(b) == 1
        assert b.c.store.get_max_offset_in_queue("%RETRY%G_T", 0) == 1
        dlq = b.c.store.get_message("G", "%DLQ%G", 0, 0, 8)
        (dead,) = decode_records(b"".join(dlq.messages))
        assert dead.body == b"poison"
        assert dead.msg_id == m.msg_id
        assert dead.properties["DLQ_ORIGIN_TOPIC"] == "T"
        assert dead.properties["KEYS"] == "k1"
        assert popped(await pop(b)) == []
        await b.stop()

    run(main())


def test_filters_and_filtered_ranges_are_consumed(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, enable_property_filter=True, enable_pop_buffer_merge=False)
        for i, tag in enumerate("ABAB"):
            await b.send("T", f"m{i}".encode(), tags=tag)
        msgs = popped(await pop(b, exp="B"))
        assert [m.body for m in msgs] == [b"m1", b"m3"]
        assert b.c.offsets.query("G", "T", 0) == 4
        await b.send("T", b"m4", tags="A")
        assert popped(await pop(b, exp="B")) == []
        assert b.c.offsets.query("G", "T", 0) == 5  # the filtered range is committed
        bad = await pop(b, exp="a ||| b", exp_type="SQL92")
        assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        await b.stop()

    run(main())


def test_init_mode_max_starts_at_the_newest_message(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, init_pop_offset_by_check_msg_in_mem=False)
        await fill(b, [b"1", b"2", b"3"])
        msgs = popped(await pop(b, queue_id=0, init_mode=1))
        assert [m.body for m in msgs] == [b"3"]
        b2 = popped(await pop(b, "T", "G2", queue_id=0, init_mode=0))
        assert [m.body for m in b2] == [b"1", b"2", b"3"]
        await b.stop()

    run(main())


def test_bad_requests_get_clear_errors(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"x"])
        assert (await pop(b, n=33)).code == ResponseCode.INVALID_PARAMETER
        assert (await pop(b, "NoSuchTopic")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await pop(b, queue_id=99)).code == ResponseCode.INVALID_PARAMETER
        (m,) = popped(await pop(b))
        handle = receipt_handle_of(m)
        header = hp.AckMessageRequestHeader(
            consumer_group="G", topic="T", queue_id=0, extra_info="not a handle", offset=0
        )
        r = await b.answer(RequestCode.ACK_MESSAGE, header)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        header = hp.AckMessageRequestHeader(
            consumer_group="G", topic="T", queue_id=0, extra_info=handle.encode(), offset=7
        )
        assert (await b.answer(RequestCode.ACK_MESSAGE, header)).code == ResponseCode.NO_MESSAGE
        header = hp.AckMessageRequestHeader(
            consumer_group="G", topic="T", queue_id=9, extra_info=handle.encode(), offset=0
        )
        r = await b.answer(RequestCode.ACK_MESSAGE, header)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        missing = await b.answer(RequestCode.POP_MESSAGE, {"topic": "T"})
        assert missing.code == ResponseCode.INVALID_PARAMETER
        assert "consumerGroup" in (missing.remark or "")
        r = await b.answer(RequestCode.BATCH_ACK_MESSAGE, None, b"{not json")
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        await b.stop()

    run(main())


def test_batch_ack(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"0", b"1", b"2", b"3"])
        msgs = popped(await pop(b))
        h0 = receipt_handle_of(msgs[0])
        entry = BatchAck(
            "G", "T", "0", h0.ck_start_offset, 0, h0.revive_qid, h0.pop_time, h0.invisible_time,
            (0, 2, 3),
        )  # fmt: skip
        body = BatchAckMessageRequestBody("broker-a", [entry]).encode()
        r = await b.answer(RequestCode.BATCH_ACK_MESSAGE, None, body)
        assert r.code == ResponseCode.SUCCESS, r.remark
        b.clock.advance(10_000)
        assert await revive(b) == 1
        (again,) = popped(await pop(b))
        assert again.body == b"1"
        empty = BatchAckMessageRequestBody("broker-a", []).encode()
        r = await b.answer(RequestCode.BATCH_ACK_MESSAGE, None, empty)
        assert r.code == ResponseCode.NO_MESSAGE
        await b.stop()

    run(main())


def test_fifo_pop_blocks_the_queue_until_acked(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"a", b"b", b"c"])
        r = await pop(b, n=2, order=True, attempt="x1")
        hdr = hp.PopMessageResponseHeader.from_ext_fields(r.ext_fields)
        assert hdr.revive_qid == 999
        first = popped(r, order=True)
        assert [m.body for m in first] == [b"a", b"b"]
        assert all(m.reconsume_times == 0 for m in first)
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0) == 0  # no checkpoint
        # blocked for other attempts; the same attempt gets the same batch, uncounted
        assert popped(await pop(b, order=True, attempt="x2")) == []
        same = popped(await pop(b, n=2, order=True, attempt="x1"), order=True)
        assert [m.body for m in same] == [b"a", b"b"]
        assert all(m.reconsume_times == 0 for m in same)
        assert (await ack(b, same[0])).code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 1
        assert popped(await pop(b, order=True, attempt="x3")) == []  # b is not acked
        assert (await ack(b, same[1])).code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 2
        (c,) = popped(await pop(b, order=True, attempt="x4"), order=True)
        assert c.body == b"c"
        # the lease ends: c comes back, counted, in order
        b.clock.advance(10_000)
        (c2,) = popped(await pop(b, order=True, attempt="x5"), order=True)
        assert (c2.body, c2.reconsume_times) == (b"c", 1)
        stale = await ack(b, c)  # a handle of the earlier batch: a silent no-op
        assert stale.code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 2
        assert (await ack(b, c2)).code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 3
        await b.stop()

    run(main())


def test_fifo_gap_redelivers_from_the_first_unacked(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"a", b"b", b"c"])
        msgs = popped(await pop(b, order=True), order=True)
        assert (await ack(b, msgs[1])).code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 0
        r = await change(b, msgs[0], 1_000)
        hdr = hp.ChangeInvisibleTimeResponseHeader.from_ext_fields(r.ext_fields)
        assert hdr.revive_qid == 999
        assert hdr.pop_time == receipt_handle_of(msgs[0]).pop_time
        b.clock.advance(1_000)
        assert popped(await pop(b, order=True)) == []  # c is still invisible
        b.clock.advance(9_000)
        again = popped(await pop(b, order=True), order=True)
        assert [(m.body, m.reconsume_times) for m in again] == [(b"a", 1), (b"b", 1), (b"c", 1)]
        await b.stop()

    run(main())


def test_fifo_dead_letters_after_max_attempts(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        b.c.groups.put(SubscriptionGroupConfig("G", retry_max_times=1))
        await fill(b, [b"p", b"q"])
        for attempt in range(2):
            msgs = popped(await pop(b, n=1, order=True), order=True)
            assert [(m.body, m.reconsume_times) for m in msgs] == [(b"p", attempt)]
            b.clock.advance(10_000)
        (q,) = popped(await pop(b, n=1, order=True), order=True)
        assert q.body == b"q"
        b.c.store.wait_dispatched()
        dlq = b.c.store.get_message("G", "%DLQ%G", 0, 0, 8)
        assert [m.body for m in decode_records(b"".join(dlq.messages))] == [b"p"]
        assert b.c.offsets.query("G", "T", 0) == 1
        await b.stop()

    run(main())


def test_long_polling_pop_is_answered_when_a_message_arrives(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        b.c.topics.create_in_send_back("T", 4, 6)
        header = hp.PopMessageRequestHeader(
            consumer_group="G", topic="T", queue_id=-1, max_msg_nums=4, invisible_time=10_000,
            poll_time=30_000, born_time=b.clock.now_ms(), init_mode=0,
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        b.c.remoting.dispatcher.handle_request(b.channel, request)  # type: ignore[arg-type]
        for _ in range(5):
            await asyncio.sleep(0)
        assert b.channel.sent == []
        assert b.c.pop.polling.total == 1
        info = hp.PollingInfoRequestHeader(consumer_group="G", topic="T", queue_id=-1)
        r = await b.answer(RequestCode.POLLING_INFO, info)
        assert hp.PollingInfoResponseHeader.from_ext_fields(r.ext_fields).polling_num == 1
        before = len(b.channel.sent)
        await b.send("T", b"wake", queue_id=2)
        for _ in range(200):
            if len(b.channel.sent) > before + 1:
                break
            await asyncio.sleep(0.01)
        answer = b.channel.sent[-1]
        assert answer.code == ResponseCode.SUCCESS
        assert [m.body for m in popped(answer)] == [b"wake"]
        assert b.c.pop.polling.total == 0
        await b.stop()

    run(main())


def test_peek_and_notification(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        b.c.topics.create_in_send_back("T", 2, 6)
        peek = hp.PeekMessageRequestHeader(
            topic="T", queue_id=-1, max_msg_nums=8, consumer_group="G"
        )
        assert (await b.answer(RequestCode.PEEK_MESSAGE, peek)).code == ResponseCode.PULL_NOT_FOUND
        note = hp.NotificationRequestHeader(
            consumer_group="G", topic="T", queue_id=-1, poll_time=0, born_time=b.clock.now_ms()
        )
        r = await b.answer(RequestCode.NOTIFICATION, note)
        assert r.code == ResponseCode.SUCCESS
        assert hp.NotificationResponseHeader.from_ext_fields(r.ext_fields).has_msg is False
        await fill(b, [b"seen"], queue_id=1)
        r = await b.answer(RequestCode.PEEK_MESSAGE, peek)
        assert [m.body for m in decode_records(r.body or b"")] == [b"seen"]
        r = await b.answer(RequestCode.NOTIFICATION, note)
        assert hp.NotificationResponseHeader.from_ext_fields(r.ext_fields).has_msg is True
        assert b.c.offsets.query("G", "T", 1) == -1  # peeking leases nothing
        await b.stop()

    run(main())


def test_revive_state_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"k0", b"k1"])
        msgs = popped(await pop(b, invisible=60_000))
        assert (await ack(b, msgs[0])).code == ResponseCode.SUCCESS
        b.clock.advance(1_000)
        assert await revive(b) == 0
        await b.c.pop.stop()
        for f in (b.c.offsets.file, b.c.topics.file):
            f.write_now()
        await b.stop()
        b2 = Broker(tmp_path, pop_from_retry_probability=0)
        b2.clock.advance(b.clock.now_ms() - b2.clock.now_ms() + 60_000)
        await b2.start()
        assert await revive(b2) == 1
        (again,) = popped(await pop(b2))
        assert again.body == b"k1"
        await b2.stop()

    run(main())


def test_pop_and_pull_consumers_of_different_groups_side_by_side(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path, enable_pop_buffer_merge=False)
        await fill(b, [b"one", b"two"])
        msgs = popped(await pop(b))
        assert [m.body for m in msgs] == [b"one", b"two"]
        pull = b.pull_header("T", "PushGroup", sys_flag=PULL_SUBSCRIPTION)
        r = await b.answer(RequestCode.PULL_MESSAGE, pull)
        assert [m.body for m in decode_records(r.body or b"")] == [b"one", b"two"]
        assert b.c.offsets.query("PushGroup", "T", 0) == -1
        assert b.c.offsets.query("G", "T", 0) == 2
        await b.stop()

    run(main())


def test_python_api_pop_decodes_messages_with_handles(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"api"])
        result = await b.c.pop.pop(PopRequest("G", "T", init_mode=0))
        (pm,) = result.messages()
        assert pm.message.body == b"api"
        assert pm.delivery_attempt == 1
        assert pm.handle.commit_log_offset == pm.message.commit_log_offset
        assert len(pm.receipt_handle.split(" ")) == 9
        assert b.c.pop.ack_by_handle("G", "T", pm.receipt_handle).ok
        await b.stop()

    run(main())


def test_held_checkpoints_acked_in_time_write_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"a", b"b", b"c"])
        msgs = popped(await pop(b, invisible=30_000))
        assert b.c.pop.buffer.held == 1
        assert b.c.offsets.query("G", "T", 0) == 0  # not committed while held and unacked
        assert popped(await pop(b)) == []  # yet the next pop reads on
        for m in msgs:
            assert (await ack(b, m)).code == ResponseCode.SUCCESS
        assert b.c.pop.buffer.held == 0
        assert b.c.offsets.query("G", "T", 0) == 3  # all acked: committed
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0) == 0  # no writes
        b.clock.advance(60_000)
        assert await revive(b) == 0
        await b.stop()

    run(main())


def test_held_checkpoint_written_with_what_is_still_unacked(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"a", b"b", b"c"])
        msgs = popped(await pop(b, invisible=30_000))
        assert (await ack(b, msgs[0])).code == ResponseCode.SUCCESS
        b.clock.advance(9_000)
        assert b.c.pop.buffer.scan() == 0  # held up to 10 s
        b.clock.advance(1_001)
        assert b.c.pop.buffer.scan() == 1
        assert b.c.offsets.query("G", "T", 0) == 3  # stored: committed
        b.c.store.wait_dispatched()
        (written,) = [
            m
            for m in decode_records(
                b"".join(b.c.store.get_message("G", "rmq_sys_wheel_timer", 0, 0, 8).messages)
            )
        ]
        assert written.properties["TAGS"] == "ck"
        assert b'"d":[1,2]' in written.body
        assert (await ack(b, msgs[2])).code == ResponseCode.SUCCESS  # an ack record now
        b.clock.advance(30_000)
        assert await revive(b) == 1
        (again,) = popped(await pop(b))
        assert again.body == b"b"
        await b.stop()

    run(main())


def test_graceful_stop_writes_held_checkpoints(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"kept"])
        popped(await pop(b, invisible=30_000))
        await b.c.pop.stop()
        assert b.c.pop.buffer.held == 0
        assert b.c.offsets.query("G", "T", 0) == 1
        b.clock.advance(31_000)
        assert await revive(b) == 1
        await b.stop()

    run(main())


def test_a_crash_loses_held_checkpoints_but_no_message(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"x", b"y"])
        assert len(popped(await pop(b, invisible=30_000))) == 2
        for f in (b.c.offsets.file, b.c.topics.file):
            f.write_now()  # offsets on disk: not past the held checkpoint
        await b.stop()
        b2 = await start(tmp_path)
        assert [m.body for m in popped(await pop(b2))] == [b"x", b"y"]
        await b2.stop()

    run(main())


def test_ack_of_a_checkpoint_about_to_be_written_is_recorded_after_it(tmp_path: Path) -> None:
    async def main() -> None:
        b = await start(tmp_path)
        await fill(b, [b"late", b"never"])
        msgs = popped(await pop(b, invisible=30_000))
        b.clock.advance(9_000)  # past popCkStayBufferTime - 1.5 s: no more in-memory acks
        assert (await ack(b, msgs[0])).code == ResponseCode.SUCCESS
        assert b.c.pop.buffer.held == 0  # written at once, before the ack record
        b.c.store.wait_dispatched()
        tags = [
            m.properties["TAGS"]
            for m in decode_records(
                b"".join(b.c.store.get_message("G", "rmq_sys_wheel_timer", 0, 0, 8).messages)
            )
        ]
        assert tags == ["ck", "ack"]
        b.clock.advance(30_000)
        assert await revive(b) == 1  # only the un-acked one
        (again,) = popped(await pop(b))
        assert again.body == b"never"
        await b.stop()

    run(main())


def test_the_buffer_says_when_it_gets_work_and_when_it_has_none(tmp_path: Path) -> None:
    """The broker's periodic pass over held checkpoints sleeps while the buffer is idle and
    starts again when ``on_work`` is called."""

    async def main() -> None:
        b = await start(tmp_path)
        buffer = b.c.pop.buffer
        woken: list[int] = []
        buffer.on_work = lambda: woken.append(buffer.held)
        assert buffer.idle
        await fill(b, [b"a", b"b"])
        msgs = popped(await pop(b, invisible=30_000))
        assert (woken, buffer.idle) == ([1], False)
        await fill(b, [b"c"])
        assert len(popped(await pop(b, invisible=30_000))) == 1  # busy already: no new call
        assert woken == [1]
        for m in msgs:
            assert (await ack(b, m)).code == ResponseCode.SUCCESS
        assert not buffer.idle  # "c" is still held
        b.clock.advance(60_000)
        assert buffer.scan() == 1  # "c"'s checkpoint written
        b.c.store.wait_dispatched()
        buffer.scan()  # its write stored: committed
        assert buffer.idle
        await b.stop()

    run(main())
