"""The blocking client side of the Spark connector: offsets on the driver, pulls on executors.

How it works: everything talks to the cluster through one ``ariane.client.Admin`` per
process and NameServer, living on the SDK's background event loop
(``ariane.client.sync.background_loop``) and kept for the life of the process, so a reused
Spark Python worker keeps its connections from task to task. Blocking methods run one
coroutine each on that loop; per-queue requests of one call run concurrently there.

* ``ClusterOffsets`` (driver): the readable queues of the topics (from the NameServer route,
  narrowed by ``assign``), their min/max offsets, the first offset stored at or after a
  time, and committing offsets to a consumer group.
* ``QueueReader`` (executors): pulls one queue range ``[start, end)`` with PULL_MESSAGE
  (RocketMQ's ``DefaultLitePullConsumer.pull`` without a rebalance: the range is the
  assignment), keeping up to ``pullsInFlight`` pulls of successive offset chunks in
  flight while the caller converts earlier answers (``ariane.spark._pipeline``); new pulls
  leave in bursts (the window refills once half of it is answered), started in one callback
  of the client's loop so that their requests share one write and the broker's answers
  come back together. Lost data (offsets below the queue's minimum, a queue shorter than
  planned) raises ``DataLossError`` when ``failOnDataLoss`` holds, else is logged and skipped.
  Raw reads (the Arrow path) use ARIANE_BULK_PULL_MESSAGE, an Ariane pull of a few
  megabytes per answer (``bulkPullMaxBytes``) instead of 32 records, ``bulkPullsInFlight``
  of them at once; a broker that answers REQUEST_CODE_NOT_SUPPORTED to the first one (an
  older Ariane, Apache RocketMQ) is remembered and read with plain pulls from that offset on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Union

from ariane.acl.credentials import SessionCredentials
from ariane.client.admin import Admin
from ariane.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from ariane.client.sync import background_loop, copy_outcome
from ariane.common.sysflag import PERM_READ, PULL_SUBSCRIPTION
from ariane.errors import (
    BrokerResponseError,
    DataLossError,
    InvalidArgumentError,
    RemoteProtocolError,
)
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.route import MASTER_ID, TopicRouteData
from ariane.spark._direct import DirectPulls, Ticket
from ariane.spark._pipeline import PullWindow
from ariane.spark.options import QueueKey, SourceOptions, Subscription
from ariane.spark.planning import QueueRange

__all__ = ["ClusterOffsets", "QueueReader", "shared_admin"]

logger = logging.getLogger(__name__)

_admins: dict[tuple[int, str, SessionCredentials | None], Admin] = {}
_admins_lock = threading.Lock()
#: Messages a bulk pull asks for (the broker answers fewer: its bulkPullMaxMessages and
#: bulkPullMaxBytes, 8192 and 4 MiB by default).
BULK_PULL_MESSAGES = 65_536
#: Answer bodies a reader keeps for reuse (``QueueReader.recycle``): the pulls in flight by
#: default and the one being decoded, a few MiB each.
_SPARE_BODIES = 6
#: Broker addresses that answered a bulk pull REQUEST_CODE_NOT_SUPPORTED (this process).
_no_bulk: set[str] = set()
#: How often a pull that finds nothing below the planned end is retried before it counts
#: as lost data (the queue's max offset can lag a moment behind after a broker restart).
_EMPTY_PULL_RETRIES = 5


def shared_admin(
    nameserver: str, timeout_ms: int = 10_000, credentials: SessionCredentials | None = None
) -> Admin:
    """The process's started ``Admin`` for ``nameserver`` and ACL account (created on first
    use)."""
    key = (os.getpid(), nameserver, credentials)
    with _admins_lock:
        admin = _admins.get(key)
        if admin is None:
            admin = Admin(namesrv_addr=nameserver, timeout_ms=timeout_ms, credentials=credentials)
            background_loop().run(admin.start())
            _admins[key] = admin
        return admin


def broker_addrs(route: TopicRouteData) -> dict[str, str]:
    """Broker name -> address to read from: the master, else the lowest-id slave."""
    out = {}
    for bd in route.broker_datas:
        if MASTER_ID in bd.broker_addrs:
            out[bd.broker_name] = bd.broker_addrs[MASTER_ID]
        elif bd.broker_addrs:
            out[bd.broker_name] = bd.broker_addrs[min(bd.broker_addrs)]
    return out


def pull_header(
    group: str, key: QueueKey, offset: int, max_nums: int, sub: Subscription
) -> h.PullMessageRequestHeader:
    """A PULL_MESSAGE header that carries its own subscription (no heartbeat needed)."""
    return h.PullMessageRequestHeader(
        consumer_group=group,
        topic=key[0],
        queue_id=key[2],
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=PULL_SUBSCRIPTION,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription=sub.expression,
        expression_type=sub.expression_type,
        broker_name=key[1],
    )


_Pulled = tuple[PullResult, bytes | bytearray]
#: a pull to start: (offset, max_nums, the future its answer completes)
_Pending = tuple[int, int, "concurrent.futures.Future[_Pulled]"]
#: a pull in flight: through the SDK's client (a future) or on the task's own connection
_Answer = Union["concurrent.futures.Future[_Pulled]", Ticket]


class ClusterOffsets:
    """Driver-side queries of a read's queues (blocking).

    Args:
        opts: the source options (NameServer, topics or assign, group, timeouts).
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.admin = shared_admin(opts.nameserver, opts.timeout_ms, opts.credentials)
        self._bg = background_loop()
        self.addrs: dict[QueueKey, str] = {}

    def queues(self) -> dict[QueueKey, str]:
        """Readable queues of the read (sorted) -> broker address; refreshes ``addrs``.

        Raises:
            TopicNotExistError: a topic has no route.
        """

        async def go() -> dict[QueueKey, str]:
            routes = await asyncio.gather(
                *(self.admin.topic_route(t) for t in self.opts.all_topics)
            )
            out: dict[QueueKey, str] = {}
            for topic, route in zip(self.opts.all_topics, routes, strict=True):
                addrs = broker_addrs(route)
                for qd in route.queue_datas:
                    if not qd.perm & PERM_READ or qd.broker_name not in addrs:
                        continue
                    for qid in range(qd.read_queue_nums):
                        key = (topic, qd.broker_name, qid)
                        if self.opts.selects(key):
                            out[key] = addrs[qd.broker_name]
            return dict(sorted(out.items()))

        self.addrs = self._bg.run(go())
        return self.addrs

    def bounds(self, keys: list[QueueKey]) -> tuple[dict[QueueKey, int], dict[QueueKey, int]]:
        """(min offsets, max offsets) of ``keys`` (max = the next offset to be written)."""
        api = self.admin.api
        timeout = self.opts.timeout_ms

        async def one(key: QueueKey) -> tuple[int, int]:
            addr = self.addrs[key]
            low, high = await asyncio.gather(
                api.get_min_offset(addr, key[0], key[2], timeout),
                api.get_max_offset(addr, key[0], key[2], timeout),
            )
            return low, high

        async def go() -> list[tuple[int, int]]:
            return list(await asyncio.gather(*(one(k) for k in keys)))

        pairs = self._bg.run(go())
        return (
            {k: p[0] for k, p in zip(keys, pairs, strict=True)},
            {k: p[1] for k, p in zip(keys, pairs, strict=True)},
        )

    def offsets_for_time(
        self,
        timestamp_ms: int,
        mins: dict[QueueKey, int],
        maxs: dict[QueueKey, int],
    ) -> dict[QueueKey, int]:
        """Per queue, the first offset whose store time is at or after ``timestamp_ms`` (its
        max offset when there is none), exactly: the broker's SEARCH_OFFSET_BY_TIMESTAMP is
        only a hint (it answers the *closest* entry), refined by binary search over the store
        timestamps of single pulled messages."""
        api = self.admin.api
        group = self.opts.consumer_group
        timeout = self.opts.timeout_ms

        async def store_time(addr: str, key: QueueKey, offset: int) -> int:
            header = pull_header(group, key, offset, 1, Subscription())
            result = await api.pull_message(addr, header, timeout)
            if result.status is PullStatus.FOUND and result.messages:
                return result.messages[0].store_timestamp_ms
            # gone (below the minimum): older than anything stored
            return -1

        async def one(key: QueueKey) -> int:
            addr = self.addrs[key]
            lo, hi = mins[key], maxs[key]
            if lo >= hi:
                return hi
            hint = await api.search_offset(addr, key[0], key[2], timestamp_ms, timeout_ms=timeout)
            if lo <= hint < hi:
                if await store_time(addr, key, hint) >= timestamp_ms:
                    hi = hint
                else:
                    lo = hint + 1
            while lo < hi:
                mid = (lo + hi) // 2
                if await store_time(addr, key, mid) >= timestamp_ms:
                    hi = mid
                else:
                    lo = mid + 1
            return lo

        async def go() -> list[int]:
            return list(await asyncio.gather(*(one(k) for k in maxs)))

        return dict(zip(list(maxs), self._bg.run(go()), strict=True))

    def commit_to_group(self, group: str, offsets: dict[QueueKey, int]) -> None:
        """Store ``offsets`` as ``group``'s consumer offsets (UPDATE_CONSUMER_OFFSET), so that
        ``consumerProgress`` and lag dashboards show the query's progress."""
        api = self.admin.api

        async def go() -> None:
            await asyncio.gather(
                *(
                    api.update_consumer_offset(
                        self.addrs[k], group, k[0], k[2], off, timeout_ms=self.opts.timeout_ms
                    )
                    for k, off in offsets.items()
                    if k in self.addrs
                )
            )

        self._bg.run(go())

    def message_queue(self, key: QueueKey) -> MessageQueue:
        """The ``MessageQueue`` of a key."""
        return MessageQueue(key[0], key[1], key[2])


class QueueReader:
    """Pulls queue ranges on an executor (blocking).

    Args:
        opts: the source options (group, subscription, batch size, failOnDataLoss).
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.admin = shared_admin(opts.nameserver, opts.timeout_ms, opts.credentials)
        self._bg = background_loop()
        self._tags = opts.subscription.tags
        #: answer bodies handed back by ``recycle``, read into again (``ariane.spark._direct``)
        self._spare: list[bytearray] = []

    def _addr(self, rng: QueueRange) -> str:
        route = self._bg.run(self.admin.topic_route(rng.topic))
        addr = broker_addrs(route).get(rng.broker)
        if addr is None:
            raise InvalidArgumentError(
                f"broker {rng.broker!r} no longer serves topic {rng.topic!r} (route changed)"
            )
        return addr

    def _start(
        self, addr: str, rng: QueueRange, raw: bool, bulk: bool, pulls: list[_Pending]
    ) -> None:
        """Start ``pulls`` (offset, max_nums, future to complete) in one callback of the
        client's loop, so their requests leave in one write (``bulk``: as bulk pulls)."""
        api = self.admin.api
        timeout = self.opts.timeout_ms
        group, key, sub = self.opts.consumer_group, rng.key, self.opts.subscription

        async def pull(offset: int, max_nums: int) -> tuple[PullResult, bytes]:
            header = pull_header(group, key, offset, max_nums, sub)
            if raw:
                return await api.pull_message_raw(addr, header, timeout, bulk)
            return await api.pull_message(addr, header, timeout), b""

        def start() -> None:
            for offset, max_nums, done in pulls:
                task = asyncio.ensure_future(pull(offset, max_nums))
                task.add_done_callback(functools.partial(copy_outcome, done))

        self._bg.loop.call_soon_threadsafe(start)

    def _lost(self, rng: QueueRange, what: str) -> None:
        text = (
            f"{rng.topic}/{rng.broker}/{rng.queue_id}: {what}; "
            "set failOnDataLoss=false to skip lost messages"
        )
        if self.opts.fail_on_data_loss:
            raise DataLossError(text)
        logger.warning("data loss: %s", text)

    def read(self, rng: QueueRange) -> Iterator[list[MessageExt]]:
        """Yield the messages of ``rng`` (in offset order, filtered), a pull at a time.

        Raises:
            DataLossError: messages of the range are gone and ``failOnDataLoss`` holds.
            BrokerResponseError: the broker refused the pull (bad filter, no such group...).
        """
        for offset, result, _ in self._pulls(rng, raw=False):
            batch = [m for m in result.messages if offset <= m.queue_offset < rng.end]
            if self._tags is not None:
                batch = [m for m in batch if m.tags in self._tags]
            if batch:
                yield batch

    def recycle(self, bodies: Iterable[bytes | bytearray]) -> None:
        """Hand back bodies of ``read_raw`` that nothing refers to any more (their records
        copied out, no view of them kept): later answers are read into them."""
        spare = self._spare
        for body in bodies:
            if isinstance(body, bytearray) and len(spare) < _SPARE_BODIES:
                spare.append(body)

    def read_raw(self, rng: QueueRange) -> Iterator[bytes | bytearray]:
        """Yield the stored records of ``rng`` as the broker sent them, a pull at a time, in
        offset order; unlike ``read`` nothing is decoded, so a body may hold records outside
        the range or of other tags (the caller keeps the records of ``[rng.start, rng.end)``
        and of ``tags``: pulls start inside the range, in order, so each record is in
        exactly one body).

        Raises:
            DataLossError: messages of the range are gone and ``failOnDataLoss`` holds.
            BrokerResponseError: the broker refused the pull (bad filter, no such group...).
        """
        for _, _, body in self._pulls(rng, raw=True):
            if body:
                yield body

    def _pulls(
        self, rng: QueueRange, raw: bool
    ) -> Iterator[tuple[int, PullResult, bytes | bytearray]]:
        """(offset pulled from, result, raw body) of each pull that found or skipped
        messages, in offset order, while up to ``pullsInFlight`` later pulls are in flight
        (``ariane.spark._pipeline``)."""
        if rng.size == 0:
            return
        addr = self._addr(rng)
        pending: list[_Pending] = []  # submitted by the window, not yet started
        bulk = raw and self.opts.bulk_pull and addr not in _no_bulk
        # bulk pulls on a connection of the task's own (ariane.spark._direct), unless the
        # requests must be signed (ACL)
        own = bulk and self.opts.bulk_pull_socket and self.opts.credentials is None
        direct = DirectPulls(addr, self.opts.timeout_ms, self._spare) if own else None
        group, sub = self.opts.consumer_group, self.opts.subscription

        def submit(offset: int, count: int) -> _Answer:
            if direct is not None and bulk:
                return direct.submit(pull_header(group, rng.key, offset, count, sub))
            done: concurrent.futures.Future[_Pulled] = concurrent.futures.Future()
            pending.append((offset, count, done))
            return done

        def send() -> None:
            if direct is not None and bulk:
                direct.flush()
            elif pending:
                self._start(addr, rng, raw, bulk, list(pending))
                pending.clear()

        def new_window(start: int) -> PullWindow[_Answer]:
            opts = self.opts
            depth = opts.bulk_pulls_in_flight if bulk else opts.pulls_in_flight
            batch = BULK_PULL_MESSAGES if bulk else opts.pull_batch_size
            return PullWindow(start, rng.end, batch, depth, submit, refill_at=depth // 2)

        try:
            window = new_window(rng.start)
            send()
            empty_pulls = 0
            while not window.done:
                offset, _, head = window.head()
                try:
                    result, body = head.result()
                except BrokerResponseError as exc:
                    if not bulk or exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                        raise
                    logger.info("broker %s has no bulk pull: plain pulls (%s)", addr, exc)
                    _no_bulk.add(addr)
                    bulk = False
                    window = new_window(offset)
                    send()
                    continue
                status = result.status
                found = False
                if status is PullStatus.FOUND or status is PullStatus.NO_MATCHED_MSG:
                    nxt = result.next_begin_offset
                    if nxt <= offset:
                        raise RemoteProtocolError(
                            f"pull of {rng.key} at {offset} did not advance (next {nxt})"
                        )
                    found = True
                    empty_pulls = 0
                elif status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
                    self._lost(
                        rng,
                        f"offsets {offset}..{min(result.min_offset, rng.end) - 1} were deleted "
                        f"(the queue starts at {result.min_offset})",
                    )
                    nxt = result.min_offset
                else:
                    # NO_NEW_MSG, or OFFSET_ILLEGAL past the end: the queue is shorter than planned
                    empty_pulls += 1
                    if empty_pulls <= _EMPTY_PULL_RETRIES and result.max_offset > offset:
                        time.sleep(0.05 * empty_pulls)
                        window.restart()
                        send()
                        continue
                    self._lost(
                        rng,
                        f"offsets {offset}..{rng.end - 1} are missing "
                        f"(the queue ends at {result.max_offset})",
                    )
                    return
                window.advance(nxt, status is PullStatus.FOUND)
                send()
                if found:
                    yield offset, result, body
        finally:
            if direct is not None:
                direct.close()
