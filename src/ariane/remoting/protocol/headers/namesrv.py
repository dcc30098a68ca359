"""Custom headers of the NameServer requests (``protocol/header/namesrv/*``)."""

from __future__ import annotations

from typing import Annotated

from ariane.remoting.protocol.headers._base import I32, I64, CommandHeader, Key, header

__all__ = [
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "BrokerHeartbeatRequestHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetBrokerMemberGroupRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "RegisterTopicRequestHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]


@header()
class RegisterBrokerRequestHeader(CommandHeader):
    """REGISTER_BROKER (103). ``zone_name`` travels as the extra key ``__ZONE_NAME``."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: I64
    heartbeat_timeout_millis: I64 | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: I32 = 0
    zone_name: Annotated[str | None, Key("__ZONE_NAME")] = None


@header()
class RegisterBrokerResponseHeader(CommandHeader):
    """Answer to REGISTER_BROKER: the master's HA address for a slave."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@header()
class UnRegisterBrokerRequestHeader(CommandHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: I64


@header()
class BrokerHeartbeatRequestHeader(CommandHeader):
    """BROKER_HEARTBEAT (904): refreshes liveness only."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: I64 | None = None
    epoch: I32 | None = None
    max_offset: I64 | None = None
    confirm_offset: I64 | None = None
    heartbeat_timeout_mills: I64 | None = None
    election_priority: I32 | None = None


@header()
class QueryDataVersionRequestHeader(CommandHeader):
    """QUERY_DATA_VERSION (322); the body is the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: I64


@header()
class QueryDataVersionResponseHeader(CommandHeader):
    """Answer to QUERY_DATA_VERSION."""

    changed: bool


@header()
class GetRouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    accept_standard_json_only: bool | None = None


@header()
class PutKVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@header()
class GetKVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@header()
class GetKVConfigResponseHeader(CommandHeader):
    """Answer to GET_KV_CONFIG."""

    value: str | None = None


@header()
class DeleteKVConfigRequestHeader(CommandHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@header()
class GetKVListByNamespaceRequestHeader(CommandHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str


@header()
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_NAMESRV (216); with a cluster name, only that cluster's brokers."""

    topic: str
    cluster_name: str | None = None


@header()
class RegisterTopicRequestHeader(CommandHeader):
    """REGISTER_TOPIC_IN_NAMESRV (217); the body is a TopicRouteData."""

    topic: str


@header()
class GetTopicsByClusterRequestHeader(CommandHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


@header()
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str


@header()
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    """Answer to WIPE_WRITE_PERM_OF_BROKER."""

    wipe_topic_count: I32


@header()
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@header()
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    """Answer to ADD_WRITE_PERM_OF_BROKER."""

    add_topic_count: I32


@header()
class GetBrokerMemberGroupRequestHeader(CommandHeader):
    """GET_BROKER_MEMBER_GROUP (901)."""

    cluster_name: str
    broker_name: str
