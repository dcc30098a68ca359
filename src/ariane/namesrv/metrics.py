"""The NameServer's Prometheus metrics, built at scrape time on the event loop: request
latency (``rocketmq_rpc_latency``) and the size of the route tables. Every series carries
``node_type="namesrv"`` and ``node_id`` (the NameServer's address)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from ariane.observability.families import Families
from ariane.observability.rpc import add_rpc_families
from ariane.remoting.metrics import RpcMetrics

if TYPE_CHECKING:
    from ariane.namesrv.context import NamesrvContext

__all__ = ["NamesrvMetrics"]

#: Most series per metric (the NameServer's metrics are small).
CARDINALITY_LIMIT = 10_000


class NamesrvMetrics:
    """Builds the NameServer's metric families.

    Args:
        namesrv: the NameServer observed.
        rpc: its request hook.
    """

    def __init__(self, namesrv: NamesrvContext, rpc: RpcMetrics) -> None:
        self.namesrv = namesrv
        self.rpc = rpc

    def build(self) -> list[Metric]:
        """Every family, read now (call on the event loop)."""
        ns = self.namesrv
        node = f"{ns.config.bind_address}:{ns.port}"
        fam = Families({"node_type": "namesrv", "node_id": node}, CARDINALITY_LIMIT)
        routes = ns.route_info
        fam.gauge("ariane_namesrv_brokers", "Live broker addresses registered").add(
            [], len(routes.broker_live_table)
        )
        fam.gauge("ariane_namesrv_broker_names", "Broker names (master/slave sets) known").add(
            [], len(routes.broker_addr_table)
        )
        fam.gauge("ariane_namesrv_clusters", "Clusters known").add(
            [], len(routes.cluster_addr_table)
        )
        fam.gauge("rocketmq_topic_number", "Topics with a route").add(
            [], len(routes.topic_queue_table)
        )
        fam.gauge("ariane_client_connections", "Open client connections").add(
            [], len(ns.remoting.channels)
        )
        add_rpc_families(fam, self.rpc.snapshot())
        return fam.finish()
