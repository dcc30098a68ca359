"""RouteInfoManager rules, without sockets: registration, liveness, removal, queries."""

from __future__ import annotations

from dataclasses import replace

from ariane.common.clock import ManualClock
from ariane.common.sysflag import PERM_INHERIT, PERM_READ, PERM_WRITE, TOPIC_UNIT, TOPIC_UNIT_SUB
from ariane.namesrv.config import NamesrvConfig
from ariane.namesrv.route_info import RouteInfoManager, UnregisterRequest
from ariane.remoting.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from ariane.remoting.protocol.route import QueueData

RW = PERM_READ | PERM_WRITE


def wrapper(*topics: TopicConfig, counter: int = 1, state: int = 0) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={t.topic_name: t for t in topics},
        data_version=DataVersion(state, 1000, counter),
    )


def manager(**config: object) -> tuple[RouteInfoManager, ManualClock]:
    clock = ManualClock()
    return RouteInfoManager(NamesrvConfig(**config), clock), clock  # type: ignore[arg-type]


def register(
    rim: RouteInfoManager,
    name: str = "broker-a",
    broker_id: int = 0,
    addr: str = "10.0.0.1:10911",
    cluster: str = "DefaultCluster",
    topics: TopicConfigSerializeWrapper | None = None,
    channel: object = None,
    **kwargs: object,
) -> object:
    return rim.register_broker(
        cluster_name=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace("10911", "10912"),
        topic_config_wrapper=topics
        if topics is not None
        else wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("SELF_TEST_TOPIC", 1, 1, RW)),
        channel=channel,
        **kwargs,  # type: ignore[arg-type]
    )


def test_master_registration_creates_routes() -> None:
    rim, _ = manager()
    tbw = TopicConfig("TBW102", 8, 8, PERM_INHERIT | RW)
    register(
        rim, topics=wrapper(TopicConfig("T", 4, 4, RW), tbw, TopicConfig("broker-a", 1, 1, RW))
    )
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 4, 4, RW, 0)]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        ("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})
    ]
    tbw_route = rim.pickup_topic_route_data("TBW102")
    assert tbw_route is not None
    assert tbw_route.queue_datas[0].perm == 7
    assert rim.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert sorted(rim.get_all_topic_list().topic_list) == ["T", "TBW102", "broker-a"]
    assert rim.pickup_topic_route_data("missing") is None


def test_slave_registers_address_but_not_queues_and_learns_master() -> None:
    rim, _ = manager()
    register(rim)
    result = register(
        rim,
        broker_id=1,
        addr="10.0.0.2:10911",
        topics=wrapper(TopicConfig("S", 2, 2, RW), TopicConfig("T", 1, 1, RW)),
    )
    assert result is not None
    assert (result.master_addr, result.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")  # type: ignore[attr-defined]
    assert rim.pickup_topic_route_data("S") is None  # slaves do not create topics
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.queue_datas[0].write_queue_nums == 4


def test_queue_data_updates_only_when_data_version_changes() -> None:
    rim, _ = manager()
    register(rim, topics=wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("S", 1, 1, RW), counter=1))
    rim.topic_queue_table["T"]["broker-a"].perm = PERM_READ  # e.g. wiped by an operator
    register(rim, topics=wrapper(TopicConfig("T", 4, 4, RW), counter=1))  # same version
    assert rim.topic_queue_table["T"]["broker-a"].perm == PERM_READ
    register(rim, topics=wrapper(TopicConfig("T", 8, 8, RW), counter=2))
    assert rim.topic_queue_table["T"]["broker-a"] == QueueData("broker-a", 8, 8, RW, 0)
    # a topic this broker is not yet serving is added even without a version change
    register(rim, topics=wrapper(TopicConfig("T", 8, 8, RW), TopicConfig("U", 1, 1, RW), counter=2))
    assert "U" in rim.topic_queue_table


def test_single_topic_registration_before_full_registration_is_refused() -> None:
    rim, _ = manager()
    assert register(rim, topics=wrapper(TopicConfig("T", 4, 4, RW))) is None
    assert rim.broker_addr_table["broker-a"].broker_addrs == {}
    assert (
        register(rim, topics=wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("U", 1, 1, RW)))
        is not None
    )
    assert register(rim, topics=wrapper(TopicConfig("V", 4, 4, RW))) is not None


def test_slave_promoted_keeps_one_record_per_address() -> None:
    rim, _ = manager()
    register(rim)
    register(rim, broker_id=1, addr="10.0.0.2:10911")
    register(
        rim,
        broker_id=0,
        addr="10.0.0.2:10911",
        topics=wrapper(TopicConfig("T", 4, 4, RW), counter=5, state=1),
    )
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.2:10911"}


def test_stale_state_version_registration_is_ignored() -> None:
    rim, _ = manager()
    register(rim, topics=wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("U", 1, 1, RW), state=5))
    register(
        rim,
        addr="10.0.0.9:10911",
        topics=wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("U", 1, 1, RW), state=3),
    )
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911"}
    assert ("DefaultCluster", "10.0.0.9:10911") not in rim.broker_live_table


def test_unregister_removes_group_cluster_and_topics_only_when_last_address_goes() -> None:
    rim, _ = manager()
    register(rim)
    register(rim, broker_id=1, addr="10.0.0.2:10911")
    register(rim, name="broker-b", addr="10.0.0.3:10911")
    rim.unregister_broker([UnregisterRequest("DefaultCluster", "10.0.0.1:10911", "broker-a", 0)])
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert {q.broker_name for q in route.queue_datas} == {"broker-a", "broker-b"}
    assert rim.broker_addr_table["broker-a"].master_addr is None
    rim.unregister_broker([UnregisterRequest("DefaultCluster", "10.0.0.2:10911", "broker-a", 1)])
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert rim.cluster_addr_table == {"DefaultCluster": {"broker-b"}}
    rim.unregister_broker([UnregisterRequest("DefaultCluster", "10.0.0.3:10911", "broker-b", 0)])
    assert rim.topic_queue_table == {}
    assert rim.cluster_addr_table == {}
    assert rim.broker_live_table == {}


def test_expiry_scan_uses_strict_timeout_and_returns_channels() -> None:
    rim, clock = manager(broker_channel_expired_time_ms=1000)
    ch_a, ch_b = object(), object()
    register(rim, channel=ch_a)
    register(rim, name="broker-b", addr="10.0.0.3:10911", channel=ch_b, timeout_ms=5000)
    clock.advance(1000)
    assert rim.scan_not_active_brokers() == []  # last + timeout == now is still alive
    clock.advance(1)
    expired = rim.scan_not_active_brokers()
    assert expired == [(("DefaultCluster", "10.0.0.1:10911"), ch_a)]
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert rim.update_broker_info_update_timestamp("DefaultCluster", "10.0.0.3:10911")
    clock.advance(4500)
    assert rim.scan_not_active_brokers() == []
    clock.advance(600)
    assert len(rim.scan_not_active_brokers()) == 1
    assert rim.pickup_topic_route_data("T") is None


def test_channel_destroy_unregisters_the_broker_of_that_connection() -> None:
    rim, _ = manager()
    channel = object()
    register(rim, channel=channel)
    assert not rim.on_channel_destroy(object())
    assert rim.on_channel_destroy(channel)
    assert rim.pickup_topic_route_data("T") is None
    assert rim.broker_addr_table == {}


def test_write_perm_wipe_and_add_are_reflected_in_routes() -> None:
    rim, _ = manager()
    register(
        rim, topics=wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("U", 4, 4, RW | PERM_INHERIT))
    )
    assert rim.wipe_write_perm_of_broker("broker-a") == 2
    route = rim.pickup_topic_route_data("U")
    assert route is not None
    assert route.queue_datas[0].perm == PERM_READ | PERM_INHERIT
    assert not route.queue_datas[0].writable
    assert rim.add_write_perm_of_broker("broker-a") == 2
    route = rim.pickup_topic_route_data("U")
    assert route is not None
    assert route.queue_datas[0].perm == RW
    assert rim.wipe_write_perm_of_broker("nobody") == 0


def test_routes_are_copies() -> None:
    rim, _ = manager()
    register(rim)
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    route.queue_datas[0].perm = 0
    route.broker_datas[0].broker_addrs[7] = "x"
    again = rim.pickup_topic_route_data("T")
    assert again is not None
    assert again.queue_datas[0].perm == RW
    assert 7 not in again.broker_datas[0].broker_addrs


def test_delete_topic_everywhere_or_per_cluster() -> None:
    rim, _ = manager()
    register(rim)
    register(rim, name="broker-b", addr="10.0.0.3:10911", cluster="Other")
    rim.delete_topic("T", "Other")
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    rim.delete_topic("T", "NoSuchCluster")
    rim.delete_topic("T")
    assert rim.pickup_topic_route_data("T") is None


def test_register_topic_requires_known_brokers() -> None:
    rim, _ = manager()
    register(rim)
    assert not rim.register_topic("N", [QueueData("ghost", 1, 1, RW)])
    assert rim.register_topic("N", [QueueData("broker-a", 2, 2, RW)])
    route = rim.pickup_topic_route_data("N")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 2, 2, RW)]


def test_topic_and_cluster_listings() -> None:
    rim, _ = manager()
    register(
        rim,
        topics=wrapper(
            TopicConfig("T", 1, 1, RW),
            TopicConfig("Unit", 1, 1, RW, topic_sys_flag=TOPIC_UNIT),
            TopicConfig("UnitSub", 1, 1, RW, topic_sys_flag=TOPIC_UNIT_SUB),
            TopicConfig("Both", 1, 1, RW, topic_sys_flag=TOPIC_UNIT | TOPIC_UNIT_SUB),
        ),
    )
    register(
        rim,
        name="broker-b",
        addr="10.0.0.3:10911",
        cluster="Other",
        topics=wrapper(TopicConfig("X", 1, 1, RW), TopicConfig("Y", 1, 1, RW)),
    )
    assert sorted(rim.get_topics_by_cluster("DefaultCluster").topic_list) == [
        "Both",
        "T",
        "Unit",
        "UnitSub",
    ]
    assert rim.get_topics_by_cluster("nope").topic_list == []
    assert sorted(rim.get_unit_topics().topic_list) == ["Both", "Unit"]
    assert sorted(rim.get_has_unit_sub_topic_list().topic_list) == ["Both", "UnitSub"]
    assert rim.get_has_unit_sub_ununit_topic_list().topic_list == ["UnitSub"]
    system = rim.get_system_topic_list()
    assert sorted(system.topic_list) == ["DefaultCluster", "Other", "broker-a", "broker-b"]
    assert system.broker_addr in {"10.0.0.1:10911", "10.0.0.3:10911"}
    info = rim.get_all_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}, "Other": {"broker-b"}}
    group = rim.get_broker_member_group("DefaultCluster", "broker-a")
    assert group.broker_addrs == {0: "10.0.0.1:10911"}


def test_data_version_queries() -> None:
    rim, _ = manager()
    register(rim, topics=wrapper(TopicConfig("T", 1, 1, RW), TopicConfig("S", 1, 1, RW), counter=3))
    assert rim.query_broker_topic_config("DefaultCluster", "10.0.0.1:10911") == DataVersion(
        0, 1000, 3
    )
    assert not rim.is_broker_topic_config_changed(
        "DefaultCluster", "10.0.0.1:10911", DataVersion(0, 1000, 3)
    )
    assert rim.is_broker_topic_config_changed(
        "DefaultCluster", "10.0.0.1:10911", DataVersion(0, 1000, 4)
    )
    assert rim.is_broker_topic_config_changed("DefaultCluster", "unknown:1", DataVersion())


def test_topics_dropped_with_registration_when_enabled() -> None:
    rim, _ = manager(delete_topic_with_broker_registration=True)
    register(rim, topics=wrapper(TopicConfig("T", 1, 1, RW), TopicConfig("U", 1, 1, RW), counter=1))
    register(rim, topics=wrapper(TopicConfig("T", 1, 1, RW), TopicConfig("V", 1, 1, RW), counter=2))
    assert sorted(rim.topic_queue_table) == ["T", "V"]


def test_acting_master_when_supported() -> None:
    rim, _ = manager(support_acting_master=True)
    topics = wrapper(TopicConfig("T", 4, 4, RW), TopicConfig("U", 1, 1, RW))
    register(rim, topics=topics, enable_acting_master=True)
    register(rim, broker_id=1, addr="10.0.0.2:10911", topics=topics, enable_acting_master=True)
    rim.unregister_broker([UnregisterRequest("DefaultCluster", "10.0.0.1:10911", "broker-a", 0)])
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert not route.queue_datas[0].writable  # no master: read-only
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.2:10911"}  # the slave acts as master
    rim.config = replace(rim.config, support_acting_master=False)
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}
