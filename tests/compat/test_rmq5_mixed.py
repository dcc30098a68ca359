"""Both protocols on one store: what a 5.x gRPC client sends, a 4.x remoting consumer (the real
C++ client, PyPI ``rocketmq==0.4.4``) receives, and what our remoting SDK sends is read through
gRPC; consumer offsets are the same numbers seen from either side."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest

from ariane.client import Admin, Message, Producer
from ariane.client.trace import MessageTrace
from ariane.common.trace import TraceType
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.proxy.v2 import service_pb2_grpc as sg
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.compat.conftest import CppClient, ScriptClient
from tests.integration.client.test_trace import trace_of
from tests.support.cluster import Cluster
from tests.support.grpc5 import create_topic
from tests.support.rpc import request, wait_for_route

pytestmark = [pytest.mark.compat, pytest.mark.integration]
MD = (("x-mq-client-id", "mixed-test"),)


def test_grpc_producer_to_cpp_remoting_consumer(
    grpc_cluster: Cluster, rmq5: ScriptClient, cpp: CppClient
) -> None:
    topic = "MixedToCpp"
    create_topic(grpc_cluster.broker_addr(), topic, "NORMAL")
    wait_for_route(grpc_cluster.namesrv_addr, topic)
    sent = rmq5.run(
        "producer.py",
        ["--endpoint", grpc_cluster.brokers["broker-a"].ready["grpc"], "--topic", topic,
         "--count", "80", "--sizes", "5,3000", "--text"],
    )  # fmt: skip
    ids = {e["i"]: e["id"] for e in sent.of("sent")}
    consumer = cpp.spawn(
        "consumer.py",
        ["--namesrv", grpc_cluster.namesrv_addr, "--topic", topic, "--group", "CG_MIXED",
         "--expect", "80", "--linger", "1", "--extra-props", "i,utf"],
    )  # fmt: skip
    consumer.wait(180)
    got = consumer.of("msg")
    assert len(got) == 80
    for m in got:
        i = int(m["props"]["i"])
        size = (5, 3000)[i % 2]
        assert m["body"] == f"text-{i}-" + "y" * size
        assert m["props"]["UNIQ_KEY"] == ids[i]
        assert m["tags"] == f"Tag{i % 3}"
        assert m["keys"] == f"key-{i}"
        assert m["props"]["utf"] == "h\u00e9"


async def _sdk_send(namesrv: str, topic: str, n: int) -> list[str]:
    async with Producer("pg_mixed", namesrv_addr=namesrv) as producer:
        ids = []
        for i in range(n):
            msg = Message(topic, b"sdk-%d" % i, tags="T", keys=f"k{i}", properties={"i": str(i)})
            ids.append((await producer.send(msg)).msg_id)
        return ids


def _wait_dispatched(stub: sg.MessagingServiceStub, topic: str, queues: int, count: int) -> None:
    """Wait until the queues of ``topic`` hold ``count`` messages in all (their END offsets)."""
    deadline = time.monotonic() + 30
    while True:
        ends = [
            stub.QueryOffset(
                spb.QueryOffsetRequest(
                    message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=q),
                    query_offset_policy=pb.END,
                ),
                metadata=MD,
                timeout=10,
            ).offset
            for q in range(queues)
        ]
        if sum(ends) >= count:
            return
        assert time.monotonic() < deadline, f"{topic}: {ends} of {count} dispatched"
        time.sleep(0.05)


def test_sdk_producer_to_grpc_pull_and_offsets_shared(grpc_cluster: Cluster) -> None:
    topic = "MixedFromSdk"
    broker = grpc_cluster.broker_addr()
    create_topic(broker, topic, None, queues=2)
    wait_for_route(grpc_cluster.namesrv_addr, topic)
    ids = asyncio.run(_sdk_send(grpc_cluster.namesrv_addr, topic, 40))
    seen: dict[str, bytes] = {}
    with grpc.insecure_channel(grpc_cluster.brokers["broker-a"].ready["grpc"]) as channel:
        stub = sg.MessagingServiceStub(channel)
        group = pb.Resource(name="CG_GRPC_PULL")
        # the broker answers a send once stored; its ConsumeQueues follow asynchronously (the
        # reput thread, which a slow fsync of a new queue file can hold up under load)
        _wait_dispatched(stub, topic, 2, len(ids))
        for q in range(2):
            mq = pb.MessageQueue(topic=pb.Resource(name=topic), id=q)
            offset = 0
            while True:
                frames = list(
                    stub.PullMessage(
                        spb.PullMessageRequest(group=group, message_queue=mq, offset=offset,
                                               batch_size=7),
                        metadata=MD, timeout=10,
                    )
                )  # fmt: skip
                messages = [f.message for f in frames if f.WhichOneof("content") == "message"]
                for m in messages:
                    seen[m.system_properties.message_id] = m.body
                    assert m.system_properties.tag == "T"
                offset = frames[-1].next_offset
                if not messages:
                    break
            # the gRPC consumer commits; a 4.x consumer of the group sees that offset
            stub.UpdateOffset(spb.UpdateOffsetRequest(group=group, message_queue=mq,
                                                      offset=offset), metadata=MD, timeout=10)  # fmt: skip
            header = h.QueryConsumerOffsetRequestHeader(
                consumer_group="CG_GRPC_PULL", topic=topic, queue_id=q
            )
            answer = request(broker, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
            assert answer.code == ResponseCode.SUCCESS
            assert int(answer.ext_fields["offset"]) == offset
            end = stub.QueryOffset(
                spb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.END),
                metadata=MD, timeout=10,
            )  # fmt: skip
            assert end.offset == offset
        # and what a remoting client commits, gRPC reads
        update = h.UpdateConsumerOffsetRequestHeader(
            consumer_group="CG_REMOTING", topic=topic, queue_id=1, commit_offset=7
        )
        assert request(broker, RequestCode.UPDATE_CONSUMER_OFFSET, update.to_ext_fields()).code == 0
        got = stub.GetOffset(
            spb.GetOffsetRequest(group=pb.Resource(name="CG_REMOTING"),
                                 message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=1)),
            metadata=MD, timeout=10,
        )  # fmt: skip
        assert (got.status.code, got.offset) == (pb.OK, 7)
    assert sorted(seen) == sorted(ids)
    assert {seen[i] for i in ids} == {b"sdk-%d" % i for i in range(40)}


def test_one_trace_timeline_across_protocols(tmp_path: Path, rmq5: ScriptClient) -> None:
    """grpcMessageTraceEnable: a message sent by our traced 4.x-style producer and consumed by
    the real 5.x Python SimpleConsumer has one trace: the producer's Pub, then the SubBefore
    and SubAfter the broker wrote for the gRPC consumer, paired by request id."""
    cluster = Cluster(tmp_path / "cluster")
    try:
        cluster.start(grpcServerPort=0, grpcMessageTraceEnable="true", traceTopicEnable="true")
        create_topic(cluster.broker_addr(), "MixedTrace", "NORMAL")
        wait_for_route(cluster.namesrv_addr, "MixedTrace")

        async def produce() -> list[str]:
            async with Producer(
                "pg_mixed_trace", namesrv_addr=cluster.namesrv_addr, enable_trace=True
            ) as producer:
                return [
                    (await producer.send(Message("MixedTrace", b"t%d" % i, keys=[f"k{i}"]))).msg_id
                    for i in range(3)
                ]

        ids = asyncio.run(produce())
        run = rmq5.run(
            "consumer.py",
            ["--endpoint", cluster.brokers["broker-a"].ready["grpc"], "--group",
             "CG_MIXED_TRACE", "--topic", "MixedTrace", "--expect", "3", "--linger", "0",
             "--timeout", "60"],
        )  # fmt: skip
        assert sorted(e["id"] for e in run.of("msg")) == sorted(ids)

        async def timelines() -> list[MessageTrace]:
            ready = {TraceType.Pub: 1, TraceType.SubBefore: 1, TraceType.SubAfter: 1}
            async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
                return [await trace_of(admin, i, ready) for i in ids]

        for msg_id, trace in zip(ids, asyncio.run(timelines()), strict=True):
            pub, before, after = trace.entries
            assert [e.trace_type for e in trace.entries] == [
                TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter,
            ]  # fmt: skip
            assert {e.msg_id for e in trace.entries} == {msg_id}
            assert pub.group == "pg_mixed_trace"
            assert before.group == after.group == "CG_MIXED_TRACE"
            assert after.request_id == before.request_id
            assert (after.success, after.consume_result) == (True, "SUCCESS")
            assert not trace.undecodable
    finally:
        cluster.stop()
