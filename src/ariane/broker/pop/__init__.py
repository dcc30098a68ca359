"""POP consumption (RocketMQ 5): the broker leases messages to consumers instead of letting
them own queues and commit offsets.

:class:`PopConsumption` wires the parts and is the Python API of the broker's POP operations,
called by the remoting processors (``ariane.broker.processors.pop``) and by the gRPC proxy in
the same process::

    result = await broker.pop.pop(PopRequest("group", "topic", invisible_time_ms=30_000))
    for popped in result.messages():          # decoded, with receipt handles
        ...
        broker.pop.ack_by_handle("group", "topic", popped.handle)
    changed = await broker.pop.change_by_handle("group", "topic", handle, 10_000)

Parts: :mod:`.service` (POP), :mod:`.ack` (ACK, BATCH_ACK, CHANGE_MESSAGE_INVISIBLETIME),
:mod:`.peek` (PEEK, NOTIFICATION, POLLING_INFO), :mod:`.revive` (the revive log and service),
:mod:`.order` (FIFO state), :mod:`.polling` (long polling), :mod:`.records` (revive records),
:mod:`.types` (requests and results).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from ariane.broker.pop.ack import AckService
from ariane.broker.pop.buffer import CheckpointBuffer
from ariane.broker.pop.order import ORDER_INFO_FILE, OrderInfoManager
from ariane.broker.pop.peek import PeekService
from ariane.broker.pop.polling import PopLongPolling
from ariane.broker.pop.revive import PopReviveService, ReviveLog, ReviveTimer
from ariane.broker.pop.service import FilterBuilder, PopService
from ariane.broker.pop.types import (
    AckResult,
    ChangeInvisibleResult,
    NotificationResult,
    PeekResult,
    PopEntry,
    PoppedMessage,
    PopRequest,
    PopResult,
)
from ariane.common.pop import ReceiptHandle
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.remoting.eventloop import cancel_and_wait

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

logger = logging.getLogger(__name__)

#: Period of the held-checkpoint scan (commits of SYNC_FLUSH writes wait for it too); the
#: scan stops while the buffer has nothing to do and starts again at its next hold.
_BUFFER_SCAN_S = 0.05

__all__ = [
    "AckResult",
    "ChangeInvisibleResult",
    "NotificationResult",
    "PeekResult",
    "PopConsumption",
    "PopEntry",
    "PopRequest",
    "PopResult",
    "PoppedMessage",
]


class PopConsumption:
    """Everything POP of one broker.

    Args:
        host: the broker.
        filters: builds a subscription's filter (or the error answer).
        config_dir: where ``consumerOrderInfo.json`` lives.
        rng: randomness (tests pass a seeded one).
        timer: the timer wheel the revive records go through (None: they are appended
            directly and revived by store time, Ariane's fallback without the wheel).
    """

    def __init__(
        self,
        host: BrokerContext,
        filters: FilterBuilder,
        config_dir: str,
        rng: random.Random | None = None,
        timer: ReviveTimer | None = None,
    ) -> None:
        self.host = host
        cfg = host.config
        self.revive_log = ReviveLog(host, timer)
        self.orders = OrderInfoManager(
            os.path.join(config_dir, ORDER_INFO_FILE), host.clock, self._alive
        )
        self.polling = PopLongPolling(
            host.clock, host.store.get_max_offset_in_queue,
            max_total=cfg.max_pop_polling_size, max_per_key=cfg.pop_polling_size,
        )  # fmt: skip
        self.notify_polling = PopLongPolling(
            host.clock, host.store.get_max_offset_in_queue,
            max_total=cfg.max_pop_polling_size, max_per_key=cfg.pop_polling_size,
        )  # fmt: skip
        self.buffer = CheckpointBuffer(host, self.revive_log)
        self.service = PopService(
            host, self.revive_log, self.orders, self.polling, filters, self.buffer, rng
        )
        self.acks = AckService(host, self.revive_log, self.orders, self.polling, self.buffer)
        self.peeks = PeekService(host, self.orders, self.polling, self.notify_polling, rng)
        self.revive = PopReviveService(host, self.revive_log)
        self._buffer_task: asyncio.Task[None] | None = None

    def _alive(self, topic: str, group: str) -> bool:
        return topic in self.host.topics.table and (
            self.host.groups.find(group, create=False) is not None
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def create_system_topics(self) -> None:
        """Put the revive topic (``reviveQueueNum`` queues) into the topic table."""
        topics = self.host.topics
        name = self.revive_log.topic
        n = max(1, self.host.config.revive_queue_num)
        tc = topics.table.get(name)
        if tc is None or tc.read_queue_nums < n:
            from ariane.remoting.protocol.bodies import TopicConfig

            topics.table[name] = TopicConfig(name, n, n, PERM_READ | PERM_WRITE)
        topics.system_topics.add(name)

    def load(self) -> None:
        """Read ``consumerOrderInfo.json``.

        Raises:
            ConfigError: it exists but does not parse.
        """
        self.orders.load()

    def start_buffer(self) -> None:
        """Scan the held checkpoints every ``_BUFFER_SCAN_S`` (on the running loop)."""
        wake = asyncio.Event()
        self.buffer.on_work = wake.set
        self._buffer_task = asyncio.get_running_loop().create_task(
            self._scan_loop(wake), name="pop-buffer"
        )

    async def _scan_loop(self, wake: asyncio.Event) -> None:
        while True:
            if self.buffer.idle:  # an idle broker does not wake 20 times a second for nothing
                wake.clear()
                await wake.wait()
            await asyncio.sleep(_BUFFER_SCAN_S)
            try:
                self.buffer.scan()
            except Exception:
                logger.exception("POP checkpoint buffer scan failed")

    async def stop(self) -> None:
        """Answer parked requests, write every held checkpoint (and commit), stop reviving,
        write the FIFO state."""
        self.polling.stop()
        self.notify_polling.stop()
        task, self._buffer_task = self._buffer_task, None
        await cancel_and_wait(task)
        await self.flush_buffer()
        await self.revive.stop()
        self.orders.file.write_now()

    async def flush_buffer(self) -> None:
        """Write every held checkpoint and commit the offsets they let move."""
        self.buffer.scan(flush_all=True)
        for future in self.buffer.pending_writes():
            if not future.done():
                await asyncio.wrap_future(future)
        self.buffer.scan()

    def persist_if_dirty(self) -> None:
        """Schedule a write of the FIFO state when it changed (periodic task)."""
        self.orders.persist_if_dirty()

    def arriving(
        self,
        topic: str,
        queue_id: int,
        next_logic_offset: int,
        tags_code: int,
        store_timestamp_ms: int,
        properties: dict[str, str] | None,
    ) -> None:
        """The store's arriving listener (dispatch thread): wake parked POPs."""
        self.polling.arriving(
            topic, queue_id, next_logic_offset, tags_code, store_timestamp_ms, properties
        )
        self.notify_polling.arriving(
            topic, queue_id, next_logic_offset, tags_code, store_timestamp_ms, properties
        )

    # -- the API -------------------------------------------------------------------------------

    async def pop(self, req: PopRequest, alive: Callable[[], bool] | None = None) -> PopResult:
        """POP_MESSAGE (see :meth:`PopService.pop`)."""
        return await self.service.pop(req, alive)

    def ack(self, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> AckResult:
        """ACK_MESSAGE with the remoting header's fields (``topic``: the topic read)."""
        return self.acks.ack(group, topic, queue_id, offset, extra_info)

    def ack_by_handle(self, group: str, topic: str, handle: ReceiptHandle | str) -> AckResult:
        """Ack by receipt handle and original topic."""
        return self.acks.ack_by_handle(group, topic, handle)

    async def change_by_handle(
        self, group: str, topic: str, handle: ReceiptHandle | str, invisible_time_ms: int
    ) -> ChangeInvisibleResult:
        """Change the lease by receipt handle and original topic; the result has the new
        handle."""
        return await self.acks.change_by_handle(group, topic, handle, invisible_time_ms)
