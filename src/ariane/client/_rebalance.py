"""Queue rebalancing of one consumer group (RocketMQ ``RebalanceImpl``, ``RebalancePushImpl``,
``RebalanceLitePullImpl``).

How it works: ``do_rebalance`` runs every ``rebalance_interval_ms`` (20 s) and at once on
NOTIFY_CONSUMER_IDS_CHANGED. For each subscribed topic it computes the queues this client
should own: every readable queue in broadcasting mode; in clustering mode the allocation
strategy's share of the sorted queue list over the sorted client ids the broker reports
(GET_CONSUMER_LIST_BY_GROUP). ``update_process_queue_table`` then

* drops queues no longer owned (or whose pull loop stalled for 120 s): the process queue is
  marked dropped, its offset persisted and forgotten, and in orderly clustering mode its
  broker lock released (only once no listener runs on it; else retried next round);
* adds new queues: in orderly mode only after LOCK_BATCH_MQ granted them; the start offset is
  ``compute_pull_from_where`` (stored offset, else the consume-from rule); a queue whose
  offset cannot be read is skipped this round.

The owner (push or lite pull consumer) supplies the hooks: ``dispatch`` starts pulling the new
queues and ``on_queue_changed`` reacts to a changed assignment. Orderly consumers also call
``lock_all`` every 20 s (``lockMQPeriodically``) and ``unlock_all`` at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field

from ariane.client._allocate import AllocateStrategy, mq_sort_key
from ariane.client._instance import ClientInstance
from ariane.client._offset_store import NOT_FOUND, OffsetStore, ReadOffsetType
from ariane.client._process_queue import ProcessQueue
from ariane.common.clock import Clock, SystemClock, monotonic_ms
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import ArianeError
from ariane.remoting.protocol.client_bodies import (
    ConsumeFromWhere,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from ariane.remoting.protocol.route import MASTER_ID

__all__ = ["PullTarget", "RebalanceImpl", "parse_consume_timestamp"]

logger = logging.getLogger(__name__)

LOCK_TIMEOUT_MS = 1000


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time, as Java's ``UtilAll.parseDate``) -> epoch ms.

    Raises:
        ValueError: not in that form.
    """
    parsed = time.strptime(text, "%Y%m%d%H%M%S")
    return int(time.mktime(parsed) * 1000)


async def _nothing(topic: str, mq_all: set[MessageQueue], mine: set[MessageQueue]) -> None:
    return None


@dataclass(slots=True)
class PullTarget:
    """A queue newly assigned, with its process queue and first offset (Java ``PullRequest``).

    Attributes:
        mq: the queue.
        pq: its process queue.
        next_offset: where pulling starts.
        locked_first: orderly: the offset was re-read from the broker after locking.
    """

    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int
    locked_first: bool = False


@dataclass
class RebalanceImpl:
    """The rebalance state of one consumer group.

    Attributes:
        group: the consumer group.
        model: clustering or broadcasting.
        strategy: the allocation strategy (clustering).
        instance: the client instance.
        offset_store: the group's offset store.
        consume_from_where: where a queue without a stored offset starts.
        consume_timestamp: ``yyyyMMddHHmmss`` for ``CONSUME_FROM_TIMESTAMP``.
        orderly: lock queues at the broker before consuming them.
        dispatch: called with the newly added queues (start pulling them).
        on_queue_changed: ``(topic, all queues, owned queues)`` after a change.
        pull_expiry: drop queues whose pull loop stalled (push consumers only).
        subscription_inner: topic -> subscription (retry topic included).
        topic_subscribe_info: topic -> readable queues (from routes).
        process_queue_table: owned queue -> process queue.
        clock: time of lock confirmations (the client config's clock).
    """

    group: str
    model: MessageModel
    strategy: AllocateStrategy
    instance: ClientInstance
    offset_store: OffsetStore
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = ""
    orderly: bool = False
    dispatch: Callable[[list[PullTarget]], None] = lambda targets: None
    on_queue_changed: Callable[[str, set[MessageQueue], set[MessageQueue]], Awaitable[None]] = (
        _nothing
    )
    pull_expiry: bool = True
    subscription_inner: dict[str, SubscriptionData] = field(default_factory=dict)
    topic_subscribe_info: dict[str, set[MessageQueue]] = field(default_factory=dict)
    process_queue_table: dict[MessageQueue, ProcessQueue] = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    @property
    def needs_lock(self) -> bool:
        """Orderly clustering consumers own queues through broker locks (broadcasting
        consumers each read every queue and need none)."""
        return self.orderly and self.model is MessageModel.CLUSTERING

    # -- the round -------------------------------------------------------------------------------

    def lock_round(self) -> asyncio.Lock:
        """The lock a rebalance round holds (others changing the queue table take it too)."""
        return self._lock

    async def do_rebalance(self) -> None:
        """One rebalance of every subscribed topic (serialised)."""
        async with self._lock:
            for topic in list(self.subscription_inner):
                try:
                    await self.rebalance_by_topic(topic)
                except ArianeError as exc:
                    if not topic.startswith(RETRY_PREFIX):
                        logger.warning("rebalance of %s/%s failed: %s", self.group, topic, exc)
            await self._truncate_not_my_topics()

    async def rebalance_by_topic(self, topic: str) -> None:
        """Recompute the queues of ``topic`` this client owns and apply the change."""
        mq_set = self.topic_subscribe_info.get(topic)
        if self.model is MessageModel.BROADCASTING:
            if not mq_set:
                logger.debug("rebalance: no queues of %s yet", topic)
                return
            await self._apply(topic, set(mq_set), set(mq_set))
            return
        cid_all = await self.instance.find_consumer_id_list(topic, self.group)
        if not mq_set or not cid_all:
            logger.debug("rebalance: %s has queues %s, consumers %s", topic, mq_set, cid_all)
            return
        mq_all = sorted(mq_set, key=mq_sort_key)
        cids = sorted(cid_all)
        try:
            mine = set(self.strategy.allocate(self.group, self.instance.client_id, mq_all, cids))
        except ArianeError as exc:
            logger.warning("allocation by %s failed: %s", self.strategy.name, exc)
            return
        if await self._apply(topic, set(mq_set), mine):
            logger.info(
                "rebalance %s/%s: %d consumers, now owns %s",
                self.group,
                topic,
                len(cids),
                sorted((mq.broker_name, mq.queue_id) for mq in mine),
            )

    async def _apply(self, topic: str, mq_all: set[MessageQueue], mine: set[MessageQueue]) -> bool:
        """Apply an assignment; on a change tell the owner (which heartbeats the new
        subscription version) before the new queues start pulling."""
        changed, targets = await self.update_process_queue_table(topic, mine)
        if changed:
            await self.on_queue_changed(topic, mq_all, mine)
        if targets:
            self.dispatch(targets)
        return changed

    async def _truncate_not_my_topics(self) -> None:
        for mq in list(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                logger.info("dropped %s: topic no longer subscribed", mq)

    # -- applying an assignment ------------------------------------------------------------------

    async def update_process_queue_table(
        self, topic: str, mq_set: set[MessageQueue]
    ) -> tuple[bool, list[PullTarget]]:
        """Drop queues of ``topic`` not in ``mq_set`` and add the new ones
        (``updateProcessQueueTableInRebalance``); whether anything changed, and the new
        queues (not yet dispatched)."""
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                reason = "not assigned any more"
            elif self.pull_expiry and pq.is_pull_expired():
                reason = "pull loop stalled"
            else:
                continue
            pq.dropped = True
            if await self.remove_unnecessary_message_queue(mq, pq):
                self.process_queue_table.pop(mq, None)
                changed = True
                logger.info("dropped %s (%s)", mq, reason)
        targets: list[PullTarget] = []
        for mq in sorted(mq_set - self.process_queue_table.keys(), key=mq_sort_key):
            target = await self._add_queue(mq)
            if target is not None:
                targets.append(target)
                changed = True
        return changed, targets

    async def _add_queue(self, mq: MessageQueue) -> PullTarget | None:
        if self.needs_lock and not await self.lock(mq):
            logger.info("%s is locked by another consumer; retrying at the next rebalance", mq)
            return None
        self.offset_store.remove_offset(mq)
        offset = await self.compute_pull_from_where(mq)
        if offset < 0:
            logger.warning("cannot compute the start offset of %s; retrying later", mq)
            if self.needs_lock:
                await self.unlock(mq, oneway=True)
            return None
        if mq in self.process_queue_table:
            return None
        pq = ProcessQueue(self.clock)
        if self.orderly:
            pq.locked = True
            pq.last_lock_ms = monotonic_ms(self.clock)
        self.process_queue_table[mq] = pq
        logger.info("%s: new queue %s from offset %d", self.group, mq, offset)
        return PullTarget(mq, pq, offset, locked_first=self.orderly)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Persist and forget the queue's offset; in orderly clustering mode release its lock
        when no listener runs on it (``False``: try again next round)."""
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        if not self.needs_lock:
            return True
        try:
            await asyncio.wait_for(pq.consume_lock.acquire(), LOCK_TIMEOUT_MS / 1000)
        except TimeoutError:
            pq.try_unlock_times += 1
            logger.info("%s is being consumed; unlock it later", mq)
            return False
        try:
            await self.unlock(mq, oneway=True)
        finally:
            pq.consume_lock.release()
        pq.locked = False
        return True

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """Forget ``mq`` now (offset illegal; the next rebalance re-creates it)."""
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
            self.offset_store.remove_offset(mq)

    # -- start offsets ---------------------------------------------------------------------------

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The first offset of a newly owned queue (``computePullFromWhere``): the stored
        offset, else by ``consume_from_where``; -1 when it cannot be determined."""
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != NOT_FOUND:
            return -1
        cfw = self.consume_from_where
        retry = mq.topic.startswith(RETRY_PREFIX)
        try:
            if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
                if retry:
                    return await self._max_offset(mq)
                return await self._search_offset(
                    mq, parse_consume_timestamp(self.consume_timestamp)
                )
            return 0 if retry else await self._max_offset(mq)
        except (ArianeError, ValueError) as exc:
            logger.warning("start offset of %s: %s", mq, exc)
            return -1

    async def _broker_addr(self, mq: MessageQueue) -> str:
        found = self.instance.find_broker_addr_in_subscribe(mq.broker_name)
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            found = self.instance.find_broker_addr_in_subscribe(mq.broker_name)
        if found is None:
            raise ArianeError(f"the broker {mq.broker_name} is not known")
        return found[0]

    async def _max_offset(self, mq: MessageQueue) -> int:
        return await self.instance.api.get_max_offset(
            await self._broker_addr(mq), mq.topic, mq.queue_id
        )

    async def _search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.instance.api.search_offset(
            await self._broker_addr(mq), mq.topic, mq.queue_id, timestamp_ms
        )

    # -- orderly locks ---------------------------------------------------------------------------

    def _master(self, broker_name: str) -> str | None:
        found = self.instance.find_broker_addr_in_subscribe(
            broker_name, MASTER_ID, only_this_broker=True
        )
        return found[0] if found is not None else None

    def _body(self, mqs: Iterable[MessageQueue]) -> LockBatchRequestBody:
        return LockBatchRequestBody(self.group, self.instance.client_id, list(mqs))

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue; whether it is held (marks its process queue)."""
        addr = self._master(mq.broker_name)
        if addr is None:
            return False
        try:
            locked = await self.instance.api.lock_batch_mq(
                addr, self._body([mq]), timeout_ms=LOCK_TIMEOUT_MS
            )
        except ArianeError as exc:
            logger.info("locking %s failed: %s", mq, exc)
            return False
        now = monotonic_ms(self.clock)
        for held in locked:
            pq = self.process_queue_table.get(held)
            if pq is not None:
                pq.locked = True
                pq.last_lock_ms = now
        return mq in locked

    def _by_broker(self, mqs: Collection[MessageQueue]) -> dict[str, list[MessageQueue]]:
        out: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            out.setdefault(mq.broker_name, []).append(mq)
        return out

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue; a queue the broker refuses stops
        (``locked = False``) until a later renewal succeeds."""

        async def one(broker: str, mqs: list[MessageQueue]) -> None:
            addr = self._master(broker)
            if addr is None:
                return
            try:
                locked = await self.instance.api.lock_batch_mq(
                    addr, self._body(mqs), timeout_ms=LOCK_TIMEOUT_MS
                )
            except ArianeError as exc:
                logger.info("renewing locks at %s failed: %s", broker, exc)
                return
            now = monotonic_ms(self.clock)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.locked = True
                    pq.last_lock_ms = now
                elif pq.locked:
                    pq.locked = False
                    logger.warning("lost the lock of %s", mq)

        table = self._by_broker(self.process_queue_table)
        await asyncio.gather(*(one(b, m) for b, m in table.items()))

    async def unlock(self, mq: MessageQueue, *, oneway: bool) -> None:
        """UNLOCK_BATCH_MQ for one queue (errors are logged)."""
        addr = self._master(mq.broker_name)
        if addr is None:
            return
        try:
            await self.instance.api.unlock_batch_mq(
                addr, self._body([mq]), oneway=oneway, timeout_ms=LOCK_TIMEOUT_MS
            )
        except ArianeError as exc:
            logger.info("unlocking %s failed: %s", mq, exc)

    async def unlock_all(self, *, oneway: bool = False) -> None:
        """Release every owned queue's lock (shutdown)."""

        async def one(broker: str, mqs: list[MessageQueue]) -> None:
            addr = self._master(broker)
            if addr is None:
                return
            try:
                await self.instance.api.unlock_batch_mq(
                    addr, self._body(mqs), oneway=oneway, timeout_ms=LOCK_TIMEOUT_MS
                )
            except ArianeError as exc:
                logger.info("unlocking at %s failed: %s", broker, exc)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False

        table = self._by_broker(self.process_queue_table)
        await asyncio.gather(*(one(b, m) for b, m in table.items()))
