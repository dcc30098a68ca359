"""Route data served by the NameServer (RocketMQ ``route/TopicRouteData``, ``QueueData``,
``BrokerData``).

Each class converts to the plain JSON structure fastjson produces (``to_json``) and back
(``from_json``); ``encode``/``decode`` go straight to body bytes. ``brokerAddrs`` is a
``Map<Long, String>``: ``to_json`` keeps ``int`` keys, which ``fastjson.dumps`` writes quoted
(``{"0":"host:port"}``) — the form every client parses — and ``from_json`` accepts both the
quoted and fastjson's bare-number keys.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ariane.common.roles import MASTER_ID
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

__all__ = ["MASTER_ID", "BrokerData", "QueueData", "TopicRouteData", "parse_broker_addrs"]


@dataclass(slots=True)
class QueueData:
    """One broker's queues of a topic.

    Attributes:
        broker_name: the broker group hosting the queues.
        read_queue_nums: readable queue count.
        write_queue_nums: writable queue count.
        perm: ``PermName`` bits.
        topic_sys_flag: ``TopicSysFlag`` bits (unit flags).
    """

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @property
    def readable(self) -> bool:
        """Whether PERM_READ is set."""
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        """Whether PERM_WRITE is set."""
        return bool(self.perm & PERM_WRITE)

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any) -> QueueData:
        """Build from parsed JSON; accepts the 4.x spelling ``topicSynFlag`` too.

        Raises:
            RemoteProtocolError: a property has an unusable value.
        """
        what = "QueueData"
        obj = as_object(obj, what)
        sys_flag_key = "topicSysFlag" if "topicSysFlag" in obj else "topicSynFlag"
        return cls(
            broker_name=get_str(obj, "brokerName", what),
            read_queue_nums=get_int(obj, "readQueueNums", what),
            write_queue_nums=get_int(obj, "writeQueueNums", what),
            perm=get_int(obj, "perm", what),
            topic_sys_flag=get_int(obj, sys_flag_key, what),
        )


def parse_broker_addrs(value: Any, what: str) -> dict[int, str]:
    """A ``Map<Long, String>`` of broker id -> address, from quoted or bare numeric keys."""
    addrs: dict[int, str] = {}
    for key, addr in as_object(value, what).items():
        try:
            broker_id = int(key)
        except (TypeError, ValueError):
            raise RemoteProtocolError(f"{what}: broker id {key!r} is not a number") from None
        if not isinstance(addr, str):
            raise RemoteProtocolError(f"{what}: address of broker {broker_id} is not a string")
        addrs[broker_id] = addr
    return addrs


@dataclass(slots=True)
class BrokerData:
    """A broker group: the master (id 0) and slaves of one broker name.

    Attributes:
        cluster: the cluster name.
        broker_name: the broker (group) name.
        broker_addrs: broker id -> "host:port".
        enable_acting_master: whether a slave may act as master (5.x).
        zone_name: the zone, if the broker reported one.
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    def copy(self) -> BrokerData:
        """A copy with its own address map."""
        return BrokerData(
            self.cluster,
            self.broker_name,
            dict(self.broker_addrs),
            self.enable_acting_master,
            self.zone_name,
        )

    @property
    def master_addr(self) -> str | None:
        """The master's address, if a master is registered."""
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self, rng: random.Random | None = None) -> str | None:
        """The master's address, else a random slave's (``BrokerData.selectBrokerAddr``)."""
        master = self.broker_addrs.get(MASTER_ID)
        if master is not None or not self.broker_addrs:
            return master
        return (rng or random).choice(list(self.broker_addrs.values()))

    def to_json(self) -> dict[str, Any]:
        """fastjson property map (``int`` keys in ``brokerAddrs``)."""
        out: dict[str, Any] = {
            "brokerAddrs": dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            out["zoneName"] = self.zone_name
        return out

    @classmethod
    def from_json(cls, obj: Any) -> BrokerData:
        """Build from parsed JSON.

        Raises:
            RemoteProtocolError: a property has an unusable value.
        """
        what = "BrokerData"
        obj = as_object(obj, what)
        return cls(
            cluster=get_str(obj, "cluster", what),
            broker_name=get_str(obj, "brokerName", what),
            broker_addrs=parse_broker_addrs(obj.get("brokerAddrs") or {}, f"{what}.brokerAddrs"),
            enable_acting_master=get_bool(obj, "enableActingMaster", what),
            zone_name=get_opt_str(obj, "zoneName", what),
        )


@dataclass(slots=True)
class TopicRouteData:
    """The route of one topic, as GET_ROUTEINFO_BY_TOPIC returns it.

    Attributes:
        queue_datas: one entry per broker group hosting the topic.
        broker_datas: the broker groups named by ``queue_datas``.
        filter_server_table: broker address -> filter server addresses (legacy, usually empty).
        order_topic_conf: "brokerName:queueNum;..." for ordered topics, from the KV config.
        topic_queue_mapping_by_broker: static-topic mapping, kept as raw JSON.
    """

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """fastjson property map."""
        out: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
            "queueDatas": [q.to_json() for q in self.queue_datas],
        }
        if self.order_topic_conf is not None:
            out["orderTopicConf"] = self.order_topic_conf
        if self.topic_queue_mapping_by_broker is not None:
            out["topicQueueMappingByBroker"] = self.topic_queue_mapping_by_broker
        return out

    def encode(self) -> bytes:
        """The response body (standard JSON, quoted numeric keys)."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> TopicRouteData:
        """Build from parsed JSON.

        Raises:
            RemoteProtocolError: a property has an unusable value.
        """
        what = "TopicRouteData"
        obj = as_object(obj, what)
        filters: dict[str, list[str]] = {}
        for addr, servers in get_object(obj, "filterServerTable", what).items():
            if servers is None:
                continue
            if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
                raise RemoteProtocolError(f"{what}.filterServerTable: expected string lists")
            filters[str(addr)] = list(servers)
        mapping = obj.get("topicQueueMappingByBroker")
        return cls(
            queue_datas=[QueueData.from_json(q) for q in get_list(obj, "queueDatas", what)],
            broker_datas=[BrokerData.from_json(b) for b in get_list(obj, "brokerDatas", what)],
            filter_server_table=filters,
            order_topic_conf=get_opt_str(obj, "orderTopicConf", what),
            topic_queue_mapping_by_broker=as_object(mapping, what) if mapping else None,
        )

    @classmethod
    def decode(cls, body: bytes | None) -> TopicRouteData:
        """Parse a TopicRouteData body.

        Raises:
            RemoteProtocolError: the body is missing or malformed.
        """
        if not body:
            raise RemoteProtocolError("TopicRouteData: empty body")
        return cls.from_json(parse_object(body, "TopicRouteData"))
