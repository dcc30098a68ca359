"""Administration of a RocketMQ-compatible cluster (RocketMQ ``DefaultMQAdminExt`` /
``MQAdminImpl``), for tools, the CLI, dashboards and Spark.

How it works: ``Admin`` shares the process's ``ClientInstance`` (connections) but keeps no
route cache of its own: each call asks the NameServer for what it needs (the topic's route or
the cluster's brokers) and then sends the per-broker requests of ``ClientAPI`` concurrently,
merging the answers (topic statistics, consumer offsets, query results) as RocketMQ's admin
does. Writes (topics, groups) go to every master of a cluster unless a broker is named.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ariane.acl.credentials import SessionCredentials
from ariane.acl.plain import AclConfig, PlainAccessConfig
from ariane.client._acl_api import AclVersionInfo
from ariane.client._admin_bulk import (
    TOOLS_CONSUMER_GROUP,
    AdminBulk,
    BrokerAnswers,
    tools_pull_header,
)
from ariane.client._api import ClientAPI
from ariane.client._instance import ClientInstance
from ariane.client._trace_dispatch import trace_topic_name
from ariane.client.config import DEFAULT_INSTANCE_NAME, ClientConfig
from ariane.client.errors import (
    ClientStateError,
    ConsumerNotOnlineError,
    QueryNotFoundError,
    TopicNotExistError,
)
from ariane.client.message import MessageExt, MessageQueue, PullStatus
from ariane.client.trace import MessageTrace, build_message_trace
from ariane.common import properties as props
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.errors import ArianeError, BrokerResponseError, InvalidArgumentError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumeStats,
    ProducerConnection,
    SubscriptionGroupConfig,
    TopicStatsTable,
)
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.route import MASTER_ID, TopicRouteData

__all__ = ["TOOLS_CONSUMER_GROUP", "Admin", "BrokerAnswers"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Admin(AdminBulk):
    """Cluster administration (asyncio); ``async with Admin(namesrv_addr=...) as admin:``.

    Args:
        namesrv_addr: NameServer addresses, ``"host:port;host:port"``.
        instance_name: client instance name (``"DEFAULT"`` = process id).
        timeout_ms: timeout of each request.
        client_config: full client settings (overrides the two above).
        credentials: ACL account that signs every request (``SessionCredentials``).
    """

    def __init__(
        self,
        *,
        namesrv_addr: str | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        timeout_ms: int = 5000,
        client_config: ClientConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        if client_config is None:
            if namesrv_addr is None:
                raise InvalidArgumentError("namesrv_addr is required")
            client_config = ClientConfig(
                namesrv_addr=namesrv_addr,
                instance_name=instance_name,
                api_timeout_ms=timeout_ms,
                credentials=credentials,
            )
        self.client_config = client_config
        self.timeout_ms = timeout_ms
        self._instance: ClientInstance | None = None
        self._closed = False

    async def start(self) -> None:
        """Join the client instance (idempotent)."""
        if self._closed:
            raise ClientStateError("the admin is closed")
        if self._instance is None:
            self._instance = ClientInstance.acquire(self.client_config)

    async def close(self) -> None:
        """Leave the client instance."""
        if not self._closed:
            self._closed = True
            instance, self._instance = self._instance, None
            if instance is not None:
                await instance.release()

    async def shutdown(self) -> None:
        """``close`` under Java's name (``DefaultMQAdminExt.shutdown()``)."""
        await self.close()

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api(self) -> ClientAPI:
        """The request layer (``ClientAPI``).

        Raises:
            ClientStateError: not started, or closed.
        """
        if self._instance is None:
            raise ClientStateError("the admin is not started")
        return self._instance.api

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _route_masters(route: TopicRouteData) -> dict[str, str]:
        return {
            bd.broker_name: bd.broker_addrs[MASTER_ID]
            for bd in route.broker_datas
            if MASTER_ID in bd.broker_addrs
        }

    async def _broker_addr_of(self, mq: MessageQueue) -> str:
        route = await self.topic_route(mq.topic)
        addr = self._route_masters(route).get(mq.broker_name)
        if addr is None:
            raise InvalidArgumentError(f"broker {mq.broker_name!r} does not host {mq.topic!r}")
        return addr

    # -- cluster --------------------------------------------------------------------------------

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """A broker's runtime statistics (``brokerStatus``)."""
        table: dict[str, str] = await self.api.get_broker_runtime_info(broker_addr, self.timeout_ms)
        return table

    async def broker_ha_status(self, broker_addr: str) -> dict[str, Any]:
        """A broker's replication status, ``HARuntimeInfo`` (``haStatus``): for a master its
        end offset and each slave's acknowledged offset and gap; for a slave its master and
        state."""
        status: dict[str, Any] = await self.api.get_broker_ha_status(broker_addr, self.timeout_ms)
        return status

    async def transfer_leadership(self, broker_addr: str, transferee_id: str) -> str:
        """Ask the DLedger leader at ``broker_addr`` to hand leadership to node
        ``transferee_id`` (``n1``...); returns once the transfer started (the broker's remark).

        Raises:
            BrokerResponseError: the broker is not a DLedger leader, the node is unknown or too
                far behind, or a transfer is under way (the remark says which).
        """
        return await self.api.transfer_leadership(broker_addr, transferee_id, self.timeout_ms)

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """A broker's settings."""
        config: dict[str, str] = await self.api.get_broker_config(broker_addr, self.timeout_ms)
        return config

    async def update_broker_config(
        self, broker_addr: str, properties: Mapping[str, str]
    ) -> list[str]:
        """Change a broker's settings at run time (``updateBrokerConfig``).

        Returns:
            The keys saved that apply only after the broker restarts (store tunables).

        Raises:
            NoPermissionError: a key may not change over the wire (store geometry, paths,
                identity, network, security: ``broker.conf`` only).
            InvalidParameterError: a value is out of its range.
        """
        return await self.api.update_broker_config(broker_addr, dict(properties), self.timeout_ms)

    # -- ACL (plain_acl.yml; issue 11) -------------------------------------------------------

    async def acl_version(self, broker_addr: str) -> AclVersionInfo:
        """A broker's ACL file versions (``clusterAclConfigVersion``)."""
        return await self.api.get_acl_version(broker_addr, self.timeout_ms)

    async def acl_config(self, broker_addr: str) -> AclConfig:
        """A broker's accounts, secrets included, and global white rules (``getAclConfig``;
        admin accounts only when ACL is on)."""
        return await self.api.get_acl_config(broker_addr, self.timeout_ms)

    async def update_acl_account(self, broker_addr: str, config: PlainAccessConfig) -> None:
        """Create or update an account in a broker's ACL files (``updateAclConfig``)."""
        await self.api.update_acl_config(broker_addr, config, self.timeout_ms)

    async def delete_acl_account(self, broker_addr: str, access_key: str) -> None:
        """Delete an account from a broker's ACL files (``deleteAclConfig``)."""
        await self.api.delete_acl_config(broker_addr, access_key, self.timeout_ms)

    async def update_global_white_addrs(
        self, broker_addr: str, addrs: Sequence[str], acl_file_full_path: str | None = None
    ) -> None:
        """Replace the global white rules of a broker's ACL file (``updateGlobalWhiteAddr``;
        default file ``plain_acl.yml``)."""
        await self.api.update_global_white_addrs(
            broker_addr, list(addrs), acl_file_full_path, self.timeout_ms
        )

    # -- topics ---------------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        attributes: Mapping[str, str] | None = None,
        topic_sys_flag: int = 0,
    ) -> list[str]:
        """Create or update a topic on one broker or every master of a cluster.

        Args:
            topic: the topic name.
            cluster: every master of this cluster (default: of every cluster).
            broker_addr: only this broker (wins over ``cluster``).
            read_queue_nums: readable queues per broker.
            write_queue_nums: writable queues per broker.
            perm: ``PermName`` bits (6 = read and write).
            order: mark the topic ordered.
            attributes: topic attributes (``{"message.type": "FIFO"}``).
            topic_sys_flag: ``TopicSysFlag`` bits (unit topic, unit subscription).

        Returns:
            The broker addresses written to.

        Raises:
            InvalidArgumentError: unknown cluster, or no broker to write to.
            BrokerResponseError: a broker refused (bad name, system topic...).
        """
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
            attributes=dict(attributes or {}),
            topic_sys_flag=topic_sys_flag,
        )
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        if not addrs:
            raise InvalidArgumentError("no broker to create the topic on")
        await self._each(addrs, lambda a: self.api.create_topic(a, config, self.timeout_ms))
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete a topic from the masters of a cluster (all by default) and every
        NameServer."""
        addrs = await self._masters(cluster)
        await self._each(
            addrs, lambda a: self.api.delete_topic_in_broker(a, topic, self.timeout_ms)
        )
        header = h.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster)

        async def on_namesrv(addr: str) -> None:
            request = RemotingCommand.request(
                RequestCode.DELETE_TOPIC_IN_NAMESRV, header.to_ext_fields()
            )
            await self.api.invoke(addr, request, self.timeout_ms)

        await self._each(self.client_config.namesrv_addrs, on_namesrv)

    async def topic_list(self) -> list[str]:
        """Every topic the NameServer knows."""
        topics: list[str] = await self.api.get_all_topic_list(self.timeout_ms)
        return topics

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route.

        Raises:
            TopicNotExistError: the NameServer does not know the topic.
        """
        route: TopicRouteData | None = await self.api.get_topic_route(topic, self.timeout_ms)
        if route is None:
            raise TopicNotExistError(remark=f"no route for topic {topic}")
        return route

    async def topic_config(self, topic: str, broker_addr: str | None = None) -> TopicConfig:
        """The topic's configuration on ``broker_addr`` (default: its first master)."""
        if broker_addr is None:
            masters = self._route_masters(await self.topic_route(topic))
            if not masters:
                raise TopicNotExistError(remark=f"topic {topic} has no master broker")
            broker_addr = masters[min(masters)]
        config: TopicConfig = await self.api.get_topic_config(broker_addr, topic, self.timeout_ms)
        return config

    async def topic_stats(self, topic: str) -> TopicStatsTable:
        """Min/max offsets and last update of every queue of ``topic`` on every broker."""
        route = await self.topic_route(topic)
        per_broker = await self._each(
            self._route_masters(route).values(),
            lambda a: self.api.get_topic_stats(a, topic, self.timeout_ms),
        )
        merged = TopicStatsTable()
        for table in per_broker.values():
            merged.offset_table.update(table.offset_table)
            merged.topic_put_tps += table.topic_put_tps
        return merged

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """The consumer groups with offsets on ``topic``."""
        route = await self.topic_route(topic)
        per_broker = await self._each(
            self._route_masters(route).values(),
            lambda a: self.api.query_topic_consume_by_who(a, topic, self.timeout_ms),
        )
        return sorted({g for groups in per_broker.values() for g in groups})

    # -- groups ---------------------------------------------------------------------------------

    async def create_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        retry_max_times: int = 16,
        retry_queue_nums: int = 1,
        consume_orderly: bool = False,
        consume_broadcast_enable: bool = True,
        consume_enable: bool = True,
        consume_from_min_enable: bool = True,
        broker_id: int = 0,
        which_broker_when_consume_slowly: int = 1,
        notify_consumer_ids_changed_enable: bool = True,
    ) -> list[str]:
        """Create or update a consumer group (``updateSubGroup``); returns the brokers.

        The keyword arguments are ``SubscriptionGroupConfig``'s fields (RocketMQ's names in
        snake case; ``consume_orderly`` is ``consumeMessageOrderly``).
        """
        config = SubscriptionGroupConfig(
            group_name=group,
            consume_enable=consume_enable,
            consume_from_min_enable=consume_from_min_enable,
            consume_broadcast_enable=consume_broadcast_enable,
            consume_message_orderly=consume_orderly,
            retry_queue_nums=retry_queue_nums,
            retry_max_times=retry_max_times,
            broker_id=broker_id,
            which_broker_when_consume_slowly=which_broker_when_consume_slowly,
            notify_consumer_ids_changed_enable=notify_consumer_ids_changed_enable,
        )
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        await self._each(
            addrs, lambda a: self.api.create_subscription_group(a, config, self.timeout_ms)
        )
        return addrs

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        clean_offset: bool = True,
    ) -> list[str]:
        """Delete a consumer group from one broker or the masters of a cluster (all by
        default); returns the brokers."""
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        await self._each(
            addrs,
            lambda a: self.api.delete_subscription_group(
                a, group, clean_offset=clean_offset, timeout_ms=self.timeout_ms
            ),
        )
        return addrs

    async def group_config(self, group: str, broker_addr: str) -> SubscriptionGroupConfig:
        """A consumer group's configuration on one broker."""
        config: SubscriptionGroupConfig = await self.api.get_subscription_group_config(
            broker_addr, group, self.timeout_ms
        )
        return config

    async def consumer_connections(self, group: str) -> ConsumerConnection:
        """The online consumers of ``group`` (first broker that knows them).

        Raises:
            ConsumerNotOnlineError: no broker knows an online consumer of the group.
        """
        last: BrokerResponseError | None = None
        for addr in await self._masters(None):
            try:
                conn: ConsumerConnection = await self.api.get_consumer_connection_list(
                    addr, group, self.timeout_ms
                )
                return conn
            except BrokerResponseError as exc:
                last = exc
        raise last if last is not None else InvalidArgumentError("the cluster has no broker")

    async def producer_connections(self, group: str, topic: str) -> ProducerConnection:
        """The producers of ``group`` as a broker hosting ``topic`` sees them."""
        masters = self._route_masters(await self.topic_route(topic))
        if not masters:
            raise TopicNotExistError(remark=f"topic {topic} has no master broker")
        conn: ProducerConnection = await self.api.get_producer_connection_list(
            masters[min(masters)], group, self.timeout_ms
        )
        return conn

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """Broker, consumer and pull offsets of ``group`` (``examineConsumeStats``): per
        queue, merged over every master; ``topic`` narrows it to one topic."""
        per_broker = await self._each(
            await self._masters(None), lambda a: self._consume_stats_at(a, group, topic)
        )
        merged = ConsumeStats()
        for stats in per_broker.values():
            if stats is not None:
                merged.offset_table.update(stats.offset_table)
                merged.consume_tps += stats.consume_tps
        return merged

    async def _consume_stats_at(
        self, addr: str, group: str, topic: str | None
    ) -> ConsumeStats | None:
        try:
            stats: ConsumeStats = await self.api.get_consume_stats(
                addr, group, topic, self.timeout_ms
            )
            return stats
        except BrokerResponseError as exc:
            logger.debug("consume stats of %s at %s: %s", group, addr, exc)
            return None

    async def consumer_running_info(self, group: str, client_id: str) -> Any:
        """A consumer's own report (subscriptions, queues, statuses), relayed by a broker."""
        last: ArianeError | None = None
        for addr in await self._masters(None):
            try:
                return await self.api.get_consumer_running_info(
                    addr, group, client_id, timeout_ms=self.timeout_ms
                )
            except ArianeError as exc:
                last = exc
        raise last if last is not None else InvalidArgumentError("the cluster has no broker")

    # -- offsets --------------------------------------------------------------------------------

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset the next message of ``mq`` will get."""
        addr = await self._broker_addr_of(mq)
        offset: int = await self.api.get_max_offset(addr, mq.topic, mq.queue_id, self.timeout_ms)
        return offset

    async def min_offset(self, mq: MessageQueue) -> int:
        """The smallest offset of ``mq`` still stored."""
        addr = await self._broker_addr_of(mq)
        offset: int = await self.api.get_min_offset(addr, mq.topic, mq.queue_id, self.timeout_ms)
        return offset

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms``."""
        addr = await self._broker_addr_of(mq)
        offset: int = await self.api.search_offset(
            addr, mq.topic, mq.queue_id, timestamp_ms, timeout_ms=self.timeout_ms
        )
        return offset

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """Store time (ms) of the oldest message of ``mq``."""
        addr = await self._broker_addr_of(mq)
        ts: int = await self.api.get_earliest_msg_store_time(
            addr, mq.topic, mq.queue_id, self.timeout_ms
        )
        return ts

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets of ``topic`` to the first message stored at or after
        ``timestamp_ms`` (``resetOffsetByTimestamp``; -1 = the end). Online consumers pick it
        up with their next pull. With ``force=False`` only offsets ahead of the target move.

        Returns:
            The new offset of every queue, as the brokers report them.
        """
        route = await self.topic_route(topic)
        per_broker = await self._each(
            self._route_masters(route).values(),
            lambda a: self.api.reset_offset(
                a, group, topic, timestamp_ms, force=force, timeout_ms=self.timeout_ms
            ),
        )
        merged: dict[MessageQueue, int] = {}
        for table in per_broker.values():
            merged.update(table)
        return merged

    async def reset_group_offset(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> tuple[str, dict[MessageQueue, int]]:
        """Reset ``group``'s offsets of ``topic`` to a time (-1 = the end): through the
        broker, which tells online consumers (``"broker"``), or, when no consumer is online,
        by committing the offsets directly (``"direct"``, RocketMQ's
        ``resetOffsetByTimeOld`` fallback).

        Raises:
            TopicNotExistError: unknown topic.
            InvalidArgumentError: an offline group with no offsets on the topic.
        """
        try:
            return "broker", await self.reset_offset_by_time(
                group, topic, timestamp_ms, force=force
            )
        except ConsumerNotOnlineError:
            pass
        return "direct", await self.reset_offset_by_time_offline(
            group, topic, timestamp_ms, force=force
        )

    # -- messages -------------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message with this offsetMsgId (``SendResult.offset_msg_id``), from the broker
        the id names."""
        msg: MessageExt = await self.api.view_message(offset_msg_id, self.timeout_ms)
        return msg

    async def query_message(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose ``KEYS`` contain ``key``, stored in [begin, end]."""
        found = await self._query(topic, key, max_num, begin_ms, end_ms, unique=False)
        return [m for m in found if key in m.keys][:max_num]

    async def query_message_trace(
        self,
        msg_id: str,
        trace_topic: str | None = None,
        *,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> MessageTrace:
        """The trace of the message with this id (``UNIQ_KEY``, ``SendResult.msg_id``): its
        Pub, SubBefore/SubAfter and EndTransaction records in time order, found in the trace
        topic (default ``RMQ_SYS_TRACE_TOPIC``) through the broker's key index.

        Args:
            msg_id: the message id.
            trace_topic: the trace topic the clients wrote to.
            max_num: most trace messages read per broker (Java's 64).
            begin_ms: trace messages stored from (epoch ms).
            end_ms: trace messages stored until (default: now + 1 min).

        Returns:
            The timeline; ``found`` is false when there is no record. Records that do not
            decode are listed in ``undecodable``.

        Raises:
            InvalidArgumentError: ``trace_topic`` is not a legal topic name.
            TopicNotExistError: the trace topic does not exist.
        """
        topic = trace_topic_name(trace_topic)
        found = await self._query(topic, msg_id, max_num, begin_ms, end_ms, unique=False)
        return build_message_trace(msg_id, topic, [m for m in found if msg_id in m.keys])

    async def query_message_by_id(self, topic: str, msg_id: str) -> MessageExt:
        """The message of ``topic`` with this id: a ``UNIQ_KEY`` (``SendResult.msg_id``) or an
        offsetMsgId of one of the topic's brokers.

        Raises:
            QueryNotFoundError: no such message.
        """
        found = await self._query(topic, msg_id, 32, 0, None, unique=True)
        matches = [m for m in found if m.properties.get(props.UNIQ_KEY) == msg_id]
        if matches:
            return min(matches, key=lambda m: m.store_timestamp_ms)
        try:
            decoded = decode_offset_msg_id(msg_id)
        except InvalidArgumentError:
            decoded = None
        if decoded is not None:
            masters = set(self._route_masters(await self.topic_route(topic)).values())
            if f"{decoded.host}:{decoded.port}" in masters:
                return await self.view_message(msg_id)
        raise QueryNotFoundError(remark=f"no message {msg_id} in topic {topic}")

    async def _query(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int | None,
        *,
        unique: bool,
    ) -> list[MessageExt]:
        route = await self.topic_route(topic)
        end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        per_broker = await self._each(
            self._route_masters(route).values(),
            lambda a: self.api.query_message(
                a,
                topic,
                key,
                max_num=max_num,
                begin_ms=begin_ms,
                end_ms=end,
                unique_key=unique,
                timeout_ms=self.timeout_ms,
            ),
        )
        seen: set[str] = set()
        out: list[MessageExt] = []
        for msgs in per_broker.values():
            for m in msgs:
                if m.topic == topic and m.offset_msg_id not in seen:
                    seen.add(m.offset_msg_id)
                    out.append(m)
        return out

    async def query_message_by_offset(self, mq: MessageQueue, offset: int) -> MessageExt | None:
        """The message at ``offset`` of ``mq`` (``queryMsgByOffset``), ``None`` if there is
        none (yet)."""
        addr = await self._broker_addr_of(mq)
        result = await self.api.pull_message(
            addr, tools_pull_header(mq, offset, 1), self.timeout_ms
        )
        if result.status is not PullStatus.FOUND:
            return None
        for msg in result.messages:
            if msg.queue_offset == offset:
                return msg
        return None
