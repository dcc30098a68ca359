"""Route and NameServer bodies: Java-shaped JSON in, client-readable JSON out."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import bodies
from ariane.remoting.protocol.bodies import (
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from ariane.remoting.protocol.command import MQVersion
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData

JAVA_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)


def test_route_from_java_bare_keys_and_back_with_quoted_keys() -> None:
    route = TopicRouteData.decode(JAVA_ROUTE)
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.broker_datas[0].master_addr == "10.0.0.1:10911"
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    assert route.queue_datas[0].readable
    assert route.queue_datas[0].writable
    body = route.encode()
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in body
    assert json.loads(body)["queueDatas"][0]["writeQueueNums"] == 4  # standard JSON
    assert TopicRouteData.decode(body) == route


def test_route_accepts_4x_topic_syn_flag_and_order_conf() -> None:
    route = TopicRouteData.from_json(
        {
            "orderTopicConf": "broker-a:4",
            "queueDatas": [
                {
                    "brokerName": "b",
                    "perm": "6",
                    "readQueueNums": 1,
                    "writeQueueNums": 1,
                    "topicSynFlag": 1,
                }
            ],
        }
    )
    assert route.order_topic_conf == "broker-a:4"
    assert route.queue_datas[0].topic_sys_flag == 1
    assert route.broker_datas == []
    assert route.filter_server_table == {}


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b'{"queueDatas":{}}',
        b'{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}',
        b'{"queueDatas":[{"perm":"rw"}]}',
    ],
)
def test_bad_route_bodies_raise_protocol_error(body: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        TopicRouteData.decode(body)


def test_select_broker_addr_prefers_master() -> None:
    assert BrokerData("c", "b", {1: "s1", 0: "m"}).select_broker_addr() == "m"
    assert BrokerData("c", "b", {2: "s2"}).select_broker_addr() == "s2"
    assert BrokerData("c", "b").select_broker_addr() is None


def _wrapper() -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={
            "TBW102": TopicConfig("TBW102", 8, 8, 7),
            "T1": TopicConfig("T1", 4, 4, 6, "MULTI_TAG", 0, False, {"message.type": "FIFO"}),
        },
        data_version=DataVersion(0, 1_700_000_000_000, 3),
    )


def test_register_body_json_round_trip() -> None:
    body = RegisterBrokerBody(_wrapper(), ["fs:1"])
    assert RegisterBrokerBody.decode(body.encode(), False, MQVersion.V5_3_3) == body


def test_register_body_compressed_round_trip_keeps_what_the_format_carries() -> None:
    body = RegisterBrokerBody(_wrapper(), [])
    for version in (MQVersion.V4_9_4, MQVersion.V5_3_3):
        data = body.encode(compress=True) if version >= MQVersion.V5_0_0 else _legacy(body)
        back = RegisterBrokerBody.decode(data, True, version)
        assert back.topic_config_serialize_wrapper.data_version == DataVersion(
            0, 1_700_000_000_000, 3
        )
        table = back.topic_config_serialize_wrapper.topic_config_table
        assert table["T1"] == TopicConfig(
            "T1", 4, 4, 6, "MULTI_TAG", 0, False, {"message.type": "FIFO"}
        )
        assert table["TBW102"].perm == 7


def _legacy(body: RegisterBrokerBody) -> bytes:
    """A pre-5.0 compressed body: no mapping section at the end."""
    raw = zlib.decompress(body.encode(compress=True))
    return zlib.compress(raw[:-4])


@pytest.mark.parametrize(
    "data", [b"not zlib", zlib.compress(b"\x00\x00"), zlib.compress(b"\x00\x00\x00\x10{}")]
)
def test_bad_compressed_register_body(data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        RegisterBrokerBody.decode(data, True, MQVersion.V5_3_3)


def test_compressed_register_body_bomb_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "MAX_INFLATED_BYTES", 1000)
    with pytest.raises(RemoteProtocolError, match="too large"):
        RegisterBrokerBody.decode(zlib.compress(b"\x00" * 100_000), True, MQVersion.V5_3_3)


def test_topic_config_text_form() -> None:
    tc = TopicConfig("T", 8, 4, 6, "SINGLE_TAG", 0, False, {"a": "b"})
    assert tc.encode_text() == 'T 8 4 6 SINGLE_TAG {"a":"b"}'
    assert TopicConfig.decode_text(tc.encode_text()) == tc
    assert TopicConfig.decode_text("T 1 1 6 SINGLE_TAG ").attributes == {}
    assert TopicConfig.decode_text('T 1 1 6 SINGLE_TAG {"k":"a b"}').attributes == {"k": "a b"}
    assert TopicConfig.decode_text("T 1 1 6 SINGLE_TAG {broken").attributes == {}
    with pytest.raises(RemoteProtocolError):
        TopicConfig.decode_text("T 1 x 6 SINGLE_TAG")
    with pytest.raises(RemoteProtocolError):
        TopicConfig.decode_text("T 1")


def test_small_bodies_round_trip() -> None:
    info = ClusterInfo({"b": BrokerData("C", "b", {0: "h:1"})}, {"C": {"b", "a"}})
    assert ClusterInfo.decode(info.encode()) == info
    assert json.loads(info.encode())["clusterAddrTable"] == {"C": ["a", "b"]}
    topics = TopicList(["a", "b", "a"], "h:1")
    assert TopicList.decode(topics.encode()) == TopicList(["a", "b"], "h:1")
    assert KVTable.decode(KVTable({"k": "v"}).encode()) == KVTable({"k": "v"})
    assert KVTable.decode(b'{"table":{"n":1}}') == KVTable({"n": "1"})
    group = BrokerMemberGroup("C", "b", {0: "h:1", 2: "h:2"})
    assert BrokerMemberGroup.decode(group.encode()) == group
    assert b'"brokerMemberGroup"' in group.encode()


def test_data_version_semantics() -> None:
    v = DataVersion(0, 10, 1)
    assert v == DataVersion(0, 10, 1)
    assert v != DataVersion(1, 10, 1)
    assert v.next_version(20) == DataVersion(0, 20, 2)
    assert DataVersion.decode(b'{"counter":5,"timestamp":7}') == DataVersion(0, 7, 5)


_names = st.text(st.characters(codec="utf-8", exclude_characters=" "), min_size=1, max_size=8)


@given(
    st.dictionaries(
        _names,
        st.builds(TopicConfig, _names, st.integers(0, 64), st.integers(0, 64), st.integers(0, 15)),
        max_size=5,
    )
)
def test_compressed_form_round_trips_any_topic_table(table: dict[str, TopicConfig]) -> None:
    table = {tc.topic_name: tc for tc in table.values()}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, 2, 3)), ["x"])
    back = RegisterBrokerBody.decode(body.encode(compress=True), True, MQVersion.V5_3_3)
    assert back.topic_config_serialize_wrapper.topic_config_table == table
    assert back.filter_server_list == ["x"]
