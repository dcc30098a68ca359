"""NameServer request processors (RocketMQ ``DefaultRequestProcessor`` and
``ClientRequestProcessor``).

Each handler parses its typed header (a missing field is answered SYSTEM_ERROR by the server),
calls the route tables or the KV config, and returns the response. Everything answers inline
except the KV writes, which wait for the file to be persisted before answering.

Routes are written as standard JSON (quoted broker ids), which every client parses — C++ 1.2.4
reads keys with jsoncpp's ``allowNumericKeys`` and ``atoi``; Java and Go read both forms.
"""

from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING

from ariane.common.javaprops import format_properties, parse_properties
from ariane.errors import ConfigError, RemoteProtocolError
from ariane.namesrv.kvconfig import ORDER_TOPIC_CONFIG
from ariane.namesrv.route_info import UnregisterRequest
from ariane.remoting.dispatch import ProcessFunction, RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicList,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import MQVersion, RemotingCommand
from ariane.remoting.protocol.route import TopicRouteData
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.namesrv.context import NamesrvContext

__all__ = ["NamesrvProcessor"]

logger = logging.getLogger(__name__)

_ok = ResponseCode.SUCCESS


def _response(
    code: int = _ok,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    return RemotingCommand.response(code, remark, ext_fields, body)


class NamesrvProcessor:
    """Handlers for every NameServer request code.

    Args:
        namesrv: the server whose tables, KV config and config the handlers use.
    """

    def __init__(self, namesrv: NamesrvContext) -> None:
        self.namesrv = namesrv

    def register(self, server: RemotingServer) -> None:
        """Register every handler on ``server``."""
        table: dict[int, ProcessFunction] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }
        for code, handler in table.items():
            server.register_processor(code, handler)

    # -- KV config ------------------------------------------------------------------------------

    async def put_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """PUT_KV_CONFIG: set a value and persist before answering."""
        header = h.PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        kv = self.namesrv.kv_config
        limit = self.namesrv.config.kv_config_max_entries
        if not kv.has(header.namespace, header.key) and kv.count() >= limit:
            logger.warning(
                "kv put %s/%s from %s refused: %d entries (kvConfigMaxEntries)",
                header.namespace, header.key, ctx.remote_addr, limit,
            )  # fmt: skip
            return _response(
                ResponseCode.SYSTEM_ERROR,
                f"the KV config holds {limit} entries (kvConfigMaxEntries): delete some first",
            )
        kv.put(header.namespace, header.key, header.value)
        logger.info(
            "kv put %s/%s=%s from %s", header.namespace, header.key, header.value, ctx.remote_addr
        )
        await self.namesrv.persist_kv_config()
        return _response()

    def get_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG: QUERY_NOT_FOUND when absent."""
        header = h.GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.namesrv.kv_config.get(header.namespace, header.key)
        if value is None:
            return _response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return _response(ext_fields=h.GetKVConfigResponseHeader(value=value).to_ext_fields())

    async def delete_kv_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_KV_CONFIG: remove a key and persist before answering."""
        header = h.DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.namesrv.kv_config.delete(header.namespace, header.key)
        logger.info("kv delete %s/%s from %s", header.namespace, header.key, ctx.remote_addr)
        await self.namesrv.persist_kv_config()
        return _response()

    def get_kv_list_by_namespace(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE: a KVTable body, QUERY_NOT_FOUND for an unknown namespace."""
        header = h.GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        table = self.namesrv.kv_config.namespace(header.namespace)
        if table is None:
            return _response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return _response(body=KVTable(table).encode())

    # -- brokers --------------------------------------------------------------------------------

    def register_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """REGISTER_BROKER: the broker's heartbeat carrying its topic table."""
        header = h.RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body
        if header.body_crc32 != 0 and (zlib.crc32(body or b"") & 0x7FFFFFFF) != header.body_crc32:
            logger.warning("register from %s: body crc32 mismatch", ctx.remote_addr)
            return _response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper: TopicConfigSerializeWrapper
        filter_servers: list[str] | None = None
        if request.version >= MQVersion.V3_0_11:
            if body:
                try:
                    decoded = RegisterBrokerBody.decode(body, header.compressed, request.version)
                except RemoteProtocolError as exc:
                    return _response(
                        ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}"
                    )
                wrapper, filter_servers = (
                    decoded.topic_config_serialize_wrapper,
                    decoded.filter_server_list,
                )
            else:
                wrapper, filter_servers = TopicConfigSerializeWrapper(), []
        else:
            wrapper = (
                TopicConfigSerializeWrapper.from_json(fastjson.loads(body))
                if body
                else TopicConfigSerializeWrapper()
            )
        result = self.namesrv.route_info.register_broker(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            zone_name=header.zone_name,
            timeout_ms=header.heartbeat_timeout_millis,
            enable_acting_master=header.enable_acting_master,
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers,
            channel=ctx.channel,
        )
        if result is None:
            return _response(ResponseCode.SYSTEM_ERROR, "register broker failed")
        ext = h.RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_ext_fields()
        body_out = None
        if self.namesrv.config.return_order_topic_config_to_broker:
            order = self.namesrv.kv_config.namespace(ORDER_TOPIC_CONFIG)
            if order is not None:
                body_out = KVTable(order).encode()
        return _response(ext_fields=ext, body=body_out)

    def unregister_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_BROKER: a broker shutting down."""
        header = h.UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self.namesrv.route_info.unregister_broker(
            [
                UnregisterRequest(
                    header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
                )
            ]
        )
        return _response()

    def broker_heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """BROKER_HEARTBEAT: refresh liveness only."""
        header = h.BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
        self.namesrv.route_info.update_broker_info_update_timestamp(
            header.cluster_name, header.broker_addr
        )
        return _response()

    def query_data_version(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """QUERY_DATA_VERSION: whether the broker's topic table changed since registration."""
        header = h.QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        version = DataVersion.decode(request.body) if request.body else DataVersion()
        route_info = self.namesrv.route_info
        changed = route_info.is_broker_topic_config_changed(
            header.cluster_name, header.broker_addr, version
        )
        route_info.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        stored = route_info.query_broker_topic_config(header.cluster_name, header.broker_addr)
        return _response(
            ext_fields=h.QueryDataVersionResponseHeader(changed=changed).to_ext_fields(),
            body=stored.encode() if stored is not None else None,
        )

    def get_broker_member_group(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_MEMBER_GROUP."""
        header = h.GetBrokerMemberGroupRequestHeader.from_ext_fields(request.ext_fields)
        group = self.namesrv.route_info.get_broker_member_group(
            header.cluster_name, header.broker_name
        )
        return _response(body=group.encode())

    def get_broker_cluster_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO."""
        return _response(body=self.namesrv.route_info.get_all_cluster_info().encode())

    def wipe_write_perm_of_broker(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER: make a broker read-only in every route."""
        header = h.WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.namesrv.route_info.wipe_write_perm_of_broker(header.broker_name)
        logger.info(
            "wiped write perm of broker %s on %d topics, by %s",
            header.broker_name,
            count,
            ctx.remote_addr,
        )
        return _response(
            ext_fields=h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext_fields()
        )

    def add_write_perm_of_broker(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER: make a broker writable again in every route."""
        header = h.AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.namesrv.route_info.add_write_perm_of_broker(header.broker_name)
        logger.info(
            "added write perm of broker %s on %d topics, by %s",
            header.broker_name,
            count,
            ctx.remote_addr,
        )
        return _response(
            ext_fields=h.AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext_fields()
        )

    # -- topics ---------------------------------------------------------------------------------

    def get_route_info_by_topic(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC: the route, or TOPIC_NOT_EXIST."""
        header = h.GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        namesrv = self.namesrv
        if namesrv.config.need_wait_for_service and not namesrv.ready_for_service():
            return _response(ResponseCode.SYSTEM_ERROR, "name server not ready")
        route = namesrv.route_info.pickup_topic_route_data(header.topic)
        if route is None:
            return _response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}",
            )
        if namesrv.config.order_message_enable:
            route.order_topic_conf = namesrv.kv_config.get(ORDER_TOPIC_CONFIG, header.topic)
        return _response(body=route.encode())

    def get_all_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        if not self.namesrv.config.enable_all_topic_list:
            return _response(ResponseCode.SYSTEM_ERROR, "disable")
        return _response(body=self.namesrv.route_info.get_all_topic_list().encode())

    def delete_topic_in_namesrv(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (optionally limited to one cluster)."""
        header = h.DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        self.namesrv.route_info.delete_topic(header.topic, header.cluster_name)
        logger.info(
            "deleted topic %s (cluster %s) by %s",
            header.topic,
            header.cluster_name,
            ctx.remote_addr,
        )
        return _response()

    def register_topic_in_namesrv(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """REGISTER_TOPIC_IN_NAMESRV: add the body's queue data to a topic."""
        header = h.RegisterTopicRequestHeader.from_ext_fields(request.ext_fields)
        if request.body:
            route = TopicRouteData.decode(request.body)
            if route.queue_datas:
                self.namesrv.route_info.register_topic(header.topic, route.queue_datas)
        return _response()

    def _topic_list(self, listing: TopicList) -> RemotingCommand:
        if not self.namesrv.config.enable_topic_list:
            return _response(ResponseCode.SYSTEM_ERROR, "disable")
        return _response(body=listing.encode())

    def get_topics_by_cluster(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_TOPICS_BY_CLUSTER."""
        header = h.GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return self._topic_list(self.namesrv.route_info.get_topics_by_cluster(header.cluster))

    def get_system_topic_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names."""
        return _response(body=self.namesrv.route_info.get_system_topic_list().encode())

    def get_unit_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_UNIT_TOPIC_LIST."""
        return self._topic_list(self.namesrv.route_info.get_unit_topics())

    def get_has_unit_sub_topic_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_HAS_UNIT_SUB_TOPIC_LIST."""
        return self._topic_list(self.namesrv.route_info.get_has_unit_sub_topic_list())

    def get_has_unit_sub_ununit_topic_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST."""
        return self._topic_list(self.namesrv.route_info.get_has_unit_sub_ununit_topic_list())

    # -- config ---------------------------------------------------------------------------------

    async def update_namesrv_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: Properties text; black-listed keys give NO_PERMISSION."""
        if not request.body:
            return _response()
        props = parse_properties(request.body.decode("utf-8", "replace"))
        blocked = sorted(props.keys() & self.namesrv.config.black_listed())
        if blocked:
            return _response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            await self.namesrv.update_config(props)
        except ConfigError as exc:
            return _response(ResponseCode.SYSTEM_ERROR, f"bad config value: {exc}")
        logger.info("config updated by %s: %s", ctx.remote_addr, props)
        return _response()

    def get_namesrv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG: Properties text."""
        text = format_properties(self.namesrv.config.to_properties())
        return _response(body=text.encode("utf-8"))
