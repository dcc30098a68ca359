"""The NameServer's route tables (RocketMQ ``RouteInfoManager``), pure state without I/O.

How it works: five tables, as in RocketMQ —

* ``topic_queue_table``: topic -> {broker name -> QueueData};
* ``broker_addr_table``: broker name -> BrokerData (cluster, addresses by broker id);
* ``cluster_addr_table``: cluster -> {broker name};
* ``broker_live_table``: (cluster, broker address) -> BrokerLiveInfo (last heartbeat,
  timeout, DataVersion of its topic table, connection, HA address);
* ``filter_server_table``: (cluster, broker address) -> filter servers.

A registration puts the broker into its cluster and group; a master (or, with acting-master
support, the lowest slave) also upserts a QueueData per topic when it registers first or its
topic table's DataVersion changed. Brokers leave by UNREGISTER_BROKER, by their connection
closing, or by the periodic scan when ``last heartbeat + timeout < now``; a topic's QueueData
goes only when the last address of that broker name is gone, and a topic goes with its last
QueueData. ``pickup_topic_route_data`` returns a route only if both queue and broker data exist.

Everything runs on one event-loop thread, so no locks; time comes from an injected ``Clock``.
Connections are opaque objects compared by identity; the caller closes expired ones.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ariane.common.clock import Clock
from ariane.common.sysflag import PERM_READ, PERM_WRITE, TOPIC_UNIT, TOPIC_UNIT_SUB
from ariane.namesrv.config import NamesrvConfig
from ariane.remoting.protocol.bodies import (
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    RegisterBrokerResult,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from ariane.remoting.protocol.route import MASTER_ID, BrokerData, QueueData, TopicRouteData

__all__ = ["BrokerAddrInfo", "BrokerLiveInfo", "RouteInfoManager", "UnregisterRequest"]

logger = logging.getLogger(__name__)

#: (cluster name, broker address): the key of the liveness table.
BrokerAddrInfo = tuple[str, str]

#: Route lookups for topics with this prefix never get an acting master.
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address."""

    last_update_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class UnregisterRequest:
    """One broker address leaving."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int


class RouteInfoManager:
    """Route tables and the rules that change them.

    Args:
        config: read for timeouts and feature switches (replace it to apply updates).
        clock: the time source.
    """

    def __init__(self, config: NamesrvConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddrInfo, list[str]] = {}
        self.topic_queue_mapping_info_table: dict[str, dict[str, Any]] = {}

    # -- registration ---------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        zone_name: str | None = None,
        timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        filter_server_list: list[str] | None = None,
        channel: Any = None,
    ) -> RegisterBrokerResult | None:
        """Register (or refresh) a broker address.

        Returns:
            The master's HA address and address for a slave, or ``None`` when the registration
            must be refused (an unknown broker id registering a single topic before its full
            registration).
        """
        result = RegisterBrokerResult()
        wrapper = topic_config_wrapper
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = broker_data
        old_version_broker = enable_acting_master is None
        broker_data.enable_acting_master = bool(enable_acting_master)
        broker_data.zone_name = zone_name
        addrs = broker_data.broker_addrs

        # a slave switched to master: one ip:port keeps one record
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]

        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            old_info = self.broker_live_table.get((cluster_name, old_addr))
            new_state = wrapper.data_version.state_version if wrapper is not None else 0
            if old_info is not None and old_info.data_version.state_version > new_state:
                logger.warning(
                    "ignoring registration of %s as %s[%d]: %s holds a newer state version",
                    broker_addr,
                    broker_name,
                    broker_id,
                    old_addr,
                )
                self.broker_live_table.pop((cluster_name, broker_addr), None)
                return result

        topic_count = len(wrapper.topic_config_table) if wrapper is not None else 0
        if broker_id not in addrs and topic_count == 1:
            logger.warning(
                "refusing single-topic registration of %s[%d]=%s before its full registration",
                broker_name,
                broker_id,
                broker_addr,
            )
            return None

        addrs[broker_id] = broker_addr
        register_first = register_first or not old_addr
        is_master = broker_id == MASTER_ID
        is_prime_slave = not old_version_broker and not is_master and broker_id == min(addrs)
        if wrapper is not None and (is_master or is_prime_slave):
            self._apply_topics(
                cluster_name, broker_addr, broker_data, wrapper, register_first, is_prime_slave
            )

        key = (cluster_name, broker_addr)
        previous = self.broker_live_table.get(key)
        self.broker_live_table[key] = BrokerLiveInfo(
            last_update_ms=self.clock.now_ms(),
            heartbeat_timeout_ms=timeout_ms or self.config.broker_channel_expired_time_ms,
            data_version=wrapper.data_version if wrapper is not None else DataVersion(),
            channel=channel,
            ha_server_addr=ha_server_addr,
        )
        if previous is None:
            logger.info(
                "new broker registered: %s %s[%d] HA %s",
                key,
                broker_name,
                broker_id,
                ha_server_addr,
            )

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[key] = list(filter_server_list)
            else:
                self.filter_server_table.pop(key, None)

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_info = self.broker_live_table.get((cluster_name, master_addr))
                if master_info is not None:
                    result.ha_server_addr = master_info.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _apply_topics(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_data: BrokerData,
        wrapper: TopicConfigSerializeWrapper,
        register_first: bool,
        is_prime_slave: bool,
    ) -> None:
        broker_name = broker_data.broker_name
        table = wrapper.topic_config_table
        mapping = wrapper.topic_queue_mapping_info_map
        if self.config.delete_topic_with_broker_registration and not mapping:
            for topic in [
                t
                for t, qds in self.topic_queue_table.items()
                if broker_name in qds and t not in table
            ]:
                self._remove_queue_data(topic, broker_name)
        version_changed = self.is_broker_topic_config_changed(
            cluster_name, broker_addr, wrapper.data_version
        )
        for topic_config in table.values():
            if (
                register_first
                or version_changed
                or self._topic_lacks_broker(topic_config.topic_name, broker_name)
            ):
                perm = topic_config.perm
                if is_prime_slave and broker_data.enable_acting_master:
                    perm &= ~PERM_WRITE  # an acting master is read-only
                self._create_and_update_queue_data(broker_name, topic_config, perm)
        if version_changed or register_first:
            for topic, info in mapping.items():
                bname = info.get("bname") if isinstance(info, dict) else None
                self.topic_queue_mapping_info_table.setdefault(topic, {})[
                    str(bname or broker_name)
                ] = info

    def _topic_lacks_broker(self, topic: str, broker_name: str) -> bool:
        queue_datas = self.topic_queue_table.get(topic)
        return not queue_datas or broker_name not in queue_datas

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig, perm: int) -> None:
        queue_data = QueueData(
            broker_name, tc.read_queue_nums, tc.write_queue_nums, perm, tc.topic_sys_flag
        )
        queue_datas = self.topic_queue_table.get(tc.topic_name)
        if queue_datas is None:
            self.topic_queue_table[tc.topic_name] = {broker_name: queue_data}
            logger.info("new topic registered: %s %s", tc.topic_name, queue_data)
        elif queue_datas.get(broker_name) != queue_data:
            if broker_name in queue_datas:
                logger.info(
                    "topic changed: %s %s -> %s",
                    tc.topic_name,
                    queue_datas[broker_name],
                    queue_data,
                )
            queue_datas[broker_name] = queue_data

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        queue_datas = self.topic_queue_table.get(topic)
        if queue_datas is None:
            return
        if queue_datas.pop(broker_name, None) is not None:
            logger.info("topic %s removed from broker %s", topic, broker_name)
        if not queue_datas:
            del self.topic_queue_table[topic]

    def is_broker_topic_config_changed(
        self, cluster_name: str, broker_addr: str, data_version: DataVersion
    ) -> bool:
        """Whether ``data_version`` differs from the one last registered by that address."""
        previous = self.query_broker_topic_config(cluster_name, broker_addr)
        return previous is None or previous != data_version

    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        """The DataVersion last registered by that address."""
        info = self.broker_live_table.get((cluster_name, broker_addr))
        return info.data_version if info is not None else None

    def update_broker_info_update_timestamp(self, cluster_name: str, broker_addr: str) -> bool:
        """Refresh the liveness of a registered address (BROKER_HEARTBEAT, QUERY_DATA_VERSION)."""
        info = self.broker_live_table.get((cluster_name, broker_addr))
        if info is None:
            return False
        info.last_update_ms = self.clock.now_ms()
        return True

    # -- removal --------------------------------------------------------------------------------

    def unregister_broker(self, requests: Iterable[UnregisterRequest]) -> None:
        """Remove broker addresses (UNREGISTER_BROKER, closed connections, expiry)."""
        removed: set[str] = set()
        reduced: set[str] = set()
        for req in requests:
            key = (req.cluster_name, req.broker_addr)
            if self.broker_live_table.pop(key, None) is not None:
                logger.info("unregistering broker %s", key)
            self.filter_server_table.pop(key, None)
            broker_data = self.broker_addr_table.get(req.broker_name)
            if broker_data is None:
                continue
            addrs = broker_data.broker_addrs
            for broker_id in [i for i, a in addrs.items() if a == req.broker_addr]:
                del addrs[broker_id]
            if addrs:
                reduced.add(req.broker_name)
                continue
            del self.broker_addr_table[req.broker_name]
            names = self.cluster_addr_table.get(req.cluster_name)
            if names is not None:
                names.discard(req.broker_name)
                if not names:
                    del self.cluster_addr_table[req.cluster_name]
                    logger.info("cluster %s has no broker left", req.cluster_name)
            removed.add(req.broker_name)
            reduced.discard(req.broker_name)
        self._clean_topics(removed, reduced)

    def _clean_topics(self, removed: set[str], reduced: set[str]) -> None:
        for topic in list(self.topic_queue_table):
            queue_datas = self.topic_queue_table[topic]
            for broker_name in removed:
                if queue_datas.pop(broker_name, None) is not None:
                    logger.info("topic %s lost broker %s", topic, broker_name)
            if not queue_datas:
                del self.topic_queue_table[topic]
                logger.info("topic %s has no route left", topic)
                continue
            for broker_name in reduced:
                queue_data = queue_datas.get(broker_name)
                broker_data = self.broker_addr_table.get(broker_name)
                if (
                    queue_data is not None
                    and broker_data is not None
                    and broker_data.enable_acting_master
                    and (not broker_data.broker_addrs or min(broker_data.broker_addrs) > MASTER_ID)
                ):
                    queue_data.perm &= ~PERM_WRITE

    def _unregister_request_for(self, key: BrokerAddrInfo) -> UnregisterRequest | None:
        cluster_name, broker_addr = key
        for broker_data in self.broker_addr_table.values():
            if broker_data.cluster != cluster_name:
                continue
            for broker_id, addr in broker_data.broker_addrs.items():
                if addr == broker_addr:
                    return UnregisterRequest(
                        cluster_name, broker_addr, broker_data.broker_name, broker_id
                    )
        return None

    def _destroy(self, key: BrokerAddrInfo) -> None:
        request = self._unregister_request_for(key)
        if request is not None:
            self.unregister_broker([request])
        else:  # not in any group: drop the liveness record anyway
            self.broker_live_table.pop(key, None)
            self.filter_server_table.pop(key, None)

    def on_channel_destroy(self, channel: Any) -> bool:
        """A connection closed: unregister the broker that registered over it, if any."""
        for key, info in self.broker_live_table.items():
            if info.channel is channel:
                logger.info("broker %s connection closed, removing it", key)
                self._destroy(key)
                return True
        return False

    def scan_not_active_brokers(self) -> list[tuple[BrokerAddrInfo, Any]]:
        """Remove brokers whose last heartbeat is older than their timeout.

        Returns:
            The removed addresses with their connections, which the caller should close.
        """
        now = self.clock.now_ms()
        expired = [
            (key, info.channel)
            for key, info in self.broker_live_table.items()
            if info.last_update_ms + info.heartbeat_timeout_ms < now
        ]
        for key, _ in expired:
            logger.warning("broker %s expired (no heartbeat), removing it", key)
            self._destroy(key)
        return expired

    # -- topics ---------------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Remove a topic's route, or only its queues on the brokers of ``cluster_name``."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        for broker_name in self.cluster_addr_table.get(cluster_name, ()):
            self._remove_queue_data(topic, broker_name)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> bool:
        """Add queue data to a topic (REGISTER_TOPIC_IN_NAMESRV); every broker must be known."""
        if not queue_datas:
            return False
        if any(qd.broker_name not in self.broker_addr_table for qd in queue_datas):
            logger.warning("register topic %s names an unknown broker: %s", topic, queue_datas)
            return False
        table = self.topic_queue_table.setdefault(topic, {})
        for qd in queue_datas:
            table[qd.broker_name] = QueueData(
                qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag
            )
        return True

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear PERM_WRITE on every topic of a broker; returns how many topics changed."""
        count = 0
        for queue_datas in self.topic_queue_table.values():
            qd = queue_datas.get(broker_name)
            if qd is not None:
                qd.perm &= ~PERM_WRITE
                count += 1
        return count

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Set read+write on every topic of a broker; returns how many topics changed."""
        count = 0
        for queue_datas in self.topic_queue_table.values():
            qd = queue_datas.get(broker_name)
            if qd is not None:
                qd.perm = PERM_READ | PERM_WRITE
                count += 1
        return count

    # -- queries --------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic`` (copies), or ``None`` without both queue and broker data."""
        queue_datas = self.topic_queue_table.get(topic)
        if not queue_datas:
            return None
        route = TopicRouteData(
            queue_datas=[
                QueueData(
                    q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag
                )
                for q in queue_datas.values()
            ]
        )
        for broker_name in queue_datas:
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            clone = broker_data.copy()
            route.broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    servers = self.filter_server_table.get((clone.cluster, addr))
                    if servers is not None:
                        route.filter_server_table[addr] = list(servers)
        if not route.broker_datas:
            return None
        mapping = self.topic_queue_mapping_info_table.get(topic)
        if mapping:
            route.topic_queue_mapping_by_broker = dict(mapping)
        if self.config.support_acting_master and not topic.startswith(
            SYNC_BROKER_MEMBER_GROUP_PREFIX
        ):
            self._elect_acting_masters(route)
        return route

    @staticmethod
    def _elect_acting_masters(route: TopicRouteData) -> None:
        for bd in route.broker_datas:
            addrs = bd.broker_addrs
            if not addrs or MASTER_ID in addrs or not bd.enable_acting_master:
                continue
            for qd in route.queue_datas:
                if qd.broker_name == bd.broker_name:
                    if not qd.perm & PERM_WRITE:
                        addrs[MASTER_ID] = addrs.pop(min(addrs))
                    break

    def get_all_cluster_info(self) -> ClusterInfo:
        """Every broker group and cluster (copies)."""
        return ClusterInfo(
            {name: bd.copy() for name, bd in self.broker_addr_table.items()},
            {name: set(members) for name, members in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        """Every topic with a route."""
        return TopicList(list(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        """Topics with queues on the brokers of ``cluster``."""
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList([t for t, qds in self.topic_queue_table.items() if names & qds.keys()])

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (the topics brokers register under those names)."""
        topics: list[str] = []
        for cluster, members in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(sorted(members))
        broker_addr = None
        for broker_data in self.broker_addr_table.values():
            if broker_data.broker_addrs:
                broker_addr = next(iter(broker_data.broker_addrs.values()))
                break
        return TopicList(topics, broker_addr)

    def _topics_by_flag(self, want: int, forbid: int = 0) -> TopicList:
        topics = []
        for topic, queue_datas in self.topic_queue_table.items():
            if not queue_datas:
                continue
            flag = next(iter(queue_datas.values())).topic_sys_flag
            if flag & want and not flag & forbid:
                topics.append(topic)
        return TopicList(topics)

    def get_unit_topics(self) -> TopicList:
        """Topics flagged as unit topics."""
        return self._topics_by_flag(TOPIC_UNIT)

    def get_has_unit_sub_topic_list(self) -> TopicList:
        """Topics with unit subscriptions."""
        return self._topics_by_flag(TOPIC_UNIT_SUB)

    def get_has_unit_sub_ununit_topic_list(self) -> TopicList:
        """Non-unit topics with unit subscriptions."""
        return self._topics_by_flag(TOPIC_UNIT_SUB, forbid=TOPIC_UNIT)

    def get_broker_member_group(self, cluster_name: str, broker_name: str) -> BrokerMemberGroup:
        """The addresses of one broker group."""
        group = BrokerMemberGroup(cluster_name, broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            group.broker_addrs.update(broker_data.broker_addrs)
        return group
