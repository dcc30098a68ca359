"""The operational half of ``Admin`` (RocketMQ ``DefaultMQAdminExt``'s NameServer, statistics
and housekeeping calls), kept apart so ``admin.py`` stays readable.

How it works: ``AdminOps`` is the base class of ``Admin``. It owns the helpers every call
uses (``_each`` runs one coroutine per address concurrently, ``_masters`` resolves a cluster
to its master brokers from GET_BROKER_CLUSTER_INFO) and the calls that go to every
NameServer of the client's list (write permissions, NameServer settings, KV config), as
RocketMQ's admin does, or to brokers named by a cluster or an address (statistics, cleanup).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from ariane.client.config import ClientConfig
from ariane.client.message import MessageExt, MessageQueue
from ariane.errors import BrokerResponseError, InvalidArgumentError
from ariane.remoting.protocol.bodies import ClusterInfo
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, ConsumeStatsList

if TYPE_CHECKING:
    from ariane.client._api import ClientAPI
    from ariane.remoting.protocol.admin_bodies import ConsumeStats
    from ariane.remoting.protocol.queue_bodies import QueryConsumeQueueResponseBody
    from ariane.remoting.protocol.route import TopicRouteData

__all__ = ["AdminOps"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


class AdminOps:
    """Shared helpers and the NameServer / statistics / cleanup calls of ``Admin``."""

    client_config: ClientConfig
    timeout_ms: int

    @property
    def api(self) -> ClientAPI:
        """The request layer (``Admin`` provides it)."""
        raise NotImplementedError

    # provided by Admin
    async def topic_route(self, topic: str) -> TopicRouteData:  # pragma: no cover
        raise NotImplementedError

    async def consume_stats(
        self, group: str, topic: str | None = None
    ) -> ConsumeStats:  # pragma: no cover
        raise NotImplementedError

    async def query_message_by_offset(
        self, mq: MessageQueue, offset: int
    ) -> MessageExt | None:  # pragma: no cover
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------------------

    async def _each(self, addrs: Iterable[str], fn: Callable[[str], Awaitable[T]]) -> dict[str, T]:
        addr_list = sorted(set(addrs))
        results = await asyncio.gather(*(fn(a) for a in addr_list))
        return dict(zip(addr_list, results, strict=True))

    async def cluster_info(self) -> ClusterInfo:
        """Every broker group (name -> addresses) and cluster (name -> broker names)."""
        info: ClusterInfo = await self.api.get_cluster_info(self.timeout_ms)
        return info

    async def _masters(self, cluster: str | None) -> list[str]:
        info = await self.cluster_info()
        names: set[str] = set()
        if cluster is None:
            names = set(info.broker_addr_table)
        elif cluster in info.cluster_addr_table:
            names = set(info.cluster_addr_table[cluster])
        else:
            raise InvalidArgumentError(f"no cluster named {cluster!r}")
        addrs = []
        for name in names:
            bd = info.broker_addr_table.get(name)
            if bd is not None and bd.master_addr is not None:
                addrs.append(bd.master_addr)
        return sorted(addrs)

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        """The master broker addresses of ``cluster`` (of every cluster by default).

        Raises:
            InvalidArgumentError: no cluster has that name.
        """
        return await self._masters(cluster)

    async def _targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        if not addrs:
            raise InvalidArgumentError("no broker to send the request to")
        return addrs

    async def topic_clusters(self, topic: str) -> list[str]:
        """The clusters hosting ``topic`` (``topicClusterList``).

        Raises:
            TopicNotExistError: the NameServer does not know the topic.
        """
        route = await self.topic_route(topic)
        info = await self.cluster_info()
        names = {bd.broker_name for bd in route.broker_datas}
        return sorted(c for c, brokers in info.cluster_addr_table.items() if brokers & names)

    # -- NameServers ----------------------------------------------------------------------------

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Make ``broker_name`` read-only in every route of every NameServer
        (``wipeWritePerm``); returns NameServer -> number of topics changed."""
        return await self._each(
            self.client_config.namesrv_addrs,
            lambda a: self.api.wipe_write_perm_of_broker(a, broker_name, self.timeout_ms),
        )

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Give ``broker_name`` write permission again in every NameServer (``addWritePerm``);
        returns NameServer -> number of topics changed."""
        return await self._each(
            self.client_config.namesrv_addrs,
            lambda a: self.api.add_write_perm_of_broker(a, broker_name, self.timeout_ms),
        )

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Every NameServer's settings: address -> key -> value."""
        return await self._each(
            self.client_config.namesrv_addrs,
            lambda a: self.api.get_namesrv_config(a, self.timeout_ms),
        )

    async def update_namesrv_config(self, properties: Mapping[str, str]) -> list[str]:
        """Change (and persist) settings on every NameServer; returns their addresses."""
        done = await self._each(
            self.client_config.namesrv_addrs,
            lambda a: self.api.update_namesrv_config(a, dict(properties), self.timeout_ms),
        )
        return list(done)

    async def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """Create or update a KV config entry on every NameServer (``updateKvConfig``)."""
        done = await self._each(
            self.client_config.namesrv_addrs,
            lambda a: self.api.put_kv_config_at(a, namespace, key, value, self.timeout_ms),
        )
        return list(done)

    async def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        """Delete a KV config entry on every NameServer (``deleteKvConfig``)."""
        done = await self._each(
            self.client_config.namesrv_addrs,
            lambda a: self.api.delete_kv_config_at(a, namespace, key, self.timeout_ms),
        )
        return list(done)

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """A KV config value (``None`` when absent)."""
        value: str | None = await self.api.get_kv_config(namespace, key, self.timeout_ms)
        return value

    # -- statistics -----------------------------------------------------------------------------

    async def broker_stats(
        self, broker_addr: str, stats_name: str, stats_key: str
    ) -> BrokerStatsData | None:
        """One statistics item of a broker (``viewBrokerStatsData``: ``TOPIC_PUT_NUMS`` with
        the topic, ``GROUP_GET_NUMS`` with ``topic@group``...); ``None`` when the broker has
        no such item (nothing counted yet)."""
        try:
            data: BrokerStatsData = await self.api.view_broker_stats_data(
                broker_addr, stats_name, stats_key, self.timeout_ms
            )
        except BrokerResponseError as exc:
            if exc.code == ResponseCode.SYSTEM_ERROR and "not exist" in (exc.remark or ""):
                return None
            raise
        return data

    async def broker_consume_stats(
        self, broker_addr: str, *, is_order: bool = False
    ) -> ConsumeStatsList:
        """Consume stats of every group on one broker (``brokerConsumeStats``)."""
        stats: ConsumeStatsList = await self.api.get_broker_consume_stats(
            broker_addr, is_order=is_order, timeout_ms=self.timeout_ms
        )
        return stats

    async def query_consume_queue(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        index: int,
        *,
        count: int = 10,
        group: str | None = None,
    ) -> tuple[QueryConsumeQueueResponseBody, str | None]:
        """``count`` raw ConsumeQueue entries of one queue of a broker from ``index``
        (``queryConsumeQueue``); with ``group``, whether its filter matches each. Returns
        the body and the broker's remark (why no entry came, e.g. an index out of range).

        Raises:
            BrokerResponseError: the broker has no such queue.
        """
        return await self.api.query_consume_queue(
            broker_addr, topic, queue_id, index, count, group, self.timeout_ms
        )

    # -- housekeeping ---------------------------------------------------------------------------

    async def clean_expired_consume_queue(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Drop consume queues wholly below the CommitLog minimum (``cleanExpiredCQ``) on one
        broker or every master of a cluster (all by default); returns the brokers."""
        addrs = await self._targets(cluster, broker_addr)
        await self._each(addrs, lambda a: self.api.clean_expired_consume_queue(a, self.timeout_ms))
        return addrs

    async def delete_expired_commit_log(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Ask brokers to delete expired CommitLog files now (``deleteExpiredCommitLog``);
        returns the brokers."""
        addrs = await self._targets(cluster, broker_addr)
        await self._each(addrs, lambda a: self.api.trigger_delete_files(a, self.timeout_ms))
        return addrs

    # -- offsets --------------------------------------------------------------------------------

    async def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, *, offline: bool = False
    ) -> list[str]:
        """Copy ``src_group``'s offsets of ``topic`` to ``dest_group`` on every broker hosting
        the topic (``cloneGroupOffset``); returns the brokers."""
        route = await self.topic_route(topic)
        addrs = [bd.master_addr for bd in route.broker_datas if bd.master_addr is not None]
        await self._each(
            addrs,
            lambda a: self.api.clone_group_offset(
                a, src_group, dest_group, topic=topic, offline=offline, timeout_ms=self.timeout_ms
            ),
        )
        return sorted(addrs)

    async def first_offset_at_or_after(self, mq: MessageQueue, addr: str, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` (the queue's end when
        none is): SEARCH_OFFSET_BY_TIMESTAMP answers the message *nearest* to the time, as
        RocketMQ's ``getOffsetInQueueByTime`` does, so its answer is checked and moved by
        reading the store times around it."""
        lo = await self.api.get_min_offset(addr, mq.topic, mq.queue_id, self.timeout_ms)
        hi = await self.api.get_max_offset(addr, mq.topic, mq.queue_id, self.timeout_ms)
        offset = await self.api.search_offset(
            addr, mq.topic, mq.queue_id, timestamp_ms, timeout_ms=self.timeout_ms
        )
        offset = min(max(offset, lo), hi)

        async def stored_at(o: int) -> int | None:
            msg = await self.query_message_by_offset(mq, o)
            return None if msg is None else msg.store_timestamp_ms

        while offset < hi:
            stored = await stored_at(offset)
            if stored is None or stored >= timestamp_ms:
                break
            offset += 1
        while offset > lo:
            stored = await stored_at(offset - 1)
            if stored is None or stored < timestamp_ms:
                break
            offset -= 1
        return offset

    async def reset_offset_by_time_offline(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Reset the offsets of a group with no online consumer by committing them directly
        (RocketMQ's ``resetOffsetByTimestampOld``): per queue the first offset stored at or
        after ``timestamp_ms`` (-1 = the end); without ``force`` only offsets ahead of the
        target move back.

        Raises:
            TopicNotExistError: unknown topic.
            InvalidArgumentError: the group has no offsets on the topic.
        """
        stats = await self.consume_stats(group, topic)
        if not stats.offset_table:
            raise InvalidArgumentError(f"group {group} has no offsets on topic {topic}")
        route = await self.topic_route(topic)
        masters = {
            bd.broker_name: bd.master_addr
            for bd in route.broker_datas
            if bd.master_addr is not None
        }
        done: dict[MessageQueue, int] = {}
        for mq, wrapper in sorted(
            stats.offset_table.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id)
        ):
            addr = masters.get(mq.broker_name)
            if addr is None:
                continue
            if timestamp_ms == -1:
                target = wrapper.broker_offset
            else:
                target = await self.first_offset_at_or_after(mq, addr, timestamp_ms)
            if force or target <= wrapper.consumer_offset:
                await self.api.update_consumer_offset(
                    addr, group, topic, mq.queue_id, target, timeout_ms=self.timeout_ms
                )
                done[mq] = target
            else:
                done[mq] = wrapper.consumer_offset
        return done
