"""Retry and dead letters, orderly queue locks, offset resets and message queries through the
dispatcher, on a real store with a manual clock."""

from __future__ import annotations

import json
from pathlib import Path

from ariane.common.msgid import decode_offset_msg_id
from ariane.common.record import decode_records
from ariane.common.sysflag import PERM_WRITE, PULL_SUBSCRIPTION
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import ResetOffsetBody, SubscriptionGroupConfig
from ariane.remoting.protocol.client_bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import LanguageCode, MQVersion, RemotingCommand
from tests.unit.broker.harness import Broker, FakeChannel, run

FAST = {"message_delay_level": "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"}


async def send_back(
    b: Broker, phys: int, *, delay: int = 0, max_times: int | None = None, version: int = 479
) -> RemotingCommand:
    header = h.ConsumerSendMsgBackRequestHeader(
        offset=phys, group="G", delay_level=delay, max_reconsume_times=max_times
    )
    return await b.answer(RequestCode.CONSUMER_SEND_MSG_BACK, header, version=version)


async def take_retry(b: Broker, offset: int) -> tuple[int, int]:
    """Deliver due retries; (physical offset, reconsume count) of retry message ``offset``."""
    b.clock.advance(1000)
    b.c.store.wait_dispatched()
    b.c.schedule.deliver_due()
    b.c.store.wait_dispatched()
    res = b.c.store.get_message("G", "%RETRY%G", 0, offset, 1)
    (msg,) = decode_records(b"".join(res.messages))
    return msg.commit_log_offset, msg.reconsume_times


def test_failed_message_cycles_through_retry_then_dead_letters(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, store=FAST).start()
        await b.heartbeat("c1", "G", ("T",))
        groups = SubscriptionGroupConfig(group_name="G", retry_max_times=3)
        await b.answer(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, groups.encode())
        r = await b.send("T", b"poison", tags="A")
        phys = decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset
        seen = []
        for attempt in range(3):
            assert (await send_back(b, phys)).code == ResponseCode.SUCCESS
            phys, times = await take_retry(b, attempt)
            seen.append(times)
        assert seen == [1, 2, 3]
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 0
        assert (await send_back(b, phys, version=MQVersion.V3_4_9 - 1)).code == 0
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 1
        dlq = b.c.topics.get("%DLQ%G")
        assert dlq is not None
        assert dlq.perm == PERM_WRITE  # written, never consumed unless an admin allows it
        r = await b.answer(
            RequestCode.PULL_MESSAGE, b.pull_header("%DLQ%G", sys_flag=PULL_SUBSCRIPTION)
        )
        assert r.code == ResponseCode.NO_PERMISSION
        res = b.c.store.get_message("G", "%DLQ%G", 0, 0, 1)
        (dead,) = decode_records(b"".join(res.messages))
        assert (dead.body, dead.reconsume_times) == (b"poison", 4)
        assert dead.properties["RETRY_TOPIC"] == "T"
        assert "DELAY" not in dead.properties
        await b.stop()

    run(main())


def test_send_back_honours_the_clients_limits_and_levels(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.send("T", b"x")
        phys = decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset
        assert (await send_back(b, phys, max_times=0)).code == 0  # header wins (version >= 121)
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 1
        assert (await send_back(b, phys, max_times=0, version=100)).code == 0  # group's 16
        assert (await send_back(b, phys, delay=5)).code == 0
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1  # 3 + 0
        assert b.c.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 4) == 1  # asked: 5
        await b.stop()

    run(main())


def test_client_retry_sends_past_the_maximum_or_of_orderly_groups_dead_letter(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.heartbeat("c1", "G", ("T",))
        r = await b.send("%RETRY%G", b"again", reconsume_times=1, props={"DELAY": "3"})
        assert r.code == ResponseCode.SUCCESS
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
        await b.send("%RETRY%G", b"over", reconsume_times=17, props={"DELAY": "3"})
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 1
        body = LockBatchRequestBody("G", "c1", [MessageQueue("T", "broker-a", 0)]).encode()
        await b.answer(RequestCode.LOCK_BATCH_MQ, None, body)
        await b.send("%RETRY%G", b"orderly", reconsume_times=1, props={"DELAY": "3"})
        b.c.store.wait_dispatched()
        assert b.c.store.get_max_offset_in_queue("%DLQ%G", 0) == 2
        await b.stop()

    run(main())


def test_locks_are_released_when_the_connection_closes(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, rebalance_lock_max_live_time_ms=5000).start()
        mqs = [MessageQueue("T", "broker-a", i) for i in range(2)]
        first, second = FakeChannel("127.0.0.1:1"), FakeChannel("127.0.0.1:2")

        async def lock(client: str, ch: FakeChannel) -> list[MessageQueue]:
            body = LockBatchRequestBody("G", client, mqs).encode()
            r = await b.answer(RequestCode.LOCK_BATCH_MQ, None, body, ch)
            return LockBatchResponseBody.decode(r.body or b"").lock_ok_mq_set

        assert await lock("c1", first) == mqs
        assert await lock("c2", second) == []  # one owner per queue per group
        b.clock.advance(5001)  # rebalanceLockMaxLiveTime
        assert await lock("c2", second) == mqs
        assert await lock("c1", first) == []
        first.close()
        b.c._on_channel_closed(first)  # type: ignore[arg-type]
        assert b.c.locks.holder("G", mqs[0]) == "c2"  # c1's closing frees nothing of c2
        second.close()
        b.c._on_channel_closed(second)  # type: ignore[arg-type]
        assert b.c.locks.holder("G", mqs[0]) is None
        assert await lock("c1", FakeChannel()) == mqs  # at once, not after 60 s
        await b.stop()

    run(main())


CPP_HEARTBEAT = json.dumps(
    {
        "clientID": "cpp-1",
        "consumerDataSet": [
            {
                "consumeFromWhere": 0,
                "consumeType": 1,
                "groupName": "G",
                "messageModel": 1,
                "subscriptionDataSet": [
                    {"subString": "*", "subVersion": "1", "tagsSet": [], "topic": "T"}
                ],
            }
        ],
        "producerDataSet": [],
    }
).encode()


def test_reset_by_time_notifies_online_clients_and_the_next_pull(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        for i in range(4):
            await b.send("T", f"m{i}".encode())
            b.clock.advance(1000)
        cpp = FakeChannel("127.0.0.1:3")
        await b.answer(RequestCode.HEART_BEAT, None, CPP_HEARTBEAT, cpp, language=LanguageCode.CPP)
        b.c.offsets.commit("G", "T", 0, 4)
        start = b.clock.now_ms() - 4000
        header = h.ResetOffsetRequestHeader(
            group="G", topic="T", timestamp=start + 2000, is_force=True
        )
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert (
            ResetOffsetBody.decode(r.body or b"").offset_table[MessageQueue("T", "broker-a", 0)]
            == 2
        )
        (told,) = [o for o in cpp.oneway if o.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET]
        assert {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 2} in json.loads(
            told.body or b""
        )["offsetTable"]
        assert b.c.offsets.query("G", "T", 0) == 2
        # a client that followed the notification pulls from 2: served, not moved again
        pull = b.pull_header("T", offset=2, sys_flag=PULL_SUBSCRIPTION)
        r = await b.answer(RequestCode.PULL_MESSAGE, pull)
        assert [m.body for m in decode_records(r.body or b"")] == [b"m2", b"m3"]
        await b.stop()

    run(main())


def test_skip_accumulated_and_explicit_offsets(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        for i in range(3):
            await b.send("T", f"m{i}".encode())
        b.c.offsets.commit("G", "T", 0, 1)
        skip = h.ResetOffsetRequestHeader(group="G", topic="T", timestamp=-1, is_force=True)
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, skip)
        assert r.code == ResponseCode.SUCCESS
        assert b.c.offsets.query("G", "T", 0) == 3
        assert b.c.offsets.query("G", "T", 1) == 0
        one = h.ResetOffsetRequestHeader(
            group="G", topic="T", timestamp=0, is_force=True, queue_id=0, offset=1
        )
        assert (await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, one)).code == 0
        assert b.c.offsets.query("G", "T", 0) == 1
        one.offset = 9
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, one)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert "not in consume queue range" in (r.remark or "")
        not_forced = h.ResetOffsetRequestHeader(group="G", topic="T", timestamp=-1, is_force=False)
        await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, not_forced)
        assert b.c.offsets.query("G", "T", 0) == 1  # never forwards without isForce
        unknown = h.ResetOffsetRequestHeader(group="X", topic="T", timestamp=-1, is_force=True)
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, unknown)
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        await b.stop()

    run(main())


def test_message_queries(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        sent = await b.send("T", b"target", keys="order-7", queue_id=1)
        b.clock.advance(5000)
        await b.send("T", b"later", keys="order-7", queue_id=1)
        uniq = sent.ext_fields["transactionId"]
        ts = b.clock.now_ms()
        by_uniq = h.QueryMessageRequestHeader(
            topic="T", key=uniq, max_num=1, begin_timestamp=0, end_timestamp=1 << 62,
            unique_key_query=True,
        )  # fmt: skip
        r = await b.answer(RequestCode.QUERY_MESSAGE, by_uniq)
        assert [m.body for m in decode_records(r.body or b"")] == [b"target"]
        by_key = h.QueryMessageRequestHeader(
            topic="T", key="order-7", max_num=10, begin_timestamp=ts - 1000, end_timestamp=ts
        )
        r = await b.answer(RequestCode.QUERY_MESSAGE, by_key)  # the time range excludes "target"
        assert [m.body for m in decode_records(r.body or b"")] == [b"later"]
        by_key.begin_timestamp = 0
        r = await b.answer(RequestCode.QUERY_MESSAGE, by_key)
        assert sorted(m.body for m in decode_records(r.body or b"")) == [b"later", b"target"]
        phys = decode_offset_msg_id(sent.ext_fields["msgId"]).phys_offset
        r = await b.answer(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys), "topic": "T"})
        assert decode_records(r.body or b"")[0].body == b"target"
        # by topic, queue and offset: what mqadmin queryMsgByOffset pulls
        pull = b.pull_header("T", "TOOLS_CONSUMER", queue_id=1, offset=1, max_nums=1)
        pull.sys_flag = PULL_SUBSCRIPTION
        r = await b.answer(RequestCode.PULL_MESSAGE, pull)
        assert [m.body for m in decode_records(r.body or b"")] == [b"later"]
        await b.stop()

    run(main())
