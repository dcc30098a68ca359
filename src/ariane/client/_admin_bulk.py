"""The bulk half of ``Admin``: every topic, group or broker at once, for tools that list whole
clusters (the dashboard, statsAll-like reports) without one request per topic or group.

How it works: ``AdminBulk`` asks each broker once (``each_broker``), concurrently and under a
deadline, and keeps what every broker answered apart from what failed: one slow or dead
broker costs at most the deadline and shows up in ``BrokerAnswers.errors`` with a readable
reason, instead of failing the whole call (rocketmq-dashboard#4881). The per-broker requests
are RocketMQ's (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
GET_BROKER_CONSUME_STATS, GET_ALL_PRODUCER_INFO, GET_BROKER_RUNTIME_INFO, the *_LIST creates)
plus Ariane's two summaries (a RocketMQ broker answers those "not supported", which callers
see as an error of that broker). Messages of a time range are read queue by queue
concurrently, newest first, with a cap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, NamedTuple, TypeVar

from ariane.client._admin_ops import AdminOps
from ariane.client.message import MessageExt, MessageQueue, PullStatus
from ariane.common.sysflag import PULL_SUBSCRIPTION
from ariane.errors import ArianeError, InvalidArgumentError, RequestTimeoutError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import (
    ProducerTableInfo,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from ariane.remoting.protocol.bodies import TopicConfig, TopicConfigSerializeWrapper
from ariane.remoting.protocol.stats_bodies import ConsumeStatsList
from ariane.remoting.protocol.summary_bodies import GroupSummaryTable, TopicSummaryTable

__all__ = [
    "TOOLS_CONSUMER_GROUP",
    "AdminBulk",
    "BrokerAnswers",
    "describe_error",
    "tools_pull_header",
]

T = TypeVar("T")
_PULL_BATCH = 32
_QUEUE_READERS = 16
#: The group admin tools pull with (``MixAll.TOOLS_CONSUMER_GROUP``).
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"


def tools_pull_header(
    mq: MessageQueue, offset: int, count: int, group: str = TOOLS_CONSUMER_GROUP
) -> h.PullMessageRequestHeader:
    """A PULL_MESSAGE of ``count`` messages from ``offset`` that commits nothing and never
    waits (what admin tools read queues with)."""
    return h.PullMessageRequestHeader(
        consumer_group=group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=offset,
        max_msg_nums=count,
        sys_flag=PULL_SUBSCRIPTION,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
    )


class BrokerAnswers(NamedTuple, Generic[T]):
    """What each broker answered, and why the others did not.

    Attributes:
        values: broker address -> its answer.
        errors: broker address -> a readable reason (timeout, refused, unreachable...).
    """

    values: dict[str, T]
    errors: dict[str, str]


def describe_error(exc: BaseException, timeout_ms: int) -> str:
    """One readable line for a failed broker request. The request's own deadline and the
    caller's ``wait_for`` run out together; either is the same timeout (which fires first
    depends on the loop's turn), so both read the same."""
    if isinstance(exc, (TimeoutError, RequestTimeoutError)):
        return f"no answer within {timeout_ms} ms"
    text = str(exc).strip()
    return text or type(exc).__name__


class AdminBulk(AdminOps):
    """Cluster-wide calls with one request per broker (``Admin`` inherits them)."""

    async def each_broker(
        self,
        fn: Callable[[str], Awaitable[T]],
        addrs: Iterable[str] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> BrokerAnswers[T]:
        """Run ``fn(addr)`` for every master (or ``addrs``) concurrently, each under
        ``timeout_ms`` (default: the admin's timeout); failures are kept per broker."""
        limit = timeout_ms if timeout_ms is not None else self.timeout_ms
        targets = sorted(set(addrs)) if addrs is not None else await self._masters(None)

        async def one(addr: str) -> T:
            return await asyncio.wait_for(fn(addr), limit / 1000)

        results = await asyncio.gather(*(one(a) for a in targets), return_exceptions=True)
        values: dict[str, T] = {}
        errors: dict[str, str] = {}
        for addr, result in zip(targets, results, strict=True):
            if isinstance(result, ArianeError | TimeoutError | OSError):
                errors[addr] = describe_error(result, limit)
            elif isinstance(result, BaseException):
                raise result
            else:
                values[addr] = result
        return BrokerAnswers(values, errors)

    async def all_broker_addrs(self) -> list[str]:
        """Every broker address the NameServer knows, masters and slaves."""
        info = await self.cluster_info()
        return sorted(
            {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}
        )

    # -- whole tables ---------------------------------------------------------------------------

    async def all_topic_configs(
        self, *, timeout_ms: int | None = None
    ) -> BrokerAnswers[TopicConfigSerializeWrapper]:
        """Every master's topic table (GET_ALL_TOPIC_CONFIG)."""
        return await self.each_broker(
            lambda a: self.api.get_all_topic_config(a, timeout_ms), timeout_ms=timeout_ms
        )

    async def all_group_configs(
        self, *, timeout_ms: int | None = None
    ) -> BrokerAnswers[SubscriptionGroupWrapper]:
        """Every master's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
        return await self.each_broker(
            lambda a: self.api.get_all_subscription_group(a, timeout_ms), timeout_ms=timeout_ms
        )

    async def all_consume_stats(
        self, *, timeout_ms: int | None = None
    ) -> BrokerAnswers[ConsumeStatsList]:
        """Every group's offsets on every master (GET_BROKER_CONSUME_STATS)."""
        return await self.each_broker(
            lambda a: self.api.get_broker_consume_stats(a, timeout_ms=timeout_ms),
            timeout_ms=timeout_ms,
        )

    async def all_producers(
        self, *, timeout_ms: int | None = None
    ) -> BrokerAnswers[ProducerTableInfo]:
        """Every online producer on every master, by group (GET_ALL_PRODUCER_INFO)."""
        return await self.each_broker(
            lambda a: self.api.get_all_producer_info(a, timeout_ms), timeout_ms=timeout_ms
        )

    async def topic_summaries(
        self, *, timeout_ms: int | None = None
    ) -> BrokerAnswers[TopicSummaryTable]:
        """Message count, put TPS and 24 h volume of every topic, per master (Ariane's
        ARIANE_GET_TOPIC_SUMMARY)."""
        return await self.each_broker(
            lambda a: self.api.get_topic_summary(a, timeout_ms), timeout_ms=timeout_ms
        )

    async def group_summaries(
        self, *, timeout_ms: int | None = None
    ) -> BrokerAnswers[GroupSummaryTable]:
        """Online clients, lag and consume TPS of every group, per master (Ariane's
        ARIANE_GET_GROUP_SUMMARY)."""
        return await self.each_broker(
            lambda a: self.api.get_group_summary(a, timeout_ms), timeout_ms=timeout_ms
        )

    async def runtime_infos(
        self, addrs: Iterable[str], *, timeout_ms: int | None = None
    ) -> BrokerAnswers[dict[str, str]]:
        """``brokerStatus`` of each of ``addrs`` (GET_BROKER_RUNTIME_INFO)."""
        return await self.each_broker(
            lambda a: self.api.get_broker_runtime_info(a, timeout_ms), addrs, timeout_ms=timeout_ms
        )

    # -- batch writes ---------------------------------------------------------------------------

    async def create_topics(
        self,
        configs: Iterable[TopicConfig],
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Create or update many topics with one request per broker
        (UPDATE_AND_CREATE_TOPIC_LIST) on one broker or every master of a cluster; returns
        the brokers written to."""
        batch = list(configs)
        addrs = await self._targets(cluster, broker_addr)
        await self._each(addrs, lambda a: self.api.create_topic_list(a, batch, self.timeout_ms))
        return addrs

    async def create_groups(
        self,
        configs: Iterable[SubscriptionGroupConfig],
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Create or update many consumer groups with one request per broker
        (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST); returns the brokers written to."""
        batch = list(configs)
        addrs = await self._targets(cluster, broker_addr)
        await self._each(
            addrs,
            lambda a: self.api.create_subscription_group_list(a, batch, self.timeout_ms),
        )
        return addrs

    # -- reading queues -------------------------------------------------------------------------

    async def readable_queues(self, topic: str) -> list[tuple[MessageQueue, str]]:
        """(queue, master address) of every readable queue of ``topic``.

        Raises:
            TopicNotExistError: the NameServer does not know the topic.
        """
        route = await self.topic_route(topic)
        masters = {bd.broker_name: bd.master_addr for bd in route.broker_datas if bd.master_addr}
        out: list[tuple[MessageQueue, str]] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            addr = masters.get(qd.broker_name)
            if addr is not None:
                out.extend(
                    (MessageQueue(topic, qd.broker_name, i), addr)
                    for i in range(qd.read_queue_nums)
                )
        return out

    async def read_queue_range(
        self,
        mq: MessageQueue,
        addr: str,
        start: int,
        end: int,
        *,
        limit: int,
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> list[MessageExt]:
        """Messages of ``mq`` (on broker ``addr``) with offsets in [start, end), at most
        ``limit``, pulled without committing anything."""
        out: list[MessageExt] = []
        offset = start
        while offset < end and len(out) < limit:
            count = min(_PULL_BATCH, end - offset, limit - len(out))
            header = tools_pull_header(mq, offset, count, group)
            result = await self.api.pull_message(addr, header, self.timeout_ms)
            if result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
                offset = result.next_begin_offset
                continue
            if result.status is not PullStatus.FOUND:
                break
            for msg in result.messages:
                if start <= msg.queue_offset < end and len(out) < limit:
                    out.append(msg)
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        return out

    async def offset_range_by_time(
        self, mq: MessageQueue, addr: str, begin_ms: int | None, end_ms: int | None
    ) -> tuple[int, int]:
        """Offsets [lo, hi) holding every message of ``mq`` stored in [begin, end) (a few
        more at the edges: the broker's time search answers the nearest message, so callers
        filter by store time too)."""
        api, t = self.api, self.timeout_ms
        if begin_ms is not None:
            lo = await api.search_offset(addr, mq.topic, mq.queue_id, begin_ms, timeout_ms=t)
        else:
            lo = await api.get_min_offset(addr, mq.topic, mq.queue_id, t)
        hi = await api.get_max_offset(addr, mq.topic, mq.queue_id, t)
        if end_ms is not None:
            found = await api.search_offset(addr, mq.topic, mq.queue_id, end_ms, timeout_ms=t)
            hi = min(hi, found + 1)
        return lo, hi

    async def query_messages_by_time(
        self, topic: str, begin_ms: int, end_ms: int, *, max_num: int = 2000
    ) -> list[MessageExt]:
        """Messages of ``topic`` stored in [begin, end), newest first, at most ``max_num``
        (``queryMessageByTopic``); queues are read concurrently, each from its newest end.

        Raises:
            InvalidArgumentError: ``end_ms`` is not after ``begin_ms``, or ``max_num`` < 1.
            TopicNotExistError: the NameServer does not know the topic.
        """
        if end_ms <= begin_ms:
            raise InvalidArgumentError("the end of the time range must be after its begin")
        if max_num < 1:
            raise InvalidArgumentError("max_num must be at least 1")
        gate = asyncio.Semaphore(_QUEUE_READERS)

        async def one(mq: MessageQueue, addr: str) -> list[MessageExt]:
            async with gate:
                lo, hi = await self.offset_range_by_time(mq, addr, begin_ms, end_ms)
                lo = max(lo, hi - max_num)
                msgs = await self.read_queue_range(mq, addr, lo, hi, limit=max_num)
            return [m for m in msgs if begin_ms <= m.store_timestamp_ms < end_ms]

        per_queue = await asyncio.gather(
            *(one(mq, a) for mq, a in await self.readable_queues(topic))
        )
        found = [m for msgs in per_queue for m in msgs]
        found.sort(key=lambda m: (m.store_timestamp_ms, m.queue_offset), reverse=True)
        return found[:max_num]
