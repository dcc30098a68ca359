"""NameServer request handling through the dispatcher, with a fake connection (no sockets)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ariane.common.clock import ManualClock
from ariane.common.javaprops import format_properties, parse_properties
from ariane.errors import ConfigError
from ariane.namesrv.config import NamesrvConfig
from ariane.namesrv.kvconfig import ORDER_TOPIC_CONFIG, KVConfigManager
from ariane.namesrv.server import NameServer
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import (
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    KVTable,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import MQVersion, RemotingCommand
from ariane.remoting.protocol.route import QueueData, TopicRouteData
from tests.helpers import register_broker_command


class FakeChannel:
    """Just enough of ``Channel`` for the dispatcher."""

    def __init__(self, addr: str = "127.0.0.1:50000") -> None:
        self.remote_addr = addr
        self.sent: list[RemotingCommand] = []

    def send(self, cmd: RemotingCommand) -> bool:
        self.sent.append(cmd)
        return True

    def begin_async(self) -> None:
        pass

    def end_async(self) -> None:
        pass


class Harness:
    def __init__(self, tmp_path: Path, **config: Any) -> None:
        self.clock = ManualClock()
        cfg = NamesrvConfig(
            kv_config_path=str(tmp_path / "kvConfig.json"),
            config_store_path=str(tmp_path / "namesrv.properties"),
            **config,
        )
        self.ns = NameServer(cfg, clock=self.clock)
        self.channel = FakeChannel()

    async def call(
        self,
        code: int,
        ext: dict[str, str] | h.CommandHeader | None = None,
        body: bytes | None = None,
        channel: FakeChannel | None = None,
        version: int = MQVersion.V5_3_3,
    ) -> RemotingCommand:
        ch = channel or self.channel
        fields = ext.to_ext_fields() if isinstance(ext, h.CommandHeader) else (ext or {})
        request = RemotingCommand.request(code, fields, body)
        request.version = version
        before = len(ch.sent)
        self.ns.remoting.dispatcher.handle_request(ch, request)  # type: ignore[arg-type]
        for _ in range(100):
            if len(ch.sent) > before:
                break
            await asyncio.sleep(0)
            if self.ns.remoting.dispatcher.tasks:
                await asyncio.gather(*self.ns.remoting.dispatcher.tasks)
        (response,) = ch.sent[before:]
        assert response.opaque == request.opaque
        assert response.is_response
        return response

    async def register(
        self,
        name: str = "broker-a",
        broker_id: int = 0,
        addr: str = "127.0.0.1:10911",
        compressed: bool = False,
        channel: FakeChannel | None = None,
    ) -> RemotingCommand:
        request = register_broker_command(
            broker_name=name, broker_addr=addr, broker_id=broker_id, compressed=compressed
        )
        return await self.call(
            RequestCode.REGISTER_BROKER, request.ext_fields, request.body, channel=channel
        )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_register_then_route_in_client_readable_json(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        r = await t.register(compressed=True)
        assert r.code == ResponseCode.SUCCESS
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic="T"))
        assert r.code == ResponseCode.SUCCESS
        assert r.body is not None
        assert json.loads(r.body)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
        route = TopicRouteData.decode(r.body)
        assert route.queue_datas == [QueueData("broker-a", 4, 4, 6)]
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "nope"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        assert r.remark == "No topic route info in name server for the topic: nope"
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
        assert r.code == ResponseCode.INVALID_PARAMETER

    run(main())


def test_register_rejects_bad_crc_and_bad_body(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        header = h.RegisterBrokerRequestHeader(
            broker_name="b",
            broker_addr="a:1",
            cluster_name="c",
            ha_server_addr="a:2",
            broker_id=0,
            body_crc32=12345,
        )
        r = await t.call(RequestCode.REGISTER_BROKER, header, b"{}")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        header.body_crc32 = 0
        header.compressed = True
        r = await t.call(RequestCode.REGISTER_BROKER, header, b"not zlib")
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert "RegisterBrokerBody" in (r.remark or "")
        r = await t.call(RequestCode.REGISTER_BROKER, {"brokerName": "b"})
        assert r.code == ResponseCode.INVALID_PARAMETER
        assert "brokerAddr" in (r.remark or "")

    run(main())


def test_old_broker_versions_send_a_bare_topic_wrapper(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        wrapper = TopicConfigSerializeWrapper(
            {"T": TopicConfig("T", 2, 2, 6), "U": TopicConfig("U", 1, 1, 6)}
        )
        header = h.RegisterBrokerRequestHeader(
            broker_name="b", broker_addr="a:1", cluster_name="c", ha_server_addr="a:2", broker_id=0
        )
        body = json.dumps(wrapper.to_json()).encode()
        r = await t.call(RequestCode.REGISTER_BROKER, header, body, version=MQVersion.V3_0_11 - 1)
        assert r.code == ResponseCode.SUCCESS
        assert t.ns.route_info.pickup_topic_route_data("T") is not None

    run(main())


def test_slave_gets_master_addresses_and_order_config(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        await t.register()
        r = await t.call(
            RequestCode.PUT_KV_CONFIG,
            h.PutKVConfigRequestHeader(namespace=ORDER_TOPIC_CONFIG, key="T", value="broker-a:4"),
        )
        assert r.code == ResponseCode.SUCCESS
        r = await t.register(broker_id=1, addr="127.0.0.1:20911")
        header = h.RegisterBrokerResponseHeader.from_ext_fields(r.ext_fields)
        assert (header.master_addr, header.ha_server_addr) == ("127.0.0.1:10911", "127.0.0.1:10912")
        assert r.body is not None
        assert KVTable.decode(r.body).table == {"T": "broker-a:4"}

    run(main())


def test_channel_close_and_unregister_remove_routes(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        broker_channel = FakeChannel("127.0.0.1:40000")
        await t.register(channel=broker_channel)
        t.ns._on_channel_closed(broker_channel)  # type: ignore[arg-type]
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        await t.register()
        r = await t.call(
            RequestCode.UNREGISTER_BROKER,
            h.UnRegisterBrokerRequestHeader(
                broker_name="broker-a",
                broker_addr="127.0.0.1:10911",
                cluster_name="DefaultCluster",
                broker_id=0,
            ),
        )
        assert r.code == ResponseCode.SUCCESS
        assert t.ns.route_info.broker_addr_table == {}

    run(main())


def test_heartbeat_and_data_version_keep_a_broker_alive(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path, broker_channel_expired_time_ms=1000)
        await t.register()
        t.clock.advance(900)
        r = await t.call(
            RequestCode.BROKER_HEARTBEAT,
            h.BrokerHeartbeatRequestHeader(
                cluster_name="DefaultCluster", broker_addr="127.0.0.1:10911", broker_name="broker-a"
            ),
        )
        assert r.code == ResponseCode.SUCCESS
        t.clock.advance(900)
        assert t.ns.scan_not_active_brokers() == 0
        query = h.QueryDataVersionRequestHeader(
            broker_name="broker-a",
            broker_addr="127.0.0.1:10911",
            cluster_name="DefaultCluster",
            broker_id=0,
        )
        r = await t.call(RequestCode.QUERY_DATA_VERSION, query, DataVersion(0, 5, 1).encode())
        assert h.QueryDataVersionResponseHeader.from_ext_fields(r.ext_fields).changed is False
        assert r.body is not None
        assert DataVersion.decode(r.body) == DataVersion(0, 5, 1)
        r = await t.call(RequestCode.QUERY_DATA_VERSION, query, DataVersion(0, 6, 2).encode())
        assert h.QueryDataVersionResponseHeader.from_ext_fields(r.ext_fields).changed is True
        t.clock.advance(1001)
        assert t.ns.scan_not_active_brokers() == 1
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST

    run(main())


def test_cluster_info_topic_lists_and_member_group(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        await t.register()
        r = await t.call(RequestCode.GET_BROKER_CLUSTER_INFO)
        assert r.body is not None
        info = ClusterInfo.decode(r.body)
        assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
        assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}
        r = await t.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert r.body is not None
        assert sorted(TopicList.decode(r.body).topic_list) == ["T", "TBW102"]
        r = await t.call(
            RequestCode.GET_TOPICS_BY_CLUSTER,
            h.GetTopicsByClusterRequestHeader(cluster="DefaultCluster"),
        )
        assert r.body is not None
        assert sorted(TopicList.decode(r.body).topic_list) == ["T", "TBW102"]
        r = await t.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        assert r.body is not None
        assert TopicList.decode(r.body) == TopicList(
            ["DefaultCluster", "broker-a"], "127.0.0.1:10911"
        )
        for code in (
            RequestCode.GET_UNIT_TOPIC_LIST,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
        ):
            r = await t.call(code)
            assert r.body is not None
            assert TopicList.decode(r.body).topic_list == []
        r = await t.call(
            RequestCode.GET_BROKER_MEMBER_GROUP,
            h.GetBrokerMemberGroupRequestHeader(
                cluster_name="DefaultCluster", broker_name="broker-a"
            ),
        )
        assert r.body is not None
        assert BrokerMemberGroup.decode(r.body).broker_addrs == {0: "127.0.0.1:10911"}

    run(main())


def test_disabled_topic_lists(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path, enable_all_topic_list=False, enable_topic_list=False)
        for code, ext in (
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
            (RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c"}),
            (RequestCode.GET_UNIT_TOPIC_LIST, {}),
        ):
            r = await t.call(code, ext)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "disable")

    run(main())


def test_write_perm_topic_delete_and_register(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        await t.register()
        r = await t.call(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER,
            h.WipeWritePermOfBrokerRequestHeader(broker_name="broker-a"),
        )
        assert (
            h.WipeWritePermOfBrokerResponseHeader.from_ext_fields(r.ext_fields).wipe_topic_count
            == 2
        )
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert r.body is not None
        assert TopicRouteData.decode(r.body).queue_datas[0].perm == 4
        r = await t.call(
            RequestCode.ADD_WRITE_PERM_OF_BROKER,
            h.AddWritePermOfBrokerRequestHeader(broker_name="broker-a"),
        )
        assert (
            h.AddWritePermOfBrokerResponseHeader.from_ext_fields(r.ext_fields).add_topic_count == 2
        )
        r = await t.call(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, h.DeleteTopicFromNamesrvRequestHeader(topic="T")
        )
        assert r.code == ResponseCode.SUCCESS
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        body = TopicRouteData(queue_datas=[QueueData("broker-a", 2, 2, 6)]).encode()
        r = await t.call(
            RequestCode.REGISTER_TOPIC_IN_NAMESRV, h.RegisterTopicRequestHeader(topic="N"), body
        )
        assert r.code == ResponseCode.SUCCESS
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "N"})
        assert r.code == ResponseCode.SUCCESS

    run(main())


def test_kv_config_round_trip_and_persistence(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        put = h.PutKVConfigRequestHeader(namespace="NS", key="k", value="v")
        assert (await t.call(RequestCode.PUT_KV_CONFIG, put)).code == ResponseCode.SUCCESS
        r = await t.call(
            RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="NS", key="k")
        )
        assert h.GetKVConfigResponseHeader.from_ext_fields(r.ext_fields).value == "v"
        r = await t.call(
            RequestCode.GET_KVLIST_BY_NAMESPACE, h.GetKVListByNamespaceRequestHeader(namespace="NS")
        )
        assert r.body is not None
        assert KVTable.decode(r.body).table == {"k": "v"}
        on_disk = json.loads((tmp_path / "kvConfig.json").read_bytes())
        assert on_disk == {"configTable": {"NS": {"k": "v"}}}
        r = await t.call(
            RequestCode.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace="NS", key="k")
        )
        assert r.code == ResponseCode.SUCCESS
        r = await t.call(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        r = await t.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "other"})
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        assert KVConfigManager.load(str(tmp_path / "kvConfig.json")).config_table == {"NS": {}}

    run(main())


def test_kv_config_file_handling(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    assert KVConfigManager.load(str(path)).config_table == {}
    path.write_text('{configTable:{"A":{"k":"v","n":1}}}')  # fastjson-ish, non-string value
    assert KVConfigManager.load(str(path)).config_table == {"A": {"k": "v", "n": "1"}}
    path.write_text("{broken")
    with pytest.raises(ConfigError, match="kvConfigPath"):
        KVConfigManager.load(str(path))
    path.write_text("")
    assert KVConfigManager.load(str(path)).config_table == {}


def test_namesrv_config_get_and_update(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        r = await t.call(RequestCode.GET_NAMESRV_CONFIG)
        assert r.body is not None
        props = parse_properties(r.body.decode())
        assert props["listenPort"] == "9876"
        assert props["orderMessageEnable"] == "false"
        text = format_properties(
            {"orderMessageEnable": "true", "scanNotActiveBrokerInterval": "2000"}
        )
        r = await t.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=text.encode())
        assert r.code == ResponseCode.SUCCESS
        assert t.ns.config.order_message_enable
        assert t.ns.route_info.config.scan_not_active_broker_interval_ms == 2000
        saved = parse_properties((tmp_path / "namesrv.properties").read_text())
        assert saved["scanNotActiveBrokerInterval"] == "2000"
        r = await t.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/etc/passwd")
        assert (r.code, r.remark) == (
            ResponseCode.NO_PERMISSION,
            "Can not update config in black list.",
        )
        r = await t.call(
            RequestCode.UPDATE_NAMESRV_CONFIG, body=b"scanNotActiveBrokerInterval=soon"
        )
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert "scanNotActiveBrokerInterval" in (r.remark or "")
        assert t.ns.config.scan_not_active_broker_interval_ms == 2000

    run(main())


def test_order_topic_conf_in_routes_when_enabled(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path, order_message_enable=True)
        await t.register()
        await t.call(
            RequestCode.PUT_KV_CONFIG,
            {"namespace": ORDER_TOPIC_CONFIG, "key": "T", "value": "broker-a:4"},
        )
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert r.body is not None
        assert TopicRouteData.decode(r.body).order_topic_conf == "broker-a:4"

    run(main())


def test_wait_for_service(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path, need_wait_for_service=True, wait_seconds_for_service=45)
        await t.register()
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")
        t.clock.advance(45_000)
        r = await t.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert r.code == ResponseCode.SUCCESS

    run(main())


def test_unknown_code_is_not_supported(tmp_path: Path) -> None:
    async def main() -> None:
        t = Harness(tmp_path)
        r = await t.call(RequestCode.SEND_MESSAGE)
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    run(main())
