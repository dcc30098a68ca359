"""Operations against real processes: ``/metrics`` of a broker and a NameServer while a
producer and a consumer run, the statistics admin requests, and the log files."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ariane.common.record import decode_records
from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import ConsumeStats, TopicStatsTable
from ariane.remoting.protocol.bodies import KVTable
from ariane.remoting.protocol.client_bodies import (
    ConsumerData,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, ConsumeStatsList
from tests.support.cluster import Cluster, start_broker, start_namesrv
from tests.support.polling import wait_for, wait_until
from tests.support.processes import free_port
from tests.support.rpc import pull, request, send_message

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "ariane-dashboard.json"
TOPIC, GROUP, QUEUES, N = "MetricsT", "MetricsG", 4, 20
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(addr: str) -> Samples:
    text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s series matching ``labels`` (0 when none)."""
    return sum(
        v for ls, v in samples.get(name, []) if all(ls.get(k) == x for k, x in labels.items())
    )


def drain(addr: str, queue_id: int, count: int) -> bytes:
    """Pull ``queue_id`` from offset 0 until ``count`` messages came (they become visible
    once dispatched); returns the answer bodies."""
    got: list[bytes] = []

    def more() -> bool:
        offset = sum(len(decode_records(b)) for b in got)
        r = pull(addr, TOPIC, GROUP, queue_id=queue_id, offset=offset)
        if r.code == ResponseCode.SUCCESS and r.body:
            got.append(r.body)
        return offset + (len(decode_records(r.body)) if r.code == 0 and r.body else 0) >= count

    assert wait_until(more, 10)
    return b"".join(got)


def runtime_info(addr: str) -> dict[str, str]:
    return KVTable.decode(request(addr, RequestCode.GET_BROKER_RUNTIME_INFO).body or b"").table


def view(addr: str, name: str, key: str) -> RemotingCommand:
    header = h.ViewBrokerStatsDataRequestHeader(stats_name=name, stats_key=key)
    return request(addr, RequestCode.VIEW_BROKER_STATS_DATA, header.to_ext_fields())


def commit(addr: str, queue_id: int, offset: int) -> None:
    """UPDATE_CONSUMER_OFFSET one-way, as push consumers send it."""
    header = h.UpdateConsumerOffsetRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, commit_offset=offset
    )
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
    with BlockingRemotingClient() as client:
        client.invoke_oneway(addr, cmd.mark_oneway())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Cluster, str, str]]:
    c = Cluster(tmp_path)
    try:
        c.namesrv = start_namesrv(tmp_path / "namesrv", "--metrics-port", str(free_port()))
        c.start_broker("broker-a", metricsPromExporterPort=free_port())
        yield c, c.brokers["broker-a"].ready["metrics"], c.namesrv.ready["metrics"]
    finally:
        c.stop()


def heartbeat(client: BlockingRemotingClient, addr: str) -> None:
    """Register a producer and a push consumer of TOPIC on ``client``'s connection."""
    data = HeartbeatData(
        "127.0.0.1@metrics-test",
        [ProducerData("MetricsPG")],
        [ConsumerData(GROUP, subscription_data_set=[SubscriptionData.build(TOPIC, "*")])],
    )
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, data.encode())
    assert client.invoke(addr, cmd, 5_000).code == ResponseCode.SUCCESS


def test_metrics_follow_a_producer_and_a_consumer(cluster: tuple[Cluster, str, str]) -> None:
    c, metrics, ns_metrics = cluster
    with BlockingRemotingClient() as client:  # the clients' connection stays open
        exported = producer_and_consumer(client, c.broker_addr(), metrics, ns_metrics)
    # every metric the Grafana dashboard plots is exported
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"\b(?:rocketmq|ariane|process|python)_\w+", e)}
    assert used
    assert not used - exported, sorted(used - exported)


def producer_and_consumer(
    client: BlockingRemotingClient, addr: str, metrics: str, ns_metrics: str
) -> set[str]:
    """Produce, consume, commit; check the metrics at each step; returns the names exported."""
    heartbeat(client, addr)
    before = scrape(metrics)
    assert value(before, "rocketmq_producer_connections", language="python") == 1
    assert value(before, "rocketmq_consumer_connections", consumer_group=GROUP) == 1
    assert value(before, "rocketmq_messages_in_total", topic=TOPIC) == 0
    for i in range(N):
        assert send_message(addr, TOPIC, f"m{i:02}".encode(), queue_id=i % QUEUES).code == 0
    after_put = scrape(metrics)
    assert value(after_put, "rocketmq_messages_in_total", topic=TOPIC) == N
    put_bytes = int(runtime_info(addr)["putMessageSizeTotal"])
    assert value(after_put, "rocketmq_throughput_in_total", topic=TOPIC) == put_bytes
    assert value(after_put, "rocketmq_message_size_count", topic=TOPIC) == N
    sends = value(after_put, "rocketmq_rpc_latency_count", request_code="send_message_v2")
    assert sends == N

    # the consumer pulls everything, then commits half of each queue, then the rest
    per_queue = N // QUEUES
    pulled = [drain(addr, q, per_queue) for q in range(QUEUES)]
    assert sum(len(decode_records(b)) for b in pulled) == N
    pulled_bytes = sum(len(b) for b in pulled)
    # the consumer gives up on one message: it goes to the group's dead-letter queue
    first = decode_records(pulled[0])[0]
    back = h.ConsumerSendMsgBackRequestHeader(
        offset=first.commit_log_offset, group=GROUP, delay_level=-1, origin_topic=TOPIC
    )
    cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext_fields())
    assert client.invoke(addr, cmd, 5_000).code == ResponseCode.SUCCESS
    for q in range(QUEUES):
        commit(addr, q, per_queue // 2)
    lag_labels = {"consumer_group": GROUP, "topic": TOPIC}
    assert wait_until(
        lambda: (
            value(scrape(metrics), "rocketmq_consumer_lag_messages", **lag_labels)
            == N - QUEUES * (per_queue // 2)
        ),
        10,
    )
    mid = scrape(metrics)
    assert value(mid, "rocketmq_messages_out_total", **lag_labels) == N
    assert value(mid, "rocketmq_throughput_out_total", **lag_labels) == pulled_bytes
    assert value(mid, "rocketmq_consumer_inflight_messages", **lag_labels) == N - QUEUES * (
        per_queue // 2
    )
    assert value(mid, "rocketmq_consumer_lag_latency", **lag_labels) > 0
    assert value(mid, "ariane_consumer_queue_lag_messages", queue_id="0", **lag_labels) == (
        per_queue - per_queue // 2
    )
    consume = h.GetConsumeStatsRequestHeader(consumer_group=GROUP, topic=TOPIC)
    stats = ConsumeStats.decode(
        request(addr, RequestCode.GET_CONSUME_STATS, consume.to_ext_fields()).body or b""
    )
    diff = sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
    assert diff == value(mid, "rocketmq_consumer_lag_messages", **lag_labels)
    for q in range(QUEUES):
        commit(addr, q, per_queue)
    assert wait_until(
        lambda: value(scrape(metrics), "rocketmq_consumer_lag_messages", **lag_labels) == 0, 10
    )
    done = scrape(metrics)
    assert value(done, "rocketmq_consumer_lag_latency", **lag_labels) == 0
    assert value(done, "rocketmq_consumer_inflight_messages", **lag_labels) == 0
    assert value(
        done, "ariane_rpc_oneway_requests_total", request_code="update_consumer_offset"
    ) == (2 * QUEUES)
    assert value(done, "process_resident_memory_bytes") > 0
    # the DLQ count is the dead-letter queue's max offset: it moves once the reput thread has
    # dispatched the re-stored message, which nothing above waited for
    assert wait_until(
        lambda: (
            value(scrape(metrics), "rocketmq_send_to_dlq_messages_total", consumer_group=GROUP) == 1
        ),
        10,
    )
    assert value(done, "rocketmq_storage_size") > 0

    ns = scrape(ns_metrics)
    assert value(ns, "ariane_namesrv_brokers", node_type="namesrv") == 1
    assert value(ns, "rocketmq_rpc_latency_count", request_code="register_broker") >= 1

    # every metric the Grafana dashboard plots is exported
    return set(done) | set(ns)


def test_admin_statistics_are_live_and_consistent(cluster: tuple[Cluster, str, str]) -> None:
    c, _, _ = cluster
    addr = c.broker_addr()
    for i in range(N):
        assert send_message(addr, TOPIC, b"x" * 64, queue_id=i % QUEUES).code == 0
    for q in range(QUEUES):
        drain(addr, q, N // QUEUES)
        commit(addr, q, 1)
    info = runtime_info(addr)
    assert info["msgPutTotalTodayNow"] == str(N)
    assert info["msgGetTotalTodayNow"] == str(N)
    assert view(addr, "TOPIC_PUT_NUMS", "nope").code == ResponseCode.SYSTEM_ERROR
    # the windows are sampled every 10 s: wait for the first sample with the traffic in it
    assert wait_until(
        lambda: (
            view(addr, "TOPIC_PUT_NUMS", TOPIC).code == ResponseCode.SUCCESS
            and BrokerStatsData.decode(
                view(addr, "TOPIC_PUT_NUMS", TOPIC).body or b""
            ).stats_minute.sum
            == N
        ),
        15,
        0.5,
    )
    out = BrokerStatsData.decode(view(addr, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}").body or b"")
    assert out.stats_minute.sum == N
    assert out.stats_minute.tps > 0
    assert float(runtime_info(addr)["putTps"].split()[1]) > 0

    # statsAll reads TOPIC_PUT_NUMS and GET_TOPIC_STATS_INFO: the same window gives the same TPS
    def consistent() -> bool:
        first = BrokerStatsData.decode(view(addr, "TOPIC_PUT_NUMS", TOPIC).body or b"")
        topic_stats = request(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
        table = TopicStatsTable.decode(topic_stats.body or b"")
        second = BrokerStatsData.decode(view(addr, "TOPIC_PUT_NUMS", TOPIC).body or b"")
        if first != second:  # a sample fell in between: try again
            return False
        assert table.topic_put_tps == first.stats_minute.tps
        assert sum(t.max_offset for t in table.offset_table.values()) == N
        return True

    assert wait_until(consistent, 15)

    # the broker's consume stats read GROUP_GET_NUMS: the same window gives the same TPS
    def group_gets() -> BrokerStatsData:
        return BrokerStatsData.decode(view(addr, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}").body or b"")

    def consume_stats() -> ConsumeStatsList | None:
        first = group_gets()
        body = request(
            addr,
            RequestCode.GET_BROKER_CONSUME_STATS,
            h.GetConsumeStatsInBrokerHeader(is_order=False).to_ext_fields(),
        ).body
        if group_gets() != first:
            return None  # a sample fell in between (every 10 s): its TPS differs
        csl = ConsumeStatsList.decode(body or b"")
        (entry,) = [e for e in csl.consume_stats_list if GROUP in e]
        (stats,) = entry[GROUP]
        assert stats.consume_tps == first.stats_minute.tps
        return csl

    csl = wait_for(consume_stats)
    assert csl is not None
    assert csl.total_diff >= N - QUEUES
    assert csl.broker_addr == addr


def test_servers_log_to_rotating_files_and_stderr(tmp_path: Path) -> None:
    ns = start_namesrv(tmp_path / "ns")
    try:
        broker = start_broker(
            tmp_path / "b", ns.ready["namesrv"], None,
            "--log-level", "DEBUG", "--log-max-bytes", "1024", "--log-backup-count", "2",
        )  # fmt: skip
        try:
            for i in range(30):
                assert send_message(broker.ready["broker"], "LogT", b"x", queue_id=i % 4).code == 0
        finally:
            assert broker.stop() == 0
    finally:
        assert ns.stop() == 0
    ns_log = (tmp_path / "ns" / "logs" / "namesrv.log").read_text()
    assert "name server started" in ns_log
    assert "name server stopped" in ns_log
    assert "name server started" in ns.output()  # foreground: stderr too
    logs = sorted((tmp_path / "b" / "store" / "logs").glob("broker.log*"))
    assert [p.name for p in logs] == ["broker.log", "broker.log.1", "broker.log.2"]
    assert all(p.stat().st_size <= 1024 for p in logs[1:])
    assert "broker broker-a stopped" in logs[0].read_text()
