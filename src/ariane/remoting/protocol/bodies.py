"""NameServer-side bodies and the topic configuration model (RocketMQ ``TopicConfig``,
``DataVersion``, ``TopicConfigSerializeWrapper``, ``RegisterBrokerBody``, ``ClusterInfo``,
``TopicList``, ``KVTable``, ``BrokerMemberGroup``).

Every class has ``to_json``/``from_json`` (plain JSON data in fastjson's property names) and
``encode``/``decode`` (body bytes). ``RegisterBrokerBody`` also speaks the compressed binary form
brokers send with ``compressed=true``: a zlib stream of length-prefixed parts (DataVersion JSON,
TopicConfig text lines, filter-server JSON and, from version V5_0_0, static-topic mappings).

Decoders raise only ``RemoteProtocolError``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    as_object,
    get_bool,
    get_int,
    get_list,
    get_object,
    get_opt_str,
    get_str,
    parse_object,
)
from ariane.remoting.protocol.command import MQVersion
from ariane.remoting.protocol.route import BrokerData, parse_broker_addrs

__all__ = [
    "BrokerMemberGroup",
    "ClusterInfo",
    "DataVersion",
    "KVTable",
    "RegisterBrokerBody",
    "RegisterBrokerResult",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
]

_INT = struct.Struct(">i")
#: Ceiling on an inflated compressed RegisterBrokerBody (a zlib bomb guard).
MAX_INFLATED_BYTES = 256 * 1024 * 1024


@dataclass(slots=True)
class DataVersion:
    """Version stamp of a broker's topic table; equal only if all three parts are equal.

    Attributes:
        state_version: bumped on role changes (5.x).
        timestamp: milliseconds of the last change.
        counter: bumped on every change.
    """

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> DataVersion:
        """The version after one more change."""
        return DataVersion(self.state_version, now_ms, self.counter + 1)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "counter": self.counter,
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        """Build from parsed JSON (absent parts are 0)."""
        what = "DataVersion"
        obj = as_object(obj, what)
        return cls(
            state_version=get_int(obj, "stateVersion", what),
            timestamp=get_int(obj, "timestamp", what),
            counter=get_int(obj, "counter", what),
        )

    @classmethod
    def decode(cls, body: bytes) -> DataVersion:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "DataVersion"))


@dataclass(slots=True)
class TopicConfig:
    """A topic as a broker configures it (``common/TopicConfig``).

    Attributes:
        topic_name: the topic.
        read_queue_nums: readable queue count (Java default 16).
        write_queue_nums: writable queue count (Java default 16).
        perm: ``PermName`` bits (default read|write).
        topic_filter_type: "SINGLE_TAG" or "MULTI_TAG".
        topic_sys_flag: ``TopicSysFlag`` bits.
        order: whether the topic is ordered.
        attributes: e.g. ``{"message.type": "FIFO"}``.
    """

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any, topic_name: str | None = None) -> TopicConfig:
        """Build from parsed JSON; ``topic_name`` fills in a missing ``topicName``."""
        what = "TopicConfig"
        obj = as_object(obj, what)
        attributes = {
            str(k): v if isinstance(v, str) else fastjson.dumps(v).decode()
            for k, v in get_object(obj, "attributes", what).items()
            if v is not None
        }
        return cls(
            topic_name=get_str(obj, "topicName", what, topic_name or ""),
            read_queue_nums=get_int(obj, "readQueueNums", what, 16),
            write_queue_nums=get_int(obj, "writeQueueNums", what, 16),
            perm=get_int(obj, "perm", what, PERM_READ | PERM_WRITE),
            topic_filter_type=get_str(obj, "topicFilterType", what, "SINGLE_TAG"),
            topic_sys_flag=get_int(obj, "topicSysFlag", what),
            order=get_bool(obj, "order", what),
            attributes=attributes,
        )

    def encode_text(self) -> str:
        """The space-separated form used inside compressed registrations (``encode()``)."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type} {fastjson.dumps(self.attributes).decode()}"
        )

    @classmethod
    def decode_text(cls, text: str) -> TopicConfig:
        """Parse the space-separated form; unreadable attributes are dropped, as Java does.

        Raises:
            RemoteProtocolError: fewer than five fields or non-numeric counts.
        """
        parts = text.split(" ")
        if len(parts) < 5:
            raise RemoteProtocolError(f"TopicConfig text has {len(parts)} fields: {text!r}")
        try:
            read, write, perm = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            raise RemoteProtocolError(f"TopicConfig text has a bad number: {text!r}") from None
        attributes: dict[str, str] = {}
        rest = " ".join(parts[5:])
        if rest:
            try:
                parsed = fastjson.loads(rest)
            except RemoteProtocolError:
                parsed = None
            if isinstance(parsed, dict):
                attributes = {str(k): str(v) for k, v in parsed.items() if v is not None}
        return cls(parts[0], read, write, perm, parts[4], 0, False, attributes)


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's topic table with its DataVersion (``TopicConfigAndMappingSerializeWrapper``).

    The static-topic mapping parts are carried as raw JSON.
    """

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    topic_queue_mapping_info_map: dict[str, Any] = field(default_factory=dict)
    topic_queue_mapping_detail_map: dict[str, Any] = field(default_factory=dict)
    mapping_data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "dataVersion": self.data_version.to_json(),
            "mappingDataVersion": self.mapping_data_version.to_json(),
            "topicConfigTable": {k: v.to_json() for k, v in self.topic_config_table.items()},
            "topicQueueMappingDetailMap": self.topic_queue_mapping_detail_map,
            "topicQueueMappingInfoMap": self.topic_queue_mapping_info_map,
        }

    @classmethod
    def from_json(cls, obj: Any) -> TopicConfigSerializeWrapper:
        """Build from parsed JSON."""
        what = "TopicConfigSerializeWrapper"
        obj = as_object(obj, what)
        table = {
            str(name): TopicConfig.from_json(tc, str(name))
            for name, tc in get_object(obj, "topicConfigTable", what).items()
            if tc is not None
        }
        return cls(
            topic_config_table=table,
            data_version=DataVersion.from_json(obj.get("dataVersion") or {}),
            topic_queue_mapping_info_map=get_object(obj, "topicQueueMappingInfoMap", what),
            topic_queue_mapping_detail_map=get_object(obj, "topicQueueMappingDetailMap", what),
            mapping_data_version=DataVersion.from_json(obj.get("mappingDataVersion") or {}),
        )


@dataclass(slots=True)
class RegisterBrokerBody:
    """The body of REGISTER_BROKER.

    Attributes:
        topic_config_serialize_wrapper: the broker's topics and their DataVersion.
        filter_server_list: filter server addresses (legacy).
    """

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json(),
        }

    def encode(self, compress: bool = False) -> bytes:
        """Body bytes: JSON, or the zlib-compressed binary form when ``compress``."""
        if not compress:
            return fastjson.dumps(self.to_json())
        wrapper = self.topic_config_serialize_wrapper
        parts: list[bytes] = []

        def put(blob: bytes) -> None:
            parts.append(_INT.pack(len(blob)))
            parts.append(blob)

        put(wrapper.data_version.encode())
        parts.append(_INT.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            put(tc.encode_text().encode("utf-8"))
        put(fastjson.dumps(list(self.filter_server_list)))
        parts.append(_INT.pack(len(wrapper.topic_queue_mapping_info_map)))
        for info in wrapper.topic_queue_mapping_info_map.values():
            put(fastjson.dumps(info))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def from_json(cls, obj: Any) -> RegisterBrokerBody:
        """Build from parsed JSON."""
        what = "RegisterBrokerBody"
        obj = as_object(obj, what)
        servers = get_list(obj, "filterServerList", what)
        return cls(
            topic_config_serialize_wrapper=TopicConfigSerializeWrapper.from_json(
                obj.get("topicConfigSerializeWrapper") or {}
            ),
            filter_server_list=[str(s) for s in servers if s is not None],
        )

    @classmethod
    def decode(cls, body: bytes, compressed: bool, version: int) -> RegisterBrokerBody:
        """Parse a REGISTER_BROKER body.

        Args:
            body: the request body.
            compressed: the header's ``compressed`` flag.
            version: the request's version (mapping section present from V5_0_0).

        Raises:
            RemoteProtocolError: the body does not decode.
        """
        if not compressed:
            return cls.from_json(parse_object(body, "RegisterBrokerBody"))
        reader = _Inflated(body)
        wrapper = TopicConfigSerializeWrapper()
        wrapper.data_version = DataVersion.decode(reader.blob())
        for _ in range(reader.count()):
            tc = TopicConfig.decode_text(reader.blob().decode("utf-8", "replace"))
            wrapper.topic_config_table[tc.topic_name] = tc
        servers: list[str] = []
        try:
            parsed = fastjson.loads(reader.blob())
            if isinstance(parsed, list):
                servers = [str(s) for s in parsed if s is not None]
        except RemoteProtocolError:
            pass  # Java logs and carries on with an empty list
        if version >= MQVersion.V5_0_0:
            for _ in range(reader.count()):
                info = as_object(fastjson.loads(reader.blob()), "TopicQueueMappingInfo")
                wrapper.topic_queue_mapping_info_map[str(info.get("topic"))] = info
        return cls(wrapper, servers)


class _Inflated:
    """Sequential reader over an inflated compressed registration body."""

    __slots__ = ("data", "pos")

    def __init__(self, body: bytes) -> None:
        inflater = zlib.decompressobj()
        try:
            self.data = inflater.decompress(body, MAX_INFLATED_BYTES)
        except zlib.error as exc:
            raise RemoteProtocolError(f"RegisterBrokerBody: bad zlib stream: {exc}") from None
        if inflater.unconsumed_tail:
            raise RemoteProtocolError("RegisterBrokerBody: inflated body too large")
        self.pos = 0

    def count(self) -> int:
        if self.pos + 4 > len(self.data):
            raise RemoteProtocolError("RegisterBrokerBody: truncated compressed body")
        (value,) = _INT.unpack_from(self.data, self.pos)
        self.pos += 4
        if value < 0:
            raise RemoteProtocolError("RegisterBrokerBody: negative length")
        return int(value)

    def blob(self) -> bytes:
        size = self.count()
        if self.pos + size > len(self.data):
            raise RemoteProtocolError("RegisterBrokerBody: truncated compressed body")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk


@dataclass(slots=True)
class RegisterBrokerResult:
    """What a NameServer tells a registering broker (``RegisterBrokerResult``)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None
    kv_table: dict[str, str] | None = None


@dataclass(slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO body: every broker group and the groups of every cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "brokerAddrTable": {k: v.to_json() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()},
        }

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> ClusterInfo:
        """Build from parsed JSON."""
        what = "ClusterInfo"
        obj = as_object(obj, what)
        brokers = {
            str(name): BrokerData.from_json(bd)
            for name, bd in get_object(obj, "brokerAddrTable", what).items()
            if bd is not None
        }
        clusters: dict[str, set[str]] = {}
        for name, members in get_object(obj, "clusterAddrTable", what).items():
            if not isinstance(members, list):
                raise RemoteProtocolError(f"{what}.clusterAddrTable: expected arrays")
            clusters[str(name)] = {str(m) for m in members}
        return cls(brokers, clusters)

    @classmethod
    def decode(cls, body: bytes) -> ClusterInfo:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "ClusterInfo"))


@dataclass(slots=True)
class TopicList:
    """A set of topic names (``TopicList``); ``broker_addr`` is set by some queries."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (names de-duplicated, order kept)."""
        out: dict[str, Any] = {"topicList": list(dict.fromkeys(self.topic_list))}
        if self.broker_addr is not None:
            out["brokerAddr"] = self.broker_addr
        return out

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> TopicList:
        """Build from parsed JSON."""
        what = "TopicList"
        obj = as_object(obj, what)
        topics = [str(t) for t in get_list(obj, "topicList", what) if t is not None]
        return cls(topics, get_opt_str(obj, "brokerAddr", what))

    @classmethod
    def decode(cls, body: bytes) -> TopicList:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "TopicList"))


@dataclass(slots=True)
class KVTable:
    """A flat string table (``KVTable``), e.g. one KV-config namespace."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {"table": dict(self.table)}

    def encode(self) -> bytes:
        """Body bytes."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> KVTable:
        """Build from parsed JSON (non-string values become their JSON text)."""
        what = "KVTable"
        obj = as_object(obj, what)
        table = {
            str(k): v if isinstance(v, str) else fastjson.dumps(v).decode()
            for k, v in get_object(obj, "table", what).items()
            if v is not None
        }
        return cls(table)

    @classmethod
    def decode(cls, body: bytes) -> KVTable:
        """Parse body bytes."""
        return cls.from_json(parse_object(body, "KVTable"))


@dataclass(slots=True)
class BrokerMemberGroup:
    """GET_BROKER_MEMBER_GROUP result: the addresses of one broker group.

    ``encode``/``decode`` use the response body form ``{"brokerMemberGroup": {...}}``
    (``GetBrokerMemberGroupResponseBody``).
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map of the group itself."""
        return {
            "brokerAddrs": dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    def encode(self) -> bytes:
        """``GetBrokerMemberGroupResponseBody`` bytes."""
        return fastjson.dumps({"brokerMemberGroup": self.to_json()})

    @classmethod
    def from_json(cls, obj: Any) -> BrokerMemberGroup:
        """Build from the group's parsed JSON."""
        what = "BrokerMemberGroup"
        obj = as_object(obj, what)
        return cls(
            cluster=get_str(obj, "cluster", what),
            broker_name=get_str(obj, "brokerName", what),
            broker_addrs=parse_broker_addrs(obj.get("brokerAddrs") or {}, what),
        )

    @classmethod
    def decode(cls, body: bytes) -> BrokerMemberGroup:
        """Parse ``GetBrokerMemberGroupResponseBody`` bytes."""
        outer = parse_object(body, "GetBrokerMemberGroupResponseBody")
        return cls.from_json(outer.get("brokerMemberGroup") or {})
