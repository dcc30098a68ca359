"""Messages sent by ``ariane.client.Producer`` are consumed by the real C++ client (PyPI
``rocketmq==0.4.4``) with identical body, keys, tags and properties, whatever the send mode
(sync, async, one-way, batch, ordered) and including zlib-compressed bodies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ariane.client import Message, Producer
from tests.compat.conftest import CppClient
from tests.support.cluster import Cluster
from tests.support.rpc import wait_for_route

pytestmark = [pytest.mark.compat, pytest.mark.integration]


def _messages(topic: str) -> list[Message]:
    msgs = []
    for i in range(120):
        body = f"body-{i}".encode()
        if i % 10 == 3:
            # binary bytes survive (not NUL: the ctypes binding reads bodies as C strings)
            body += bytes(range(1, 256))
        if i % 40 == 7:
            body += b"z" * 9000  # compressed on the wire (>= 4 KiB)
        msgs.append(
            Message(
                topic,
                body,
                tags=("TagA", "TagB", "TagC")[i % 3],
                keys=[f"key-{i}", f"alt-{i}"] if i % 2 else f"key-{i}",
                properties={"color": ("red", "blue")[i % 2], "seq": str(i), "utf": "h\u00e9"},
            )
        )
    return msgs


async def _produce(namesrv: str, msgs: list[Message]) -> None:
    async with Producer("pg_interop", namesrv_addr=namesrv) as producer:
        for msg in msgs[:30]:
            await producer.send(msg)
        await asyncio.gather(*(producer.send_async(m) for m in msgs[30:60]))
        for msg in msgs[60:70]:
            await producer.send_oneway(msg)
        plain = [m for m in msgs[70:100] if len(m.body) < 4096]
        big = [m for m in msgs[70:100] if len(m.body) >= 4096]
        await producer.send_batch(plain)
        for msg in big:
            await producer.send(msg)
        for msg in msgs[100:]:
            await producer.send(msg, sharding_key=msg.properties["color"])


def test_cpp_consumer_receives_exactly_what_our_producer_sent(
    cluster: Cluster, cpp: CppClient
) -> None:
    topic = "InteropTopic"
    msgs = _messages(topic)
    asyncio.run(_produce(cluster.namesrv_addr, msgs))
    wait_for_route(cluster.namesrv_addr, topic)  # else the consumer waits 30 s for its next try
    sent: dict[str, Message] = {m.body.hex(): m for m in msgs}
    consumer = cpp.spawn(
        "consumer.py",
        [
            "--namesrv", cluster.namesrv_addr, "--topic", topic, "--group", "CG_INTEROP",
            "--expect", str(len(msgs)), "--linger", "2", "--extra-props", "color,seq,utf",
            "--hex",
        ],
    )  # fmt: skip
    consumer.wait(240)
    got: list[dict[str, Any]] = consumer.of("msg")
    got_hex = {m["body_hex"] for m in got}
    unexpected = [
        (m["body"][:40], m["props"].get("seq"), len(m["body_hex"]) // 2)
        for m in got
        if m["body_hex"] not in sent
    ]
    missing = [sent[x].properties["seq"] for x in set(sent) - got_hex]
    assert not unexpected, f"bodies that were never sent: {unexpected}; missing seq {missing}"
    assert not missing, f"never delivered: seq {missing}"
    assert len(got) == len(msgs)  # exactly once
    for event in got:
        msg = sent[event["body_hex"]]
        assert event["topic"] == topic
        assert event["tags"] == msg.tags
        assert event["keys"] == msg.properties["KEYS"]
        assert event["id"] == msg.properties["UNIQ_KEY"]
        props = event["props"]
        assert props["UNIQ_KEY"] == msg.properties["UNIQ_KEY"]
        assert (props["color"], props["seq"], props["utf"]) == (
            msg.properties["color"],
            msg.properties["seq"],
            "h\u00e9",
        )


def test_our_push_consumer_receives_exactly_what_the_cpp_producer_sent(
    cluster: Cluster, cpp: CppClient
) -> None:
    """The reverse direction: C++ ``send_sync`` (tags, keys, user properties), received by
    ``PushConsumer`` with identical body, keys, tags, properties and message ids."""
    from ariane.client import (
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        MessageExt,
        PushConsumer,
    )

    topic, count = "InteropReverse", 60
    producer = cpp.run(
        "producer.py",
        [
            "--namesrv", cluster.namesrv_addr, "--topic", topic, "--count", str(count),
            "--tags", "TagA,TagB,TagC", "--keys-prefix", "ck-", "--body-prefix", "cpp-body-",
            "--property", "color=red", "--property", "utf=h\u00e9",
        ],
    )  # fmt: skip
    sent = {e["i"]: e for e in producer.of("sent")}
    assert len(sent) == count
    wait_for_route(cluster.namesrv_addr, topic)

    async def consume() -> list[MessageExt]:
        got: list[MessageExt] = []
        done = asyncio.Event()

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.extend(msgs)
            if len(got) >= count:
                done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "CG_INTEROP_REVERSE",
            namesrv_addr=cluster.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic, "TagA || TagB || TagC")
        consumer.register_message_listener(listener)
        async with consumer:
            await asyncio.wait_for(done.wait(), 60)
            await asyncio.sleep(0.5)  # nothing more (no duplicates)
        return got

    got = asyncio.run(consume())
    assert len(got) == count
    by_index = {int(m.body.decode().removeprefix("cpp-body-")): m for m in got}
    assert sorted(by_index) == list(range(count))
    for i, msg in by_index.items():
        assert msg.topic == topic
        assert msg.body == f"cpp-body-{i}".encode()
        assert msg.tags == ("TagA", "TagB", "TagC")[i % 3]
        assert msg.keys == [f"ck-{i}"]
        assert msg.properties["color"] == "red"
        assert msg.properties["utf"] == "h\u00e9"
        assert msg.msg_id == sent[i]["msg_id"]
        assert msg.reconsume_times == 0


def test_cpp_and_python_consumers_share_one_group(cluster: Cluster, cpp: CppClient) -> None:
    """A C++ push consumer and ours in one clustering group split the queues the same way
    (averagely over sorted queues and client ids): every message is consumed, by both."""
    import time

    from ariane.client import (
        Admin,
        ClientConfig,
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        MessageExt,
        PushConsumer,
    )

    topic, group, count = "InteropShared", "CG_INTEROP_SHARED", 200

    async def create() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            await admin.create_topic(topic, read_queue_nums=8, write_queue_nums=8)

    asyncio.run(create())
    wait_for_route(cluster.namesrv_addr, topic)
    theirs = cpp.spawn(
        "consumer.py",
        ["--namesrv", cluster.namesrv_addr, "--topic", topic, "--group", group, "--timeout", "120"],
    )
    assert theirs.started.wait(60), theirs.tail()

    async def run_ours() -> tuple[list[MessageExt], list[str]]:
        got: list[MessageExt] = []

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            group,
            client_config=ClientConfig(
                namesrv_addr=cluster.namesrv_addr, instance_name="py", rebalance_interval_ms=500
            ),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        async with consumer:
            deadline = time.monotonic() + 60
            while (
                len([mq for mq in consumer.rebalance.process_queue_table if mq.topic == topic]) != 4
            ):
                assert time.monotonic() < deadline, "the queues were never split"
                await asyncio.sleep(0.05)
            async with Producer("pg_shared", namesrv_addr=cluster.namesrv_addr) as producer:
                sent = [
                    (await producer.send(Message(topic, b"shared-%d" % i))).msg_id
                    for i in range(count)
                ]
            while len(got) + len(theirs.of("msg")) < count:
                assert time.monotonic() < deadline + 60, "messages are missing"
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # duplicates would show up now
        return got, sent

    ours, sent = asyncio.run(run_ours())
    theirs.terminate()
    theirs.wait(60)
    their_ids = {e["id"] for e in theirs.of("msg")}
    our_ids = {m.msg_id for m in ours}
    assert our_ids | their_ids == set(sent)
    assert our_ids
    assert their_ids
    assert not our_ids & their_ids  # one owner per queue: no message went to both
    assert {m.queue_id for m in ours}.isdisjoint({e["queue_id"] for e in theirs.of("msg")})
