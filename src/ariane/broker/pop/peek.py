"""PEEK_MESSAGE, NOTIFICATION and POLLING_INFO (RocketMQ 5 ``PeekMessageProcessor``,
``NotificationProcessor``, ``PollingInfoProcessor``).

How it works: the three look at a POP group's queues without leasing anything. Their position
in a queue is the group's committed offset (the queue's min offset when it has none; the init
mode does not apply). PEEK reads from there (the group's POP retry topic first one time in
five) and answers PULL_NOT_FOUND when nothing is there. NOTIFICATION answers ``hasMsg`` when
some queue (FIFO: some queue not blocked by a batch) has messages past that position, else
waits like a POP (in its own set of parked requests, so it never takes a wake-up meant for a
POP) until one arrives or its time is up. POLLING_INFO counts the POPs parked at a key.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from ariane.broker.pop.order import OrderInfoManager
from ariane.broker.pop.polling import PopLongPolling, Probe
from ariane.broker.pop.service import MAX_POP_NUMS
from ariane.broker.pop.types import NotificationResult, PeekResult
from ariane.common.pop import pop_retry_topic
from ariane.common.sysflag import PERM_READ
from ariane.remoting.protocol.codes import ResponseCode
from ariane.store import GetStatus

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["PeekService"]

_RETRY_FIRST_PERCENT = 20


class PeekService:
    """Peeks and notifications of one broker.

    Args:
        host: the broker.
        orders: FIFO state (blocked queues count as empty for notifications).
        pop_polling: the POP parked requests (POLLING_INFO counts them).
        notify_polling: the parked notifications.
        rng: randomness.
    """

    def __init__(
        self,
        host: BrokerContext,
        orders: OrderInfoManager,
        pop_polling: PopLongPolling,
        notify_polling: PopLongPolling,
        rng: random.Random | None = None,
    ) -> None:
        self.host = host
        self.orders = orders
        self.pop_polling = pop_polling
        self.notify_polling = notify_polling
        self.rng = rng or random.Random()

    def _check(self, group: str, topic: str, queue_id: int) -> tuple[int, str] | None:
        host = self.host
        if not host.config.broker_permission & PERM_READ:
            return (
                ResponseCode.NO_PERMISSION,
                f"the broker[{host.broker_addr}] peeking message is forbidden",
            )
        tc = host.topics.get(topic)
        if tc is None:
            return ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
        if not tc.perm & PERM_READ:
            return ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden"
        if queue_id >= tc.read_queue_nums:
            return (
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        cfg = host.groups.find(group)
        if cfg is None:
            return (
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not cfg.consume_enable:
            return ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
        return None

    def _position(self, group: str, topic: str, queue_id: int) -> int:
        offset = self.host.offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self.host.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def _queues(self, group: str, topic: str, queue_id: int) -> list[tuple[str, int]]:
        """(topic, queue) pairs to look at: the retry topic (first one time in five), then
        the topic's queues from a random one on."""
        topics = self.host.topics
        out: list[tuple[str, int]] = []
        retry = pop_retry_topic(topic, group, self.host.config.enable_retry_topic_v2)
        r = self.rng.randrange(100)
        retry_queues = [(retry, 0)] if retry in topics.table else []
        if r < _RETRY_FIRST_PERCENT:
            out += retry_queues
        if queue_id >= 0:
            out.append((topic, queue_id))
        else:
            tc = topics.get(topic)
            n = tc.read_queue_nums if tc is not None else 0
            out += [(topic, (r + i) % n) for i in range(n)]
        if r >= _RETRY_FIRST_PERCENT:
            out += retry_queues
        return out

    # -- peek ----------------------------------------------------------------------------------

    def peek(self, group: str, topic: str, queue_id: int, max_msg_nums: int) -> PeekResult:
        """PEEK_MESSAGE: up to ``max_msg_nums`` records past the group's position."""
        refused = self._check(group, topic, queue_id)
        if refused is not None:
            return PeekResult(*refused)
        if not 0 < max_msg_nums <= MAX_POP_NUMS:
            return PeekResult(
                ResponseCode.INVALID_PARAMETER, f"maxMsgNums must be 1..{MAX_POP_NUMS}"
            )
        store = self.host.store
        records: list[bytes] = []
        rest = 0
        for name, qid in self._queues(group, topic, queue_id):
            offset = self._position(group, name, qid)
            room = max_msg_nums - len(records)
            if room > 0:
                res = store.get_message(group, name, qid, offset, room)
                if res.status is GetStatus.FOUND:
                    records += res.messages
                    offset = res.next_begin_offset
            rest += max(0, store.get_max_offset_in_queue(name, qid) - offset)
        if not records:
            return PeekResult(ResponseCode.PULL_NOT_FOUND, "no message to peek", rest)
        return PeekResult(ResponseCode.SUCCESS, "FOUND", rest, records)

    # -- notification --------------------------------------------------------------------------

    def has_message(
        self, group: str, topic: str, queue_id: int, attempt_id: str | None, order: bool
    ) -> tuple[bool, list[Probe]]:
        """Whether the group has something to pop; and what was looked at."""
        store = self.host.store
        probes: list[Probe] = []
        for name, qid in self._queues(group, topic, queue_id):
            if order and name == topic and self.orders.is_blocked(name, group, qid, attempt_id):
                continue
            offset = self._position(group, name, qid)
            if store.get_max_offset_in_queue(name, qid) > offset:
                return True, probes
            probes.append((name, qid, offset))
        return False, probes

    async def notification(
        self,
        group: str,
        topic: str,
        queue_id: int,
        poll_time_ms: int,
        born_time_ms: int,
        order: bool = False,
        attempt_id: str | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> NotificationResult:
        """NOTIFICATION: whether there is something to pop, waiting up to the poll time."""
        refused = self._check(group, topic, queue_id)
        if refused is not None:
            return NotificationResult(*refused)
        born = born_time_ms or self.host.clock.now_ms()
        waited = False
        while True:
            has, probes = self.has_message(group, topic, queue_id, attempt_id, order)
            if has or waited or poll_time_ms <= 0:
                return NotificationResult(ResponseCode.SUCCESS, "", has)
            future = self.notify_polling.park(
                topic, group, queue_id, None, born + poll_time_ms, probes,
                (pop_retry_topic(topic, group, False), pop_retry_topic(topic, group, True)),
            )  # fmt: skip
            if future is None:
                return NotificationResult(ResponseCode.SUCCESS, "", False, True)
            try:
                woken = await future
            finally:
                self.notify_polling.unpark(future)
            if alive is not None and not alive():
                return NotificationResult(ResponseCode.SUCCESS, "", False)
            waited = not woken

    def polling_info(self, group: str, topic: str, queue_id: int) -> tuple[int, str, int]:
        """POLLING_INFO: (code, remark, POPs parked at the key)."""
        refused = self._check(group, topic, queue_id)
        if refused is not None:
            return refused[0], refused[1], 0
        return ResponseCode.SUCCESS, "", self.pop_polling.count(topic, group, queue_id)
