"""Statistics through the dispatcher: what processors and the remoting hook record, the
VIEW_BROKER_STATS_DATA / GET_BROKER_CONSUME_STATS / runtime-info answers and the Prometheus
families built from them (parsed back with prometheus-client's parser)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from ariane.broker.metrics import BrokerMetrics
from ariane.broker.stats import GROUP_GET_LATENCY, GROUP_GET_SIZE, SNDBCK_PUT_NUMS
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import KVTable
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, ConsumeStatsList
from tests.unit.broker.harness import Broker, run


class _Static(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


def scrape(b: Broker) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name -> {sorted labels without the common ones: value} of one exposition."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Static(BrokerMetrics(b.c).build()()))
    text = generate_latest(registry).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            assert sample.labels.pop("cluster") == "DefaultCluster"
            assert sample.labels.pop("node_type") == "broker"
            assert sample.labels.pop("node_id") == "broker-a"
            key = tuple(sorted(sample.labels.items()))
            out.setdefault(sample.name, {})[key] = sample.value
    return out


def ticks(b: Broker, seconds: int) -> None:
    for _ in range(seconds):
        b.clock.advance(1000)
        b.c.stats.tick()


def test_stats_requests_and_metrics(tmp_path: Path) -> None:
    async def go() -> None:
        b = await Broker(tmp_path, metrics_exporter_type="PROM").start()
        try:
            for i in range(6):
                assert (await b.send("T", b"x" * 100, queue_id=i % 2)).code == 0
            r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("T", "G", sys_flag=0x4))
            assert r.code == ResponseCode.SUCCESS
            assert r.body
            pulled_bytes = len(r.body)
            stats = b.c.stats
            assert stats.sets[GROUP_GET_SIZE].value("T@G") == pulled_bytes
            assert "0@T@G" in stats.sets[GROUP_GET_LATENCY]
            # a send-back counts SNDBCK_PUT_NUMS under originTopic@group
            offset = int(r.ext_fields["nextBeginOffset"])
            assert offset == 3
            update = h.UpdateConsumerOffsetRequestHeader(
                consumer_group="G", topic="T", queue_id=0, commit_offset=2
            )
            assert (await b.answer(RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
            ticks(b, 10)

            view = h.ViewBrokerStatsDataRequestHeader(stats_name="TOPIC_PUT_NUMS", stats_key="T")
            r = await b.answer(RequestCode.VIEW_BROKER_STATS_DATA, view)
            data = BrokerStatsData.decode(r.body or b"")
            assert data.stats_minute.sum == 6
            assert data.stats_minute.tps == 0.6
            assert data.stats_minute.avgpt == 1.0
            view = h.ViewBrokerStatsDataRequestHeader(stats_name="GROUP_GET_NUMS", stats_key="T@G")
            data = BrokerStatsData.decode(
                (await b.answer(RequestCode.VIEW_BROKER_STATS_DATA, view)).body or b""
            )
            assert data.stats_minute.sum == 3
            view = h.ViewBrokerStatsDataRequestHeader(stats_name="GROUP_GET_NUMS", stats_key="X@G")
            r = await b.answer(RequestCode.VIEW_BROKER_STATS_DATA, view)
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == "The stats <GROUP_GET_NUMS> <X@G> not exist"

            r = await b.answer(
                RequestCode.GET_BROKER_CONSUME_STATS,
                h.GetConsumeStatsInBrokerHeader(is_order=False),
            )
            csl = ConsumeStatsList.decode(r.body or b"")
            assert csl.broker_addr == b.c.broker_addr
            (entry,) = [e for e in csl.consume_stats_list if "G" in e]
            (cs,) = entry["G"]
            assert cs.consume_tps == 0.3
            assert csl.total_diff == (3 - 2) + 3  # queue 0: 3 stored, 2 committed; queue 1: 3
            assert csl.total_inflight_diff == 1  # queue 0 pulled to 3, committed 2
            r = await b.answer(
                RequestCode.GET_BROKER_CONSUME_STATS, h.GetConsumeStatsInBrokerHeader(is_order=True)
            )
            assert ConsumeStatsList.decode(r.body or b"").total_diff == 0  # T is not ordered

            info = KVTable.decode(
                (await b.answer(RequestCode.GET_BROKER_RUNTIME_INFO)).body or b""
            ).table
            assert info["msgPutTotalTodayNow"] == "6"
            assert info["msgGetTotalTodayNow"] == "3"
            assert info["putTps"].split()[0] == "0.6"
            assert info["getTransferredTps"].split()[0] == "0.3"

            m = scrape(b)
            t_in = (("is_system", "false"), ("message_type", "normal"), ("topic", "T"))
            assert m["rocketmq_messages_in_total"][t_in] == 6
            assert m["rocketmq_throughput_in_total"][t_in] == b.c.stats.sets[
                "TOPIC_PUT_SIZE"
            ].value("T")
            assert m["rocketmq_message_size_count"][t_in] == 6
            t_out = (("consumer_group", "G"), ("is_system", "false"), ("topic", "T"))
            assert m["rocketmq_messages_out_total"][t_out] == 3
            assert m["rocketmq_throughput_out_total"][t_out] == pulled_bytes
            lag = (
                ("consumer_group", "G"),
                ("is_retry", "false"),
                ("is_system", "false"),
                ("topic", "T"),
            )
            assert (
                m["rocketmq_consumer_lag_messages"][lag] == 1 + 3 - 3
            )  # queue 1: nothing committed
            assert m["rocketmq_consumer_inflight_messages"][lag] == 1
            assert m["rocketmq_consumer_ready_messages"][lag] == 0
            assert m["rocketmq_consumer_lag_latency"][lag] >= 0
            q0 = (("consumer_group", "G"), ("queue_id", "0"), ("topic", "T"))
            assert m["ariane_consumer_queue_lag_messages"][q0] == 1
            rpc = (
                ("is_long_polling", "false"), ("protocol_type", "remoting"),
                ("request_code", "send_message_v2"), ("response_code", "success"), ("result", "success"),
            )  # fmt: skip
            assert m["rocketmq_rpc_latency_count"][rpc] == 6
            assert m["rocketmq_topic_number"][()] == len(b.c.topics.table)
            assert m["rocketmq_broker_permission"][()] == 6
            assert (
                m["rocketmq_storage_dispatch_behind_bytes"][
                    (("storage_medium", "disk"), ("storage_type", "local"))
                ]
                == 0
            )

            update = h.UpdateConsumerOffsetRequestHeader(
                consumer_group="G", topic="T", queue_id=0, commit_offset=3
            )
            assert (await b.answer(RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
            assert scrape(b)["rocketmq_consumer_lag_messages"][lag] == 0
        finally:
            await b.stop()

    run(go())


def test_send_back_counts_and_cardinality_limit(tmp_path: Path) -> None:
    async def go() -> None:
        b = await Broker(tmp_path, metrics_cardinality_limit=2).start()
        assert not b.c.rpc_metrics.timing  # no endpoint: requests are not timed
        try:
            for topic in ("A", "B", "C"):
                assert (await b.send(topic)).code == 0
            await b.heartbeat("c1", "G", ("A",))
            r = await b.answer(RequestCode.PULL_MESSAGE, b.pull_header("A", "G", sys_flag=0x4))
            assert r.code == 0
            back = h.ConsumerSendMsgBackRequestHeader(
                offset=0, group="G", delay_level=0, origin_msg_id="", origin_topic="A",
                unit_mode=False, max_reconsume_times=16,
            )  # fmt: skip
            assert (await b.answer(RequestCode.CONSUMER_SEND_MSG_BACK, back)).code == 0
            assert b.c.stats.sets[SNDBCK_PUT_NUMS].value("A@G") == 1
            m = scrape(b)
            assert len(m["rocketmq_messages_in_total"]) == 2
            dropped = m["ariane_metrics_series_dropped"]
            assert dropped[(("metric", "rocketmq_messages_in_total"),)] >= 1
        finally:
            await b.stop()

    run(go())
