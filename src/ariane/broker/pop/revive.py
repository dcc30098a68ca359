"""The revive log and the revive service of POP (RocketMQ 5 ``PopReviveService``, the
checkpoint/ack writes of ``PopBufferMergeService`` and ``AckMessageProcessor``).

How it works. Every non-FIFO pop appends a *checkpoint* record (tag ``ck``) to one queue of the
revive topic ``rmq_sys_REVIVE_LOG_<cluster>``; every ack appends an ``ack`` (or ``bAck``)
record naming the checkpoint, to the same queue. The revive service reads each revive queue in
order and keeps the checkpoints it has read, with the offsets acked so far. A checkpoint is
*due* once its revive time (pop time + invisible time) has passed and everything appended to
the revive log before that time has been read (the watermark: the store time of the last record
read, or, when the reader has caught up and the store has dispatched everything, the time the
pass began). For each un-acked offset of a due checkpoint the original message is read back and
a copy is appended to the group's POP retry topic ``%RETRY%<group>_<topic>`` (``+`` with
``enableRetryTopicV2``) queue 0 with ``reconsumeTimes + 1`` and ``1ST_POP_TIME`` (first
retry); the copy keeps body, flags, tags, properties and message id. A message already handed
out ``retryMaxTimes + 1`` times goes to ``%DLQ%<group>`` instead. A copy that cannot be written
is retried later through a new one-message checkpoint (``rp`` + 1) due after a growing
back-off. Checkpoints whose topic or group is gone are dropped; so are fully acked ones.

Progress: the revive group's offset of each revive queue is the position of its oldest
checkpoint still waiting (or the read position when none waits), committed after each pass; a
restart reads again from there and rebuilds the waiting set. A copy written just before a crash
may therefore be written again (at-least-once, like upstream).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from ariane.broker.pop.records import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    AckMsg,
    CheckpointKey,
    PopCheckPoint,
    decode_ack,
)
from ariane.common.message import MessageExt
from ariane.common.pop import REVIVE_GROUP, original_topic, pop_retry_topic, revive_topic
from ariane.common.properties import (
    DELAY,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_ORIGIN_TOPIC,
    FIRST_POP_TIME,
    ORIGIN_MESSAGE_ID,
    RETRY_TOPIC,
    TAGS,
    TIMER_DELIVER_MS,
    UNIQ_KEY,
)
from ariane.common.record import decode_record
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import RETRY_PREFIX, dlq_topic
from ariane.errors import CorruptionError, RemoteProtocolError
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import GetStatus, MessageInner, PutResult, PutStatus

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = [
    "DLQ_PERM",
    "PopReviveService",
    "ReviveLog",
    "ReviveTimer",
    "dead_letter",
]

logger = logging.getLogger(__name__)

#: ``%DLQ%<group>`` is created write-only, as the send-back path creates it.
DLQ_PERM = PERM_WRITE
_RW = PERM_READ | PERM_WRITE
#: ``ackTimeInterval``: a checkpoint is due this long before its acks (timer records).
ACK_TIME_INTERVAL_MS = 1000
#: Re-put back-off by re-put count (s), the last one repeating (``PopReviveService``).
_REPUT_BACKOFF_S = (10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800)
#: With the timer, a checkpoint is revived only once records due this much after it were
#: read (its acks are due 1 s after it, and a slot's records come in any order).
_TIMER_ORDER_MARGIN_MS = 2000
_READ_BATCH = 256
#: Records read per queue per pass, and checkpoints revived per queue per pass.
_MAX_READ_PER_PASS = 8192
_MAX_REVIVE_PER_PASS = 2048


class ReviveTimer(Protocol):
    """The timer wheel, as the revive log uses it."""

    def schedule(self, inner: MessageInner, deliver_ms: int) -> RemotingCommand | None:
        """Park ``inner`` until ``deliver_ms`` (a refusal when it cannot)."""
        ...

    def read_time_ms(self) -> int:
        """Every record due before this time has been delivered."""
        ...


class ReviveLog:
    """Appends checkpoints and acks to the revive topic: as timer messages due at the
    checkpoint's revive time (checkpoints one second earlier than their acks), as upstream
    does, or directly when there is no timer wheel (``timerWheelEnable=false``).

    Args:
        host: the broker.
        timer: the timer wheel, or None.
    """

    def __init__(self, host: BrokerContext, timer: ReviveTimer | None = None) -> None:
        self.host = host
        self.timer = timer

    @property
    def topic(self) -> str:
        """``rmq_sys_REVIVE_LOG_<cluster>``."""
        return revive_topic(self.host.config.broker_cluster_name)

    def queue_of(self, revive_qid: int) -> int:
        """The revive queue a handle's revive queue id maps to (the count may have changed)."""
        n = max(1, self.host.config.revive_queue_num)
        return revive_qid % n if revive_qid >= 0 else 0

    def append_ck(self, ck: PopCheckPoint, revive_qid: int) -> Future[PutResult]:
        """Append a checkpoint (durable per the flush policy when the future completes)."""
        uniq = f"{ck.topic}@{ck.queue_id}@{ck.start_offset}@{ck.group}@{ck.pop_time}@{ck.broker_name}@{CK_TAG}"
        deliver = ck.revive_time - ACK_TIME_INTERVAL_MS
        return self._append(ck.encode(), CK_TAG, revive_qid, uniq, deliver)

    def append_ack(self, ack: AckMsg, revive_qid: int, revive_time: int) -> Future[PutResult]:
        """Append an ack or batch ack of the checkpoint that revives at ``revive_time``."""
        first = ack.offsets[0] if len(ack.offsets) == 1 else list(ack.offsets)
        uniq = (
            f"{ack.topic}@{ack.queue_id}@{first}@{ack.group}@{ack.pop_time}@{ack.broker_name}"
            f"@{ack.tag}"
        )
        return self._append(ack.encode(), ack.tag, revive_qid, uniq, revive_time)

    def _append(
        self, body: bytes, tag: str, revive_qid: int, uniq: str, deliver_ms: int
    ) -> Future[PutResult]:
        host = self.host
        props = {TAGS: tag, UNIQ_KEY: uniq}
        inner = MessageInner(
            self.topic, self.queue_of(revive_qid), body, 0, props, 0, host.clock.now_ms(),
            host.store_host, host.store_host,
        )  # fmt: skip
        if self.timer is not None:
            props[TIMER_DELIVER_MS] = str(deliver_ms)
            refused = self.timer.schedule(inner, deliver_ms)
            if refused is not None:
                future: Future[PutResult] = Future()
                future.set_result(PutResult(PutStatus.MESSAGE_ILLEGAL, remark=refused.remark))
                return future
        return host.store.submit_message(inner)


def dead_letter(
    host: BrokerContext, msg: MessageExt, group: str, origin: str | None = None
) -> Future[PutResult] | None:
    """Store a copy of ``msg`` in ``%DLQ%<group>`` queue 0 (created write-only when missing);
    None when the DLQ may not be written."""
    topic = dlq_topic(group)
    tc = host.topics.create_in_send_back(topic, 1, DLQ_PERM)
    if not tc.perm & PERM_WRITE:
        logger.error("the DLQ %s may not be written: message %s kept", topic, msg.msg_id)
        return None
    origin = origin or original_topic(msg.topic, group)
    props = dict(msg.properties)
    props.pop(DELAY, None)
    props.setdefault(RETRY_TOPIC, origin)
    props.setdefault(ORIGIN_MESSAGE_ID, msg.msg_id)
    props[DLQ_ORIGIN_TOPIC] = origin
    props[DLQ_ORIGIN_MESSAGE_ID] = msg.msg_id
    inner = MessageInner(
        topic, 0, msg.body, msg.flag, props, msg.sys_flag, msg.born_timestamp_ms,
        msg.born_host, host.store_host, msg.reconsume_times + 1,
    )  # fmt: skip
    return host.store.submit_message(inner)


class _Outcome(Enum):
    DONE = "done"
    FAILED = "failed"


@dataclass(slots=True)
class _Waiting:
    """A checkpoint read from the revive log and not revived yet."""

    ck: PopCheckPoint
    position: int
    acked: set[int] = field(default_factory=set)

    def complete(self) -> bool:
        return all(o in self.acked for o in self.ck.offsets())


@dataclass(slots=True)
class _Queue:
    read_offset: int
    waiting: dict[CheckpointKey, _Waiting] = field(default_factory=dict)


class PopReviveService:
    """Revives the un-acked messages of due checkpoints.

    Args:
        host: the broker.
        log: the revive log (its topic is read).
    """

    def __init__(self, host: BrokerContext, log: ReviveLog) -> None:
        self.host = host
        self.log = log
        self._queues: dict[int, _Queue] = {}
        self._task: asyncio.Task[None] | None = None
        self.revived_messages = 0
        self.dead_letters = 0

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Revive every ``reviveInterval`` on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pop-revive")

    async def stop(self) -> None:
        """Stop reviving (the progress is committed after every pass)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(10, self.host.config.revive_interval_ms) / 1000)
            try:
                await self.revive_all()
            except Exception:
                logger.exception("POP revive pass failed")

    @property
    def waiting(self) -> int:
        """Checkpoints read and waiting for their revive time."""
        return sum(len(q.waiting) for q in self._queues.values())

    # -- a pass --------------------------------------------------------------------------------

    async def revive_all(self) -> int:
        """One pass over every revive queue; returns the messages revived."""
        n = 0
        for qid in range(max(1, self.host.config.revive_queue_num)):
            n += await self.revive_queue(qid)
        return n

    def _queue(self, qid: int) -> _Queue:
        q = self._queues.get(qid)
        if q is None:
            host = self.host
            committed = host.offsets.query(REVIVE_GROUP, self.log.topic, qid)
            if committed < 0:
                committed = host.store.get_min_offset_in_queue(self.log.topic, qid)
            q = self._queues[qid] = _Queue(committed)
        return q

    async def revive_queue(self, qid: int) -> int:
        """Read one revive queue on and revive its due checkpoints."""
        q = self._queue(qid)
        watermark = self._scan(qid, q)
        due = sorted(
            (w for w in q.waiting.values() if w.ck.revive_time <= watermark),
            key=lambda w: w.position,
        )[:_MAX_REVIVE_PER_PASS]
        revived = 0
        for w in due:
            revived += await self._revive(w, qid)
            q.waiting.pop(w.ck.key, None)
        position = min((w.position for w in q.waiting.values()), default=q.read_offset)
        if self.host.offsets.query(REVIVE_GROUP, self.log.topic, qid) != position:
            self.host.offsets.commit(REVIVE_GROUP, self.log.topic, qid, position)
        return revived

    def _scan(self, qid: int, q: _Queue) -> int:
        """Read what was appended since the last pass; returns the watermark: every record
        due (timer) or appended (no timer) before it has been read."""
        store = self.host.store
        topic = self.log.topic
        timer = self.log.timer
        started = self.host.clock.now_ms()
        if timer is not None:
            started = min(started, timer.read_time_ms())
        dispatched = store.dispatch_behind_bytes() == 0
        last_read = -1
        read = 0
        while read < _MAX_READ_PER_PASS:
            res = store.get_message(REVIVE_GROUP, topic, qid, q.read_offset, _READ_BATCH)
            if res.status in (
                GetStatus.OFFSET_TOO_SMALL,
                GetStatus.OFFSET_OVERFLOW_BADLY,
                GetStatus.OFFSET_FOUND_NULL,
            ):
                logger.warning(
                    "revive queue %d: offset %d out of range, moved to %d", qid, q.read_offset,
                    res.next_begin_offset,
                )  # fmt: skip
                q.read_offset = res.next_begin_offset
                continue
            if res.status is not GetStatus.FOUND:
                break
            for record, position in zip(res.messages, res.message_queue_offsets, strict=True):
                last_read = self._apply(q, record, position)
            read += len(res.messages)
            q.read_offset = res.next_begin_offset
        if dispatched and q.read_offset >= store.get_max_offset_in_queue(topic, qid):
            return started
        # records are in due order (timer) within a slot's precision: keep a margin
        return last_read - (_TIMER_ORDER_MARGIN_MS if timer is not None else 0)

    def _apply(self, q: _Queue, record: bytes, position: int) -> int:
        """Take one revive record into the waiting set; returns when it was due (timer
        records) or stored."""
        broker = self.host.config.broker_name
        try:
            msg, _ = decode_record(record)
        except CorruptionError as exc:
            logger.error("revive record at %d does not decode: %s", position, exc)
            return -1
        tag = msg.properties.get(TAGS)
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.decode(msg.body, broker)
                if ck.key not in q.waiting:
                    q.waiting[ck.key] = _Waiting(ck, position)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = decode_ack(msg.body, tag == BATCH_ACK_TAG, broker)
                w = q.waiting.get(ack.key)
                if w is not None:
                    w.acked.update(ack.offsets)
                    if w.complete():
                        del q.waiting[ack.key]
        except RemoteProtocolError as exc:
            logger.error("revive record at %d (%s) is not readable: %s", position, tag, exc)
        due = msg.properties.get(TIMER_DELIVER_MS)
        if due is not None and self.log.timer is not None:
            try:
                return min(int(due), msg.store_timestamp_ms)
            except ValueError:
                pass
        return msg.store_timestamp_ms

    # -- reviving ----------------------------------------------------------------------------

    def _alive(self, ck: PopCheckPoint) -> bool:
        host = self.host
        base = original_topic(ck.topic, ck.group)
        return (
            base in host.topics.table
            and ck.topic in host.topics.table
            and host.groups.find(ck.group, create=False) is not None
        )

    async def _revive(self, w: _Waiting, qid: int) -> int:
        ck = w.ck
        if not self._alive(ck):
            logger.info("checkpoint of %s/%s dropped: topic or group is gone", ck.topic, ck.group)
            return 0
        n = 0
        for offset in ck.offsets():
            if offset in w.acked:
                continue
            outcome = await self._revive_message(ck, offset)
            if outcome is _Outcome.FAILED:
                await self._reput(ck, offset, qid)
            else:
                n += 1
        return n

    async def _revive_message(self, ck: PopCheckPoint, offset: int) -> _Outcome:
        host = self.host
        res = host.store.get_message(REVIVE_GROUP, ck.topic, ck.queue_id, offset, 1)
        if res.status is GetStatus.SERVICE_NOT_AVAILABLE:
            return _Outcome.FAILED
        if res.status is not GetStatus.FOUND or res.message_queue_offsets[0] != offset:
            logger.warning(
                "revive: %s:%d offset %d is gone (%s), not retried", ck.topic, ck.queue_id,
                offset, res.status.value,
            )  # fmt: skip
            return _Outcome.DONE
        try:
            msg, _ = decode_record(res.messages[0])
        except CorruptionError as exc:
            logger.error(
                "revive: %s:%d offset %d does not decode: %s", ck.topic, ck.queue_id, offset, exc
            )
            return _Outcome.DONE
        group = host.groups.find(ck.group, create=False)
        max_times = group.retry_max_times if group is not None else 16
        if msg.reconsume_times >= max_times:
            future = dead_letter(host, msg, ck.group, original_topic(ck.topic, ck.group))
            if future is None:
                return _Outcome.FAILED
            self.dead_letters += 1
        else:
            future = host.store.submit_message(self._retry_copy(ck, msg))
        result = future.result() if future.done() else await asyncio.wrap_future(future)
        if not result.stored:
            logger.error(
                "revive: copy of %s:%d offset %d not written (%s), retried later", ck.topic,
                ck.queue_id, offset, result.remark or result.status.value,
            )  # fmt: skip
            return _Outcome.FAILED
        self.revived_messages += 1
        return _Outcome.DONE

    def _retry_copy(self, ck: PopCheckPoint, msg: MessageExt) -> MessageInner:
        host = self.host
        if ck.topic.startswith(RETRY_PREFIX):
            retry = ck.topic
        else:
            retry = pop_retry_topic(ck.topic, ck.group, host.config.enable_retry_topic_v2)
        if retry not in host.topics.table:
            host.topics.create_in_send_back(retry, 1, _RW)
            host.offsets.commit(ck.group, retry, 0, 0)
        props = dict(msg.properties)
        if msg.reconsume_times == 0 or FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(ck.pop_time)
        return MessageInner(
            retry, 0, msg.body, msg.flag, props, msg.sys_flag, msg.born_timestamp_ms,
            host.store_host, host.store_host, msg.reconsume_times + 1,
        )  # fmt: skip

    async def _reput(self, ck: PopCheckPoint, offset: int, qid: int) -> None:
        """Retry one offset later through a new one-message checkpoint."""
        now = self.host.clock.now_ms()
        backoff_s = _REPUT_BACKOFF_S[min(ck.reput_times, len(_REPUT_BACKOFF_S) - 1)]
        new = PopCheckPoint(
            offset, ck.pop_time, max(ck.invisible_time, now + backoff_s * 1000 - ck.pop_time),
            ck.queue_id, ck.topic, ck.group, ck.broker_name, (0,), ck.reput_times + 1,
        )  # fmt: skip
        future = self.log.append_ck(new, qid)
        result = future.result() if future.done() else await asyncio.wrap_future(future)
        if not result.stored:
            logger.error("revive: re-put checkpoint of %s offset %d failed too", ck.topic, offset)
