"""POP consumption in the broker (RocketMQ 5 ``PopMessageProcessor``): the pop itself.

How it works, per request: validate as upstream does (first failing check wins); pick a revive
queue (round robin; 999 for FIFO) and a random number r in 0..99. A non-FIFO pop reads the
group's POP retry topic first when r < ``popFromRetryProbability`` (20), else after the topic
when the batch is still short; the topic's queues are read from queue ``r % readQueueNums`` on
(or the one queue asked for). Per queue, reading starts at the group's committed offset (a
group without one starts per the init mode; an administrator's pending reset wins), through the
request's tag or SQL92 filter, for what is left of the batch.

A non-FIFO read that found messages writes a *checkpoint* (start offset, pop time, invisible
time, the offsets handed out) into the revive topic and commits the group's offset past the
read at once: un-acked messages come back through the retry topic, never by rewinding. When
the checkpoint cannot be appended, the queue's messages are left out of the answer and its
offset stays. Under SYNC_FLUSH the answer waits until the checkpoints are on disk. A FIFO read
writes no checkpoint: it records the batch in :mod:`ariane.broker.pop.order`, which blocks the
queue until the batch is acked or its lease ends, and leaves the offset at the batch start.

Messages read from a retry topic are relabelled with the topic asked for and given their
``POP_CK`` handle; the answer lists every queue's checkpoint start (``startOffsetInfo``), the
offsets handed out (``msgOffsetInfo``) and for FIFO the delivery counts (``orderCountInfo``).

Dead letters (Ariane's choice, equivalent to what RocketMQ's gRPC proxy does at receive time, so
that remoting POP clients get it too): a message handed out ``retryMaxTimes + 1`` times is not
handed out again but stored in ``%DLQ%<group>``: non-FIFO messages by the revive service,
FIFO messages here, at the pop that would deliver them once more.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ariane.broker.filters import PullFilter
from ariane.broker.pop.buffer import CheckpointBuffer
from ariane.broker.pop.order import OrderInfoManager
from ariane.broker.pop.polling import PopLongPolling, Probe
from ariane.broker.pop.records import PopCheckPoint
from ariane.broker.pop.revive import ReviveLog, dead_letter
from ariane.broker.pop.types import PopEntry, PopRequest, PopResult
from ariane.common.pop import (
    POP_ORDER_REVIVE_QUEUE,
    ConsumeInitMode,
    OffsetInfo,
    ReceiptHandle,
    pop_retry_topic,
    retry_flag_of,
)
from ariane.common.properties import POP_CK
from ariane.common.record import decode_record, encode_record
from ariane.common.sysflag import PERM_READ
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import CorruptionError
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import GetResult, GetStatus, PutResult

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["MAX_POP_NUMS", "PopService", "with_born_time"]

logger = logging.getLogger(__name__)

#: Most messages one POP may ask for.
MAX_POP_NUMS = 32
#: ``isTimeoutTooMuch``: a request this late (past born + poll time) is answered at once.
_TOO_LATE_MS = 500
#: FIFO: reads of one queue in one pop when everything read was dead-lettered.
_FIFO_REREADS = 4
_RESEEK = frozenset(
    {GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_FOUND_NULL}
)
_NOTHING_MATCHED = frozenset(
    {
        GetStatus.NO_MATCHED_MESSAGE,
        GetStatus.OFFSET_FOUND_NULL,
        GetStatus.MESSAGE_WAS_REMOVING,
        GetStatus.NO_MATCHED_LOGIC_QUEUE,
    }
)

#: ``build(expression, expression_type)``: the cached filter, or the error answer.
FilterBuilder = Callable[[str | None, str | None], "PullFilter | RemotingCommand"]


@dataclass(slots=True)
class _Pop:
    """One POP in progress."""

    req: PopRequest
    flt: PullFilter
    pop_time: int
    revive_qid: int
    info: OffsetInfo = field(default_factory=OffsetInfo)
    records: list[bytes] = field(default_factory=list)
    entries: list[PopEntry] = field(default_factory=list)
    rest: int = 0
    pending: list[Future[PutResult]] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)

    @property
    def room(self) -> int:
        return self.req.max_msg_nums - len(self.records)


class PopService:
    """POP, peek and notification of one broker (acks live in :mod:`.ack`).

    Args:
        host: the broker.
        revive_log: where checkpoints go.
        orders: FIFO state.
        buffer: held checkpoints and the order of offset commits.
        polling: parked POP requests.
        filters: builds a request's filter (the pull processor's cache).
        rng: randomness (tests pass a seeded one).
    """

    def __init__(
        self,
        host: BrokerContext,
        revive_log: ReviveLog,
        orders: OrderInfoManager,
        polling: PopLongPolling,
        filters: FilterBuilder,
        buffer: CheckpointBuffer,
        rng: random.Random | None = None,
    ) -> None:
        self.host = host
        self.revive_log = revive_log
        self.buffer = buffer
        self.orders = orders
        self.polling = polling
        self.filters = filters
        self.rng = rng or random.Random()
        self._revive_counter = 0
        self.popped_messages = 0

    # -- the async API -----------------------------------------------------------------------

    async def pop(
        self,
        req: PopRequest,
        alive: Callable[[], bool] | None = None,
        first: tuple[PopResult, _Pop | None] | None = None,
    ) -> PopResult:
        """Pop messages, waiting up to the request's poll time for some to arrive.

        Args:
            req: the request.
            alive: tells whether the requester still waits (a closed connection: the wait
                ends and nothing more is popped).
            first: the outcome of a :meth:`pop_now` already made for ``req``.
        """
        born = req.born_time_ms or self.host.clock.now_ms()
        if born != req.born_time_ms:
            req = with_born_time(req, born)
        may_wait = True
        while True:
            if first is not None:
                result, pop = first
                first = None
            else:
                result, pop = self.pop_now(req)
            if pop is not None and pop.pending:
                await _stored(pop.pending)
            if (
                result.code != ResponseCode.POLLING_TIMEOUT
                or pop is None
                or not may_wait
                or req.poll_time_ms <= 0
            ):
                return result
            deadline = born + req.poll_time_ms
            future = self.polling.park(
                req.topic, req.group, req.queue_id, pop.flt, deadline, pop.probes,
                self._retry_names(req.topic, req.group) if not req.order else (),
            )  # fmt: skip
            if future is None:
                result.code = ResponseCode.POLLING_FULL
                result.remark = "the broker's POP long polling is full"
                return result
            try:
                woken = await future
            finally:
                self.polling.unpark(future)
            if alive is not None and not alive():
                return result
            # woken: pop again (and wait again if another consumer was faster); timed out:
            # one last look without waiting
            may_wait = woken

    def pop_now(self, req: PopRequest) -> tuple[PopResult, _Pop | None]:
        """One pass of a POP without waiting (the remoting fast path).

        Returns:
            The result (POLLING_TIMEOUT when nothing was found) and, unless the request was
            refused, the pass (its pending checkpoint writes and what it read).
        """
        refused = self._check(req)
        if isinstance(refused, PopResult):
            return refused, None
        flt = refused
        host = self.host
        cfg = host.config
        if req.order:
            revive_qid = POP_ORDER_REVIVE_QUEUE
        else:
            revive_qid = self._revive_counter % max(1, cfg.revive_queue_num)
            self._revive_counter += 1
        pop = _Pop(req, flt, host.clock.now_ms(), revive_qid)
        r = self.rng.randrange(100)
        retry = "" if req.order else self._retry_topic(req.topic, req.group, r)
        retry_first = bool(retry) and r < cfg.pop_from_retry_probability
        if retry_first:
            self._pop_topic(pop, retry, -1, r)
        self._pop_topic(pop, req.topic, req.queue_id, r)
        if retry and not retry_first and pop.room > 0:
            self._pop_topic(pop, retry, -1, r)
        result = PopResult(
            ResponseCode.SUCCESS if pop.records else ResponseCode.POLLING_TIMEOUT,
            "FOUND" if pop.records else "NO_MESSAGE_IN_QUEUE",
            req.topic, req.group, cfg.broker_name, pop.pop_time, req.invisible_time_ms,
            revive_qid, pop.rest, pop.info.start_offset_info, pop.info.msg_offset_info,
            pop.info.order_count_info, pop.records, pop.entries,
        )  # fmt: skip
        if pop.records:
            self.popped_messages += len(pop.records)
            if pop.rest > 0:
                self.polling.wake_one(req.topic, req.group, req.queue_id)
        return result, pop

    # -- checks --------------------------------------------------------------------------------

    def _check(self, req: PopRequest) -> PullFilter | PopResult:
        host = self.host
        cfg = host.config
        now = host.clock.now_ms()

        def fail(code: int, remark: str) -> PopResult:
            return PopResult(code, remark, req.topic, req.group, cfg.broker_name)

        if req.born_time_ms and now - req.born_time_ms - req.poll_time_ms > _TOO_LATE_MS:
            return fail(ResponseCode.POLLING_TIMEOUT, "the pop request arrived too late")
        if not cfg.broker_permission & PERM_READ:
            return fail(
                ResponseCode.NO_PERMISSION,
                f"the broker[{host.broker_addr}] pop message is forbidden",
            )
        if not 0 < req.max_msg_nums <= MAX_POP_NUMS:
            return fail(
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{host.broker_addr}] pop message's num is greater than "
                f"{MAX_POP_NUMS} or not positive: {req.max_msg_nums}",
            )
        if req.invisible_time_ms < 0:
            return fail(ResponseCode.INVALID_PARAMETER, "invisibleTime must not be negative")
        tc = host.topics.get(req.topic)
        if tc is None:
            return fail(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{req.topic}] not exist, apply first please!"
            )
        if not tc.perm & PERM_READ:
            return fail(
                ResponseCode.NO_PERMISSION, f"the topic[{req.topic}] peeking message is forbidden"
            )
        if req.queue_id >= tc.read_queue_nums:
            return fail(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{req.queue_id}] is illegal, topic:[{req.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        group = host.groups.find(req.group)
        if group is None:
            return fail(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{req.group}] does not exist",
            )
        if not group.consume_enable:
            return fail(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {req.group}"
            )
        flt = self.filters(req.expression, req.expression_type)
        if isinstance(flt, RemotingCommand):
            return fail(flt.code, flt.remark or "bad subscription")
        return flt

    # -- retry topics --------------------------------------------------------------------------

    def _retry_topic(self, topic: str, group: str, r: int) -> str:
        """The one POP retry topic this request reads ("" when it does not exist)."""
        cfg = self.host.config
        v2 = cfg.enable_retry_topic_v2
        if v2 and cfg.retrieve_message_from_pop_retry_topic_v1 and r % 2 == 0:
            v2 = False
        name = pop_retry_topic(topic, group, v2)
        return name if name in self.host.topics.table else ""

    def _retry_names(self, topic: str, group: str) -> tuple[str, ...]:
        return (pop_retry_topic(topic, group, False), pop_retry_topic(topic, group, True))

    # -- reading -------------------------------------------------------------------------------

    def _pop_topic(self, pop: _Pop, topic: str, queue_id: int, r: int) -> None:
        tc = self.host.topics.get(topic)
        if tc is None or not tc.perm & PERM_READ:
            return
        if queue_id >= 0:
            self._pop_queue(pop, topic, queue_id)
            return
        n = tc.read_queue_nums
        for i in range(n):
            self._pop_queue(pop, topic, (r + i) % n)

    def start_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """Where the group's next pop of the queue starts (initialised and committed when the
        group has no offset yet; a pending administrator's reset is taken here)."""
        host = self.host
        offsets = host.offsets
        if host.config.use_server_side_reset_offset:
            reset = offsets.take_reset(group, topic, queue_id)
            if reset is not None:
                self.orders.clear(topic, group, queue_id)
                self.buffer.clear_queue(topic, group, queue_id)
                offsets.commit(group, topic, queue_id, reset)
                return reset
        offset = offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self._init_offset(topic, queue_id, init_mode)
            offsets.commit(group, topic, queue_id, offset)
        return max(offset, self.buffer.next_offset(topic, group, queue_id))

    def _init_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        """``getInitOffset``: MIN (and every retry topic) starts at the queue's min offset;
        MAX at the newest message, or at 0 when the queue was never truncated and its first
        message is still in memory."""
        store = self.host.store
        if init_mode == ConsumeInitMode.MIN or topic.startswith(RETRY_PREFIX):
            return store.get_min_offset_in_queue(topic, queue_id)
        if self.host.config.init_pop_offset_by_check_msg_in_mem and (
            store.get_min_offset_in_queue(topic, queue_id) <= 0
        ):
            res = store.get_message("", topic, queue_id, 0, 1)
            if res.status is GetStatus.FOUND and not res.suggest_pulling_from_slave:
                return 0
        return max(0, store.get_max_offset_in_queue(topic, queue_id) - 1)

    def _read(self, pop: _Pop, topic: str, queue_id: int, offset: int) -> tuple[GetResult, int]:
        """Read from ``offset`` (once more from where the store points when the offset is out
        of the queue); the result and the offset it was read from."""
        store = self.host.store
        group = pop.req.group
        res = store.get_message(group, topic, queue_id, offset, pop.room, pop.flt)
        if res.status in _RESEEK:
            offset = res.next_begin_offset
            self.host.offsets.commit(group, topic, queue_id, offset)
            res = store.get_message(group, topic, queue_id, offset, pop.room, pop.flt)
        return res, offset

    def _pop_queue(self, pop: _Pop, topic: str, queue_id: int) -> None:
        req = pop.req
        store = self.host.store
        for _ in range(_FIFO_REREADS if req.order else 1):
            if req.order and self.orders.is_blocked(topic, req.group, queue_id, req.attempt_id):
                return
            offset = self.start_offset(req.group, topic, queue_id, req.init_mode)
            if pop.room <= 0:
                pop.rest += max(0, store.get_max_offset_in_queue(topic, queue_id) - offset)
                return
            res, start = self._read(pop, topic, queue_id, offset)
            pop.probes.append((topic, queue_id, max(res.next_begin_offset, start)))
            dead = 0
            if res.status is GetStatus.FOUND:
                if req.order:
                    dead = self._take_order(pop, topic, queue_id, start, res)
                else:
                    self._take(pop, topic, queue_id, start, res)
            elif res.status in _NOTHING_MATCHED and res.next_begin_offset > start:
                # a filtered-out range is consumed: committed past (in order)
                if req.order:
                    self.host.offsets.commit(req.group, topic, queue_id, res.next_begin_offset)
                else:
                    self.buffer.add(topic, req.group, queue_id, res.next_begin_offset, None, 0)
            if dead == 0 or pop.room <= 0 or res.next_begin_offset >= res.max_offset:
                pop.rest += max(0, res.max_offset - res.next_begin_offset)
                return
            # everything read was dead-lettered: read on

    def _take(self, pop: _Pop, topic: str, queue_id: int, start: int, res: GetResult) -> None:
        """Non-FIFO: checkpoint the read, commit past it, add its messages."""
        req = pop.req
        ck = PopCheckPoint(
            start, pop.pop_time, req.invisible_time_ms, queue_id, topic, req.group,
            self.host.config.broker_name, tuple(o - start for o in res.message_queue_offsets),
        )  # fmt: skip
        write = self.buffer.add(
            topic, req.group, queue_id, res.next_begin_offset, ck, pop.revive_qid
        )
        if write is not None:
            if write.done() and not write.result().stored:
                logger.error(
                    "cannot write the checkpoint of %s:%d for %s (%s): its messages stay "
                    "unconsumed", topic, queue_id, req.group, write.result().status.value,
                )  # fmt: skip
                return
            pop.pending.append(write)
        self._add(pop, topic, queue_id, start, res.messages, res.message_queue_offsets, {})

    def _take_order(self, pop: _Pop, topic: str, queue_id: int, start: int, res: GetResult) -> int:
        """FIFO: record the batch (blocking the queue), dead-letter what was delivered too
        often, add the rest; returns the number of dead letters."""
        req = pop.req
        info = self.orders.update(
            topic, req.group, queue_id, pop.pop_time, req.invisible_time_ms,
            list(res.message_queue_offsets), req.attempt_id,
        )  # fmt: skip
        group = self.host.groups.find(req.group, create=False)
        max_attempts = (group.retry_max_times if group is not None else 16) + 1
        messages: list[bytes] = []
        offsets: list[int] = []
        for record, offset in zip(res.messages, res.message_queue_offsets, strict=True):
            if info.counts.get(offset, 0) >= max_attempts and self._order_dead_letter(
                pop, topic, queue_id, offset, record
            ):
                continue
            messages.append(record)
            offsets.append(offset)
        dead = len(res.messages) - len(messages)
        nxt = info.next_offset()
        if nxt != start:  # dead letters at the batch start are consumed
            self.host.offsets.commit(req.group, topic, queue_id, nxt)
        if not messages:
            return dead
        counts = {o: info.counts.get(o, 0) for o in offsets}
        pop.info.add_order_counts(retry_flag_of(topic), queue_id, counts)
        self._add(pop, topic, queue_id, start, messages, offsets, counts)
        unblock = info.unblock_time()
        if unblock is not None:
            self.polling.wake_later(topic, req.group, queue_id, unblock)
        return dead

    def _order_dead_letter(
        self, pop: _Pop, topic: str, queue_id: int, offset: int, record: bytes
    ) -> bool:
        group = pop.req.group
        try:
            msg, _ = decode_record(record)
        except CorruptionError as exc:
            logger.error("%s:%d offset %d does not decode: %s", topic, queue_id, offset, exc)
            return False
        future = dead_letter(self.host, msg, group)
        if future is None or (future.done() and not future.result().stored):
            return False
        logger.info(
            "FIFO message %s of %s:%d offset %d delivered too often, moved to the DLQ of %s",
            msg.msg_id, topic, queue_id, offset, group,
        )  # fmt: skip
        pop.pending.append(future)
        self.orders.commit_and_next(topic, group, queue_id, offset, pop.pop_time)
        return True

    def _add(
        self,
        pop: _Pop,
        topic: str,
        queue_id: int,
        start: int,
        records: Sequence[bytes],
        offsets: list[int],
        counts: dict[int, int],
    ) -> None:
        flag = retry_flag_of(topic)
        pop.info.add_queue(flag, queue_id, start, offsets)
        relabel = flag != "0" and not self.host.config.pop_response_return_actual_retry_topic
        for record, offset in zip(records, offsets, strict=True):
            if relabel:
                record = self._relabel(pop, record, topic, queue_id, start, offset)
            pop.records.append(record)
            pop.entries.append(PopEntry(topic, queue_id, offset, start, counts.get(offset, -1)))

    def _relabel(
        self, pop: _Pop, record: bytes, topic: str, queue_id: int, start: int, offset: int
    ) -> bytes:
        """A retry-topic record as the client sees it: the original topic, its handle."""
        try:
            msg, _ = decode_record(record)
        except CorruptionError as exc:
            logger.error("retry record %s:%d/%d does not decode: %s", topic, queue_id, offset, exc)
            return record
        msg.topic = pop.req.topic
        handle = ReceiptHandle(
            start, pop.pop_time, pop.req.invisible_time_ms, pop.revive_qid,
            retry_flag_of(topic), self.host.config.broker_name, queue_id, offset,
        )  # fmt: skip
        msg.properties.setdefault(POP_CK, handle.encode())
        return encode_record(msg)


def with_born_time(req: PopRequest, born: int) -> PopRequest:
    """``req`` with ``born_time_ms`` set."""
    return PopRequest(
        req.group, req.topic, req.queue_id, req.max_msg_nums, req.invisible_time_ms,
        req.poll_time_ms, born, req.init_mode, req.expression_type, req.expression, req.order,
        req.attempt_id,
    )  # fmt: skip


async def _stored(futures: list[Future[PutResult]]) -> None:
    """Wait until the store's puts are durable (SYNC_FLUSH); their outcome was logged."""
    for future in futures:
        if not future.done():
            await asyncio.wrap_future(future)
