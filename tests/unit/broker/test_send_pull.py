"""Send and pull processors through the dispatcher, on a real store (no sockets)."""

from __future__ import annotations

from pathlib import Path

from ariane.common.msgid import create_offset_msg_id, decode_offset_msg_id
from ariane.common.record import decode_records
from ariane.common.sysflag import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import FlushDiskType, MessageInner
from tests.unit.broker.harness import Broker, FakeChannel, run


def test_send_auto_creates_topic_and_answers_offset_msg_id(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.send("Orders", b"one", tags="TagA", keys="k1")
        assert r.code == ResponseCode.SUCCESS, r.remark
        hdr = h.SendMessageResponseHeader.from_ext_fields(r.ext_fields)
        assert (hdr.queue_id, hdr.queue_offset) == (0, 0)
        assert r.ext_fields["MSG_REGION"] == "DefaultRegion"
        assert r.ext_fields["TRACE_ON"] == "true"
        assert hdr.transaction_id
        assert len(hdr.transaction_id) == 32
        tc = b.c.topics.get("Orders")
        assert tc is not None
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)
        r2 = await b.send("Orders", b"two", v2=False)
        hdr2 = h.SendMessageResponseHeader.from_ext_fields(r2.ext_fields)
        assert hdr2.queue_offset == 1
        phys = decode_offset_msg_id(hdr2.msg_id).phys_offset
        record = b.c.store.look_message_by_offset(phys)
        assert record is not None
        (msg,) = decode_records(record)
        assert msg.body == b"two"
        assert msg.properties["CLUSTER"] == "DefaultCluster"
        assert msg.store_host.port == 10911
        await b.stop()

    run(main())


def test_send_checks(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.send("bad topic!")
        assert r.code == ResponseCode.INVALID_PARAMETER
        r = await b.send("TBW102")
        assert r.code == ResponseCode.NO_PERMISSION
        r = await b.send("SCHEDULE_TOPIC_XXXX")
        assert r.code == ResponseCode.NO_PERMISSION
        assert (await b.send("T")).code == ResponseCode.SUCCESS
        r = await b.send("T", queue_id=4)
        assert r.code == ResponseCode.INVALID_PARAMETER
        assert "queueId[4] is illegal" in (r.remark or "")
        r = await b.send("T", queue_id=-1)
        assert r.code == ResponseCode.SUCCESS
        assert 0 <= int(r.ext_fields["queueId"]) < 4
        b.c.topics.get("T").perm = 4  # type: ignore[union-attr]
        assert (await b.send("T")).code == ResponseCode.NO_PERMISSION
        r = await b.answer(RequestCode.SEND_MESSAGE, {"topic": "T"}, b"x")
        assert r.code == ResponseCode.INVALID_PARAMETER
        assert "producerGroup is missing" in (r.remark or "")
        big = b"x" * (16 * 1024)
        assert (await b.send("T2", big)).code == ResponseCode.MESSAGE_ILLEGAL
        await b.stop()

    run(main())


def test_auto_creation_can_be_turned_off(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, auto_create_topic_enable=False).start()
        assert b.c.topics.get("TBW102") is None
        r = await b.send("Nope")
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        await b.stop()

    run(main())


def test_broker_permission_blocks_send_and_pull(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, broker_permission=4).start()
        assert (await b.send("T")).code == ResponseCode.NO_PERMISSION
        wrapper = b.c.registration.wrapper()
        assert all(tc.perm & 2 == 0 for tc in wrapper.topic_config_table.values())
        await b.stop()
        b = await Broker(tmp_path / "2", broker_permission=2).start()
        assert (await b.send("T")).code == ResponseCode.SUCCESS
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=PULL_SUBSCRIPTION))
        assert r.code == ResponseCode.NO_PERMISSION
        await b.stop()

    run(main())


def test_batch_send_stores_consecutive_offsets(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = r_batch = await b.send_batch("B", [b"a", b"b", b"c"], queue_id=1)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueOffset"] == "0"
        assert len(r.ext_fields["msgId"].split(",")) == 3
        r = await b.answer(
            RequestCode.PULL_MESSAGE, b.pull_header("B", queue_id=1, sys_flag=PULL_SUBSCRIPTION)
        )
        msgs = decode_records(r.body or b"")
        assert [m.body for m in msgs] == [b"a", b"b", b"c"]
        assert [m.queue_offset for m in msgs] == [0, 1, 2]
        assert [m.properties["UNIQ_KEY"] for m in msgs] == ["U0", "U1", "U2"]
        # the answer's msgId: each stored record's offsetMsgId, in order, comma-joined
        host = b.c.store_host
        assert r_batch.ext_fields["msgId"] == ",".join(
            create_offset_msg_id(host.addr, host.port, m.commit_log_offset) for m in msgs
        )
        header = h.SendMessageRequestHeaderV2(
            producer_group="PG", topic="B", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=0, flag=0, batch=True,
        )  # fmt: skip
        r = await b.answer(RequestCode.SEND_BATCH_MESSAGE, header, b"\x00\x00\x00\x05garbage")
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        header.topic = "%RETRY%G"
        r = await b.answer(RequestCode.SEND_BATCH_MESSAGE, header, b"")
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        await b.stop()

    run(main())


def test_pull_statuses_and_tag_filter(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        for i in range(6):
            await b.send("T", f"m{i}".encode(), tags="A" if i % 2 == 0 else "B")
        sub = PULL_SUBSCRIPTION
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub))
        assert r.code == ResponseCode.SUCCESS
        assert r.ext_fields["nextBeginOffset"] == "6"
        assert [m.body for m in decode_records(r.body or b"")] == [
            f"m{i}".encode() for i in range(6)
        ]
        r = await b.answer(
            RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub, subscription="A")
        )
        assert [m.body for m in decode_records(r.body or b"")] == [b"m0", b"m2", b"m4"]
        r = await b.answer(
            RequestCode.PULL_MESSAGE,
            b.pull_header("T", sys_flag=sub, subscription="C", offset=0),
        )
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert r.ext_fields["nextBeginOffset"] == "6"
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub, offset=6))
        assert (r.code, r.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub, offset=99))
        assert r.code == ResponseCode.PULL_OFFSET_MOVED
        assert r.ext_fields["nextBeginOffset"] == "0"
        r = await b.answer(
            RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub, queue_id=1, offset=3)
        )
        assert r.code == ResponseCode.PULL_OFFSET_MOVED  # empty queue, offset != 0
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=sub, queue_id=9))
        assert r.code == ResponseCode.INVALID_PARAMETER
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("Nope", sys_flag=sub))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=0))
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        await b.stop()

    run(main())


def test_pull_uses_registered_subscription_and_commits_offset(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.send("T", b"x", tags="A")
        await b.heartbeat("c1", "G", ("T",))
        r = await b.answer(
            RequestCode.PULL_MESSAGE,
            b.pull_header("T", sys_flag=PULL_COMMIT_OFFSET, commit_offset=1),
        )
        assert r.code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 1
        header = b.pull_header("T", sys_flag=0)
        header.sub_version = 1 << 50
        r = await b.answer(RequestCode.PULL_MESSAGE, header)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
        await b.stop()

    run(main())


def test_suspended_pull_is_answered_when_a_message_arrives(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.send("T", b"first")
        ch = FakeChannel("127.0.0.1:40000")
        header = b.pull_header("T", offset=1, sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND)
        await b.call(RequestCode.PULL_MESSAGE, header, channel=ch, expect_answer=False)
        assert b.c.hold.held_count == 1
        await b.send("T", b"second")
        # the store reports the arrival from its dispatch thread; let it reach the loop
        for _ in range(2000):
            if ch.sent:
                break
            b.c.store.wait_dispatched()
            await __import__("asyncio").sleep(0.001)
        (r,) = ch.sent
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(r.body or b"")] == [b"second"]
        assert b.c.hold.held_count == 0
        await b.stop()

    run(main())


def test_suspended_pull_of_a_closed_connection_is_dropped(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.send("T", b"first")
        ch = FakeChannel("127.0.0.1:40001")
        header = b.pull_header("T", offset=1, sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND)
        await b.call(RequestCode.PULL_MESSAGE, header, channel=ch, expect_answer=False)
        assert b.c.hold.held_count == 1
        ch.close()
        b.c._on_channel_closed(ch)  # type: ignore[arg-type]
        assert b.c.hold.held_count == 0
        await b.stop()

    run(main())


def test_sync_flush_send_is_answered_after_the_group_commit(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, store={"flush_disk_type": FlushDiskType.SYNC_FLUSH}).start()
        ch = FakeChannel()
        header = h.SendMessageRequestHeader(
            producer_group="PG", topic="S", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
        )  # fmt: skip
        from ariane.remoting.protocol.command import RemotingCommand

        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), b"x")
        b.c.remoting.dispatcher.handle_request(ch, request)  # type: ignore[arg-type]
        for _ in range(5000):
            if ch.sent:
                break
            await __import__("asyncio").sleep(0.001)
        (r,) = ch.sent
        assert r.code == ResponseCode.SUCCESS
        assert r.opaque == request.opaque
        await b.stop()

    run(main())


def test_send_to_retry_topic_past_max_goes_to_dlq(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.heartbeat("c1", "G", ("T",))
        r = await b.send("%RETRY%G", b"again", reconsume_times=3)
        assert r.code == ResponseCode.SUCCESS
        assert b.c.store.get_max_offset_in_queue("%RETRY%G", 0) == 1
        r = await b.send("%RETRY%G", b"dead", reconsume_times=17, props={"DELAY": "3"})
        assert r.code == ResponseCode.SUCCESS
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 1
        record = b.c.store.look_message_by_offset(
            decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset
        )
        (msg,) = decode_records(record or b"")
        assert msg.topic == "%DLQ%G"
        assert "DELAY" not in msg.properties
        await b.stop()

    run(main())


def test_consumer_send_msg_back(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.send("T", b"payload", tags="A")
        phys = decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset
        header = h.ConsumerSendMsgBackRequestHeader(offset=phys, group="G", delay_level=0)
        r = await b.answer(RequestCode.CONSUMER_SEND_MSG_BACK, header)
        assert r.code == ResponseCode.SUCCESS, r.remark
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("%RETRY%G", 0) == 0  # delayed: level 3
        assert b.c.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
        b.clock.advance(10_000)
        b.c.schedule.deliver_due()
        b.c.store.wait_dispatched()
        res = b.c.store.get_message("G", "%RETRY%G", 0, 0, 10)
        (msg,) = decode_records(b"".join(res.messages))
        assert msg.body == b"payload"
        assert msg.reconsume_times == 1
        assert msg.properties["RETRY_TOPIC"] == "T"
        assert "DELAY" not in msg.properties
        assert msg.properties["REAL_TOPIC"] == "%RETRY%G"
        assert msg.properties["ORIGIN_MESSAGE_ID"]
        header = h.ConsumerSendMsgBackRequestHeader(offset=phys, group="G", delay_level=-1)
        r = await b.answer(RequestCode.CONSUMER_SEND_MSG_BACK, header)
        assert r.code == ResponseCode.SUCCESS
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 1
        header = h.ConsumerSendMsgBackRequestHeader(offset=10**9, group="G", delay_level=0)
        r = await b.answer(RequestCode.CONSUMER_SEND_MSG_BACK, header)
        assert r.code == ResponseCode.SYSTEM_ERROR
        await b.stop()

    run(main())


def test_transactional_messages_can_be_refused(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, reject_transaction_message=True).start()
        r = await b.send("T", props={"TRAN_MSG": "true"})
        assert r.code == ResponseCode.NO_PERMISSION
        assert "transaction" in (r.remark or "")
        await b.stop()

    run(main())


def test_topics_with_messages_but_no_config_are_restored(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.send("Lost", b"x", queue_id=2)
        await b.stop()
        (tmp_path / "config" / "topics.json").unlink()  # as if killed before it was written
        b = await Broker(tmp_path).start()
        tc = b.c.topics.get("Lost")
        assert tc is not None
        assert (tc.read_queue_nums, tc.perm) == (3, 6)
        r = await b.answer(
            RequestCode.PULL_MESSAGE, b.pull_header("Lost", queue_id=2, sys_flag=PULL_SUBSCRIPTION)
        )
        assert r.code == ResponseCode.SUCCESS
        await b.stop()

    run(main())


def test_message_rewriters_see_sends_and_send_backs(tmp_path: Path) -> None:
    class Delay:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def rewrite(self, inner: MessageInner) -> RemotingCommand | None:
            self.seen.append(inner.topic)
            if inner.topic == "Refused":
                return RemotingCommand.response(ResponseCode.NO_PERMISSION, "no")
            return None

    async def main() -> None:
        b = await Broker(tmp_path).start()
        rewriter = Delay()
        b.c.send_processor.rewriters.insert(0, rewriter)  # before the delay levels
        r = await b.send("T", b"x")
        assert (await b.send("Refused")).code == ResponseCode.NO_PERMISSION
        phys = decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset
        header = h.ConsumerSendMsgBackRequestHeader(offset=phys, group="G", delay_level=2)
        assert (await b.answer(RequestCode.CONSUMER_SEND_MSG_BACK, header)).code == 0
        assert rewriter.seen == ["T", "Refused", "%RETRY%G"]
        await b.stop()

    run(main())


def test_region_and_trace_switch_in_answers_and_stored_messages(tmp_path: Path) -> None:
    """RocketMQ 5 stamps MSG_REGION and TRACE_ON into every stored message (consumers'
    trace hooks read them) and answers them to the producer."""

    async def main() -> None:
        b = await Broker(tmp_path, region_id="eu-1", trace_on=False).start()
        single = await b.send("Traced", b"one")
        assert (single.ext_fields["MSG_REGION"], single.ext_fields["TRACE_ON"]) == ("eu-1", "false")
        kept = await b.send("Traced", b"two", props={"MSG_REGION": "elsewhere"})
        batch = await b.send_batch("Traced", [b"b1", b"b2"])
        assert batch.code == ResponseCode.SUCCESS, batch.remark
        stored = []
        for r in (single, kept):
            phys = decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset
            record = b.c.store.look_message_by_offset(phys)
            assert record is not None
            stored.extend(decode_records(record))
        for off_id in batch.ext_fields["msgId"].split(","):
            record = b.c.store.look_message_by_offset(decode_offset_msg_id(off_id).phys_offset)
            assert record is not None
            stored.extend(decode_records(record))
        got = [(m.body, m.properties["MSG_REGION"], m.properties.get("TRACE_ON")) for m in stored]
        assert got == [
            (b"one", "eu-1", "false"),
            (b"two", "elsewhere", None),  # a region the client set is kept
            (b"b1", "eu-1", "false"),
            (b"b2", "eu-1", "false"),
        ]
        await b.stop()

    run(main())
