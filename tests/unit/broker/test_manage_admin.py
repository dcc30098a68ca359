"""Client registration, consumer coordination, lookups and administration through the
dispatcher, on a real store (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path

from ariane.common.javaprops import format_properties, parse_properties
from ariane.common.sysflag import PULL_SUBSCRIPTION
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ProducerConnection,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicStatsTable,
)
from ariane.remoting.protocol.bodies import KVTable, TopicConfig, TopicConfigSerializeWrapper
from ariane.remoting.protocol.client_bodies import (
    ConsumerListBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.unit.broker.harness import Broker, FakeChannel, run

CPP_HEARTBEAT = (
    b'{"clientID":"10.0.0.1@4242#DEFAULT","consumerDataSet":[{"consumeFromWhere":0,'
    b'"consumeType":1,"groupName":"G","messageModel":1,"subscriptionDataSet":[{"codeSet":'
    b'[2598969],"subString":"TagA","subVersion":"1700000000000","tagsSet":["TagA"],'
    b'"topic":"T"}]}],"producerDataSet":[{"groupName":"PG"}]}\n'
)


def test_cpp_heartbeat_registers_and_notifies_the_group(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        a = FakeChannel("127.0.0.1:1")
        r = await b.answer(RequestCode.HEART_BEAT, None, CPP_HEARTBEAT, a)
        assert r.code == ResponseCode.SUCCESS
        assert b.c.topics.get("%RETRY%G") is not None
        info = b.c.clients.consumer_group("G")
        assert info is not None
        assert info.subscriptions["T"].sub_version == 1_700_000_000_000
        assert [o.code for o in a.oneway] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
        await b.answer(RequestCode.HEART_BEAT, None, CPP_HEARTBEAT, a)
        assert len(a.oneway) == 1, "an unchanged heartbeat notifies nobody"
        second = FakeChannel("127.0.0.1:2")
        await b.heartbeat("c2", "G", ("T",), second)
        assert len(a.oneway) == 2
        assert len(second.oneway) == 1
        assert a.oneway[1].ext_fields == {"consumerGroup": "G"}
        r = await b.answer(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        ids = ConsumerListBody.decode(r.body or b"").consumer_id_list
        assert ids == ["10.0.0.1@4242#DEFAULT", "c2"]
        r = await b.answer(
            RequestCode.UNREGISTER_CLIENT,
            {"clientID": "c2", "producerGroup": "", "consumerGroup": "G"},
            channel=second,
        )
        assert r.code == ResponseCode.SUCCESS
        assert len(a.oneway) == 3
        b.c._on_channel_closed(a)  # type: ignore[arg-type]
        r = await b.answer(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == "no consumer for this group, G"
        r = await b.answer(RequestCode.HEART_BEAT, None, b"{not json")
        assert r.code == ResponseCode.INVALID_PARAMETER
        await b.stop()

    run(main())


def test_query_consumer_offset_zero_for_a_new_group(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await b.send("T", b"x")
        q = {"consumerGroup": "G", "topic": "T", "queueId": "0"}
        r = await b.answer(RequestCode.QUERY_CONSUMER_OFFSET, q)
        assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
        r = await b.answer(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": "false"})
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        r = await b.answer(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"})
        assert r.code == ResponseCode.SUCCESS
        r = await b.answer(RequestCode.QUERY_CONSUMER_OFFSET, q)
        assert r.ext_fields["offset"] == "1"
        r = await b.answer(
            RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "topic": "Nope", "commitOffset": "1"}
        )
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        await b.stop()

    run(main())


def test_queue_locks(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        mqs = [MessageQueue("T", "broker-a", i) for i in range(2)]
        r = await b.answer(
            RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c1", mqs).encode()
        )
        assert LockBatchResponseBody.decode(r.body or b"").lock_ok_mq_set == mqs
        r = await b.answer(
            RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c2", mqs).encode()
        )
        assert LockBatchResponseBody.decode(r.body or b"").lock_ok_mq_set == []
        b.clock.advance(61_000)
        r = await b.answer(
            RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c2", mqs[:1]).encode()
        )
        assert LockBatchResponseBody.decode(r.body or b"").lock_ok_mq_set == mqs[:1]
        r = await b.answer(
            RequestCode.UNLOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c2", mqs).encode()
        )
        assert r.code == ResponseCode.SUCCESS
        assert b.c.locks.holder("G", mqs[0]) is None
        await b.stop()

    run(main())


def test_lookups_and_offset_queries(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.send("T", b"keyed", keys="order-1 order-2")
        msg_id = r.ext_fields["msgId"]
        ts = b.clock.now_ms()
        q = h.QueryMessageRequestHeader(
            topic="T", key="order-2", max_num=10, begin_timestamp=0, end_timestamp=ts + 1
        )
        r = await b.answer(RequestCode.QUERY_MESSAGE, q)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert b"keyed" in (r.body or b"")
        q.key = "nothing"
        r = await b.answer(RequestCode.QUERY_MESSAGE, q)
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        from ariane.common.msgid import decode_offset_msg_id

        phys = decode_offset_msg_id(msg_id).phys_offset
        r = await b.answer(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys)})
        assert r.code == ResponseCode.SUCCESS
        assert b"keyed" in (r.body or b"")
        r = await b.answer(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "123456789"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        tq = {"topic": "T", "queueId": "0"}
        assert (await b.answer(RequestCode.GET_MAX_OFFSET, tq)).ext_fields["offset"] == "1"
        assert (await b.answer(RequestCode.GET_MIN_OFFSET, tq)).ext_fields["offset"] == "0"
        r = await b.answer(RequestCode.GET_EARLIEST_MSG_STORETIME, tq)
        assert int(r.ext_fields["timestamp"]) == ts
        search = {**tq, "timestamp": str(ts)}
        r = await b.answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, search)
        assert r.ext_fields["offset"] == "0"
        later = {**tq, "timestamp": str(ts + 1)}
        r = await b.answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, later)
        assert r.ext_fields["offset"] == "1"  # lower boundary: nothing at or after: the max
        r = await b.answer(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**later, "boundaryType": "UPPER"}
        )
        assert r.ext_fields["offset"] == "0"  # upper boundary: the last one at or before
        r = await b.answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**later, "boundaryType": "mid"})
        assert r.code == ResponseCode.INVALID_PARAMETER
        await b.stop()

    run(main())


def test_topic_administration(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        create = h.CreateTopicRequestHeader(
            topic="Admin", default_topic="TBW102", read_queue_nums=2, write_queue_nums=2,
            perm=6, topic_filter_type="SINGLE_TAG", attributes="+message.type=FIFO",
        )  # fmt: skip
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        assert r.code == ResponseCode.SUCCESS
        on_disk = TopicConfigSerializeWrapper.from_json(
            json.loads((tmp_path / "config" / "topics.json").read_bytes())
        )
        assert on_disk.topic_config_table["Admin"].attributes == {"message.type": "FIFO"}
        r = await b.answer(RequestCode.GET_TOPIC_CONFIG, {"topic": "Admin"})
        assert TopicConfig.from_json(json.loads(r.body or b"")).read_queue_nums == 2
        create.topic = "TBW102"
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        assert r.code == ResponseCode.INVALID_PARAMETER
        create.topic, create.attributes = "Admin2", "garbage"
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        assert r.code == ResponseCode.INVALID_PARAMETER
        r = await b.answer(RequestCode.GET_ALL_TOPIC_CONFIG)
        assert (
            "Admin"
            in TopicConfigSerializeWrapper.from_json(json.loads(r.body or b"")).topic_config_table
        )
        await b.send("Admin", b"x", queue_id=1)
        r = await b.answer(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})
        assert b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Admin"}' in (
            r.body or b""
        )
        stats = TopicStatsTable.decode(r.body or b"")
        assert stats.offset_table[MessageQueue("Admin", "broker-a", 1)].max_offset == 1
        r = await b.answer(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Admin"})
        assert r.code == ResponseCode.SUCCESS
        assert b.c.topics.get("Admin") is None
        assert "Admin" not in b.c.store.topic_queues()
        await b.stop()

    run(main())


def test_broker_config_update_persists_and_applies_permission(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r = await b.answer(RequestCode.GET_BROKER_CONFIG)
        props = parse_properties((r.body or b"").decode())
        assert props["brokerName"] == "broker-a"
        assert props["flushDiskType"] == "ASYNC_FLUSH"
        assert props["diskSpaceWarningLevelRatio"] == "99"  # tests/unit/store/helpers.py
        assert json.loads(r.ext_fields["version"])["counter"] == 0
        body = format_properties({"brokerPermission": "4"}).encode()
        r = await b.answer(RequestCode.UPDATE_BROKER_CONFIG, None, body)
        assert r.code == ResponseCode.SUCCESS
        assert (await b.send("T")).code == ResponseCode.NO_PERMISSION
        saved = parse_properties((tmp_path / "config" / "broker.properties").read_text())
        assert saved == {"brokerPermission": "4"}
        r = await b.answer(RequestCode.UPDATE_BROKER_CONFIG, None, b"brokerName=renamed\n")
        assert r.code == ResponseCode.NO_PERMISSION  # identity: broker.conf only (issue 11)
        assert "brokerName" in (r.remark or "")
        assert b.c.config.broker_name == "broker-a"
        saved = parse_properties((tmp_path / "config" / "broker.properties").read_text())
        assert saved == {"brokerPermission": "4"}
        r = await b.answer(
            RequestCode.UPDATE_BROKER_CONFIG, None, b"brokerConfigPath=/etc/passwd\n"
        )
        assert r.code == ResponseCode.NO_PERMISSION
        r = await b.answer(RequestCode.UPDATE_BROKER_CONFIG, None, b"shortPollingTimeMills=x\n")
        assert r.code == ResponseCode.INVALID_PARAMETER
        assert "shortPollingTimeMills" in (r.remark or "")
        r = await b.answer(RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(r.body or b"").table
        assert table["brokerPermission"] == "4"
        assert "commitLogMaxOffset" in table
        await b.stop()

    run(main())


def test_group_administration_and_consume_stats(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        cfg = SubscriptionGroupConfig("CG", retry_max_times=3)
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, cfg.encode())
        assert r.code == ResponseCode.SUCCESS
        wrapper = SubscriptionGroupWrapper.decode(
            (tmp_path / "config" / "subscriptionGroup.json").read_bytes()
        )
        assert wrapper.subscription_group_table["CG"].retry_max_times == 3
        r = await b.answer(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "CG"})
        assert SubscriptionGroupConfig.decode(r.body or b"").retry_max_times == 3
        bad = SubscriptionGroupConfig("bad group")
        r = await b.answer(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, bad.encode())
        assert r.code == ResponseCode.INVALID_PARAMETER
        for i in range(3):
            await b.send("T", f"m{i}".encode())
        await b.heartbeat("c1", "CG", ("T",), producer_group="PG1")
        b.c.offsets.commit("CG", "T", 0, 2)
        r = await b.answer(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG"})
        stats = ConsumeStats.decode(r.body or b"")
        w = stats.offset_table[MessageQueue("T", "broker-a", 0)]
        assert (w.broker_offset, w.consumer_offset) == (3, 2)
        assert w.last_timestamp > 0
        r = await b.answer(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
        conn = ConsumerConnection.decode(r.body or b"")
        assert [c.client_id for c in conn.connection_set] == ["c1"]
        assert conn.connection_set[0].language == "JAVA"
        r = await b.answer(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "X"})
        assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
        r = await b.answer(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG1"})
        assert [c.client_id for c in ProducerConnection.decode(r.body or b"").connection_set] == [
            "c1"
        ]
        r = await b.answer(RequestCode.GET_ALL_CONSUMER_OFFSET)
        assert ConsumerOffsetSerializeWrapper.decode(r.body or b"").offset_table == {"T@CG": {0: 2}}
        r = await b.answer(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})
        assert fastjson.loads(r.body or b"")["groupList"] == ["CG"]
        r = await b.answer(
            RequestCode.CLONE_GROUP_OFFSET,
            {"srcGroup": "CG", "destGroup": "CG2", "offline": "true"},
        )
        assert b.c.offsets.query("CG2", "T", 0) == 2
        r = await b.answer(
            RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "CG2", "cleanOffset": "true"}
        )
        assert b.c.offsets.query("CG2", "T", 0) == -1
        await b.stop()

    run(main())


def test_reset_offset_server_side_moves_the_next_pull(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        for i in range(5):
            await b.send("T", f"m{i}".encode())
        b.c.offsets.commit("G", "T", 0, 4)
        header = h.ResetOffsetRequestHeader(group="G", topic="T", timestamp=0, is_force=True)
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert r.code == ResponseCode.SUCCESS, r.remark
        table = ResetOffsetBody.decode(r.body or b"").offset_table
        assert table[MessageQueue("T", "broker-a", 0)] == 0
        assert b.c.offsets.query("G", "T", 0) == 0
        pull = b.pull_header("T", offset=4, sys_flag=PULL_SUBSCRIPTION)
        r = await b.answer(RequestCode.PULL_MESSAGE, pull)
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "0")
        r = await b.answer(RequestCode.PULL_MESSAGE, pull)
        assert r.code == ResponseCode.SUCCESS
        await b.stop()

    run(main())


def test_reset_offset_client_side_uses_the_cpp_body_for_cpp_clients(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, use_server_side_reset_offset=False).start()
        await b.send("T", b"x")
        cpp = FakeChannel("127.0.0.1:3")
        await b.answer(
            RequestCode.HEART_BEAT,
            None,
            CPP_HEARTBEAT,
            cpp,
            language=__import__(
                "ariane.remoting.protocol.command", fromlist=["LanguageCode"]
            ).LanguageCode.CPP,
        )
        header = h.ResetOffsetRequestHeader(group="G", topic="T", timestamp=-1, is_force=True)
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert r.code == ResponseCode.SUCCESS
        (reset,) = [o for o in cpp.oneway if o.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET]
        body = json.loads(reset.body or b"")
        assert {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 1} in body[
            "offsetTable"
        ]
        await b.stop()

    run(main())


def test_progress_after_a_reset_with_no_consumer_online(tmp_path: Path) -> None:
    """Issue 20 item 5: a reset with nobody online leaves nothing in flight and no TPS."""

    async def main() -> None:
        b = await Broker(tmp_path, use_server_side_reset_offset=True).start()
        for i in range(25):
            await b.send("T", f"m{i}".encode())
        channel = FakeChannel("127.0.0.1:50001")
        await b.heartbeat("c1", "CG", ("T",), channel)
        pull = b.pull_header("T", "CG", sys_flag=PULL_SUBSCRIPTION, suspend_ms=0)
        r = await b.answer(RequestCode.PULL_MESSAGE, pull, channel=channel)
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.SUCCESS, "25")
        b.c.offsets.commit("CG", "T", 0, 25)
        for _ in range(2):  # two 10 s samples: the minute window sees the 25 messages
            b.clock.advance(10_000)
            b.c.stats.tick()

        async def progress() -> tuple[float, int, int, int]:
            r = await b.answer(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG"})
            stats = ConsumeStats.decode(r.body or b"")
            w = stats.offset_table[MessageQueue("T", "broker-a", 0)]
            return stats.consume_tps, w.broker_offset, w.consumer_offset, w.pull_offset

        tps, *offsets = await progress()
        assert tps > 0
        assert offsets == [25, 25, 25]
        # a pulled but uncommitted message is in flight while its consumer is online
        b.c.offsets.commit("CG", "T", 0, 24)
        assert (await progress())[1:] == (25, 24, 25)
        r = await b.answer(
            RequestCode.UNREGISTER_CLIENT,
            {"clientID": "c1", "producerGroup": "", "consumerGroup": "CG"},
            channel=channel,
        )
        assert r.code == ResponseCode.SUCCESS
        header = h.ResetOffsetRequestHeader(group="CG", topic="T", timestamp=0, is_force=True)
        r = await b.answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert r.code == ResponseCode.SUCCESS, r.remark
        # nothing pulled is in flight (pull offset = consumer offset) and nobody consumes
        assert await progress() == (0.0, 25, 0, 0)
        r = await b.answer(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
        body = fastjson.loads(r.body or b"{}")
        assert body["totalDiff"] == 25
        assert body["totalInflightDiff"] == 0
        await b.stop()

    run(main())
