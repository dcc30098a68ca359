"""ARIANE_BULK_PULL_MESSAGE against a live broker: the same records as plain pulls, in far
fewer answers bounded by ``bulkPullMaxMessages``/``bulkPullMaxBytes``, over batches (runs of
back-to-back records), single sends of two interleaved queues (gaps) and small CommitLog
files (runs cut at file ends); and the same ACL check as a pull."""

from __future__ import annotations

import pytest

from ariane.client import Admin, Message, MessageQueue, SyncAdmin, SyncProducer
from ariane.client.message import PullStatus
from ariane.common.record import decode_records
from ariane.common.sysflag import PULL_SUBSCRIPTION
from ariane.remoting.protocol import headers as h
from tests.integration.client.conftest import run, wait_for_route
from tests.support.cluster import Cluster
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration

TOPIC = "BulkPull"
MAX_BYTES = 70_000
MAX_MESSAGES = 100
CONF = {
    "mappedFileSizeCommitLog": 256 * 1024,
    "maxMessageSize": 64 * 1024,
    "bulkPullMaxBytes": MAX_BYTES,
    "bulkPullMaxMessages": MAX_MESSAGES,
}


def _write(cluster: Cluster) -> dict[int, int]:
    """Batches of 20 to one queue at a time, single sends to both now and then; returns
    each queue's message count."""
    with SyncAdmin(namesrv_addr=cluster.namesrv_addr) as admin:
        admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)

    async def routed() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            await wait_for_route(admin, TOPIC)

    run(routed())
    counts = {0: 0, 1: 0}
    with SyncProducer("BulkPullP", namesrv_addr=cluster.namesrv_addr) as producer:
        for k in range(40):
            queue = k % 2
            mq = MessageQueue(TOPIC, "broker-a", queue)
            batch = [
                Message(TOPIC, bytes([65 + i]) * (200 + 61 * i), keys=f"k{k}-{i}")
                for i in range(20)
            ]
            producer.send_batch(batch, queue=mq)
            counts[queue] += 20
            if k % 5 == 0:
                for q in (0, 1):
                    m = Message(TOPIC, b"single %d" % k, tags="S")
                    producer.send(m, queue=MessageQueue(TOPIC, "broker-a", q))
                    counts[q] += 1
    # a pull sees a message once the broker's reput thread has dispatched it (after the
    # send's answer): wait until every queue holds what was sent
    with SyncAdmin(namesrv_addr=cluster.namesrv_addr) as admin:
        for q, count in counts.items():
            mq = MessageQueue(TOPIC, "broker-a", q)
            assert wait_for(lambda mq=mq: admin.max_offset(mq), lambda n, c=count: n == c) == count
    return counts


async def _read_queue(admin: Admin, queue: int, end: int, bulk: bool) -> list[tuple[int, bytes]]:
    """(records, body) of every answer reading ``queue`` from 0 to ``end``."""
    route = await admin.topic_route(TOPIC)
    broker = route.broker_datas[0].broker_addrs[0]
    answers: list[tuple[int, bytes]] = []
    offset = 0
    while offset < end:
        header = h.PullMessageRequestHeader(
            consumer_group="BulkPullG",
            topic=TOPIC,
            queue_id=queue,
            queue_offset=offset,
            max_msg_nums=65_536 if bulk else 32,
            sys_flag=PULL_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        result, body = await admin.api.pull_message_raw(broker, header, 5000, bulk)
        assert result.status is PullStatus.FOUND
        answers.append((result.next_begin_offset - offset, body))
        offset = result.next_begin_offset
    return answers


def test_bulk_pull_reads_what_plain_pulls_read(fresh_cluster: Cluster) -> None:
    cluster = fresh_cluster.start(**CONF)
    counts = _write(cluster)

    async def go() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            for queue, end in counts.items():
                plain = await _read_queue(admin, queue, end, False)
                bulk = await _read_queue(admin, queue, end, True)
                joined = b"".join(body for _, body in bulk)
                assert joined == b"".join(body for _, body in plain)
                msgs = decode_records(joined)
                assert [m.queue_offset for m in msgs] == list(range(end))
                assert [m.queue_id for m in msgs] == [queue] * end
                assert max(n for n, _ in bulk) > 32
                assert all(n <= MAX_MESSAGES for n, _ in bulk)
                assert all(n == 1 or len(body) <= MAX_BYTES for n, body in bulk)
                assert len(bulk) < len(plain) / 2

    run(go())
