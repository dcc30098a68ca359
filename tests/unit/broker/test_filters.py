"""TAG and SQL92 filtering on the broker: pulls with their own or a registered subscription,
heartbeat and CHECK_CLIENT_CONFIG validation, held pulls, retry-topic filtering."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ariane.broker.filters import FilterFactory, RetryPullFilter
from ariane.common.hashing import tags_code
from ariane.common.message import MessageExt
from ariane.common.record import decode_records, encode_record
from ariane.common.sysflag import PULL_SUBSCRIPTION, PULL_SUSPEND
from ariane.remoting.protocol.client_bodies import (
    CheckClientRequestBody,
    ConsumerData,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.unit.broker.harness import Broker, FakeChannel, run

SQL = "(orderStatus IS NOT NULL AND orderStatus > 0) OR region IN ('eu')"


def bodies(r: RemotingCommand) -> list[bytes]:
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return [m.body for m in decode_records(r.body or b"")]


async def fill(b: Broker) -> None:
    for i, props in enumerate(
        [{"orderStatus": "1"}, {"orderStatus": "0"}, {"region": "eu"}, {}, {"orderStatus": "x"}]
    ):
        await b.send("T", f"m{i}".encode(), props=props)


async def sql_pull(b: Broker, expression: str, offset: int = 0) -> RemotingCommand:
    header = b.pull_header("T", sys_flag=PULL_SUBSCRIPTION, subscription=expression, offset=offset)
    header.expression_type = "SQL92"
    return await b.answer(RequestCode.PULL_MESSAGE, header)


def test_sql92_needs_enable_property_filter(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        await fill(b)
        r = await sql_pull(b, SQL)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == "The broker does not support consumer to filter message by SQL92"
        await b.stop()

    run(main())


def test_sql92_pull_delivers_only_matching_messages(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, enable_property_filter=True).start()
        await fill(b)
        assert bodies(await sql_pull(b, SQL)) == [b"m0", b"m2"]
        r = await sql_pull(b, "region = 'us'")
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert r.ext_fields["nextBeginOffset"] == "5"
        assert bodies(await sql_pull(b, "TAGS IS NULL AND orderStatus BETWEEN 0 AND 0")) == [b"m1"]
        r = await sql_pull(b, "orderStatus >")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "orderStatus >" in (r.remark or "")
        header = b.pull_header("T", sys_flag=PULL_SUBSCRIPTION, subscription="a = 1")
        header.expression_type = "XPATH"
        r = await b.answer(RequestCode.PULL_MESSAGE, header)
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        await b.stop()

    run(main())


def test_registered_sql92_subscription_filters_pulls(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, enable_property_filter=True).start()
        await fill(b)
        sub = SubscriptionData.build("T", SQL, "SQL92")
        data = HeartbeatData("c1", [], [ConsumerData("G", subscription_data_set=[sub])])
        r = await b.answer(RequestCode.HEART_BEAT, None, data.encode())
        assert r.code == ResponseCode.SUCCESS
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=0))
        assert bodies(r) == [b"m0", b"m2"]
        await b.stop()

    run(main())


def test_bad_sql92_in_a_heartbeat_is_reported_but_the_rest_registers(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, enable_property_filter=True).start()
        await fill(b)
        bad = SubscriptionData.build("T", "a = ", "SQL92")
        data = HeartbeatData(
            "c1", [ProducerData("PG")], [ConsumerData("G", subscription_data_set=[bad])]
        )
        r = await b.answer(RequestCode.HEART_BEAT, None, data.encode())
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "group G, topic T" in (r.remark or "")
        assert b.c.clients.find_producer_channel("PG") is b.channel
        assert b.c.clients.consumer_ids("G") == ["c1"]
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", sys_flag=0))
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        await b.stop()

    run(main())


def test_check_client_config(tmp_path: Path) -> None:
    async def main() -> None:
        async def check(b: Broker, expression: str, kind: str) -> RemotingCommand:
            sub = SubscriptionData.build("T", expression, kind)
            body = CheckClientRequestBody("c1", "G", sub).encode()
            return await b.answer(RequestCode.CHECK_CLIENT_CONFIG, None, body)

        b = await Broker(tmp_path).start()
        assert (await check(b, "A || B", "TAG")).code == ResponseCode.SUCCESS
        assert (await check(b, "a > 1", "SQL92")).code == ResponseCode.SYSTEM_ERROR
        await b.stop()
        b = await Broker(tmp_path / "2", enable_property_filter=True).start()
        assert (await check(b, "a > 1", "SQL92")).code == ResponseCode.SUCCESS
        r = await check(b, "a > 'x'", "SQL92")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert r.remark
        await b.stop()

    run(main())


def test_tag_filter_checks_the_exact_tag_after_the_hash(tmp_path: Path) -> None:
    async def main() -> None:
        assert tags_code("Aa") == tags_code("BB")  # Java hash collision
        b = await Broker(tmp_path).start()
        await b.send("T", b"aa", tags="Aa")
        await b.send("T", b"bb", tags="BB")
        await b.send("T", b"none")
        header = b.pull_header("T", sys_flag=PULL_SUBSCRIPTION, subscription="BB")
        assert bodies(await b.answer(RequestCode.PULL_MESSAGE, header)) == [b"bb"]
        header.subscription = "||"
        r = await b.answer(RequestCode.PULL_MESSAGE, header)
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        await b.stop()

    run(main())


async def wait_answer(b: Broker, ch: FakeChannel) -> bool:
    for _ in range(200):
        if ch.sent:
            return True
        b.c.store.wait_dispatched()
        await asyncio.sleep(0.001)
    return bool(ch.sent)


def test_held_sql92_pull_wakes_only_for_matching_messages(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, enable_property_filter=True).start()
        await b.send("T", b"first")
        ch = FakeChannel("127.0.0.1:40000")
        header = b.pull_header(
            "T", offset=1, sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND, subscription="a = 'y'"
        )
        header.expression_type = "SQL92"
        await b.call(RequestCode.PULL_MESSAGE, header, channel=ch, expect_answer=False)
        assert b.c.hold.held_count == 1
        await b.send("T", b"no", props={"a": "n"})
        assert not await wait_answer(b, ch)
        assert b.c.hold.held_count == 1
        await b.send("T", b"yes", props={"a": "y"})
        assert await wait_answer(b, ch)
        (r,) = ch.sent
        assert bodies(r) == [b"yes"]
        await b.stop()

    run(main())


def test_retry_filter_uses_the_original_topics_subscription() -> None:
    factory = FilterFactory()
    original = factory.build("a = 1", "SQL92")
    retry = RetryPullFilter(factory.build("*", "TAG"), {"T": original}.get)

    def record(**props: str) -> bytes:
        return encode_record(MessageExt(topic="%RETRY%G", body=b"", properties=props))

    assert retry.is_matched_by_commit_log(record(RETRY_TOPIC="T", a="1"))
    assert not retry.is_matched_by_commit_log(record(RETRY_TOPIC="T", a="2"))
    assert retry.is_matched_by_commit_log(record(RETRY_TOPIC="Other", a="2"))
    assert retry.is_matched_by_commit_log(record(a="2"))
    assert not retry.is_matched_by_properties({"RETRY_TOPIC": "T"})
    assert retry.is_matched_by_consume_queue(12345)


def test_filter_support_retry_on_pulls(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, filter_support_retry=True).start()
        sub = SubscriptionData.build("T", "A")
        retry_sub = SubscriptionData.build("%RETRY%G", "*")
        data = HeartbeatData("c1", [], [ConsumerData("G", subscription_data_set=[sub, retry_sub])])
        assert (await b.answer(RequestCode.HEART_BEAT, None, data.encode())).code == 0
        await b.send("%RETRY%G", b"keep", props={"RETRY_TOPIC": "T"}, tags="A")
        await b.send("%RETRY%G", b"drop", props={"RETRY_TOPIC": "T"}, tags="B")
        r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("%RETRY%G", sys_flag=0))
        assert bodies(r) == [b"keep"]
        await b.stop()

    run(main())
