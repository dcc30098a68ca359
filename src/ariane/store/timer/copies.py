"""The copies the timer wheel delivers, and their writes (RocketMQ ``TimerMessageStore``'s
``convertMessage`` and the put stage of its dequeue pipeline).

How it works. A due timer message is delivered as a *fresh copy* (:func:`delivery`: its real
topic and queue, ``REAL_*`` removed, ``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS`` added, the rest
kept), a rolled one goes back into the timer queue (:func:`roll_copy`).
:meth:`CopyWriter.prepare` validates and encodes a copy ahead of its put: packed whole
(:mod:`ariane.store.record_block`) when the store writes blocks and the copy is read from its
slot, else as a ``PreparedOne``; one the store can never take comes back as the refusal.
:meth:`CopyWriter.write` writes a slot's copies in unit order: the packed ones a block at a
time (``MessageStore.submit_block``, about a microsecond each), the others a group at a time
(``submit_prepared``). A copy the store refuses for a passing reason (not writeable, no new
file) is retried until stored or the wheel stops; one it can never store is dropped with an
error log. Counters and the per-topic waiting counts are kept here.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from ariane.common.message import MessageExt
from ariane.common.properties import (
    REAL_QUEUE_ID,
    REAL_TOPIC,
    TIMER_DEQUEUE_MS,
    TIMER_ENQUEUE_MS,
    TIMER_ROLL_TIMES,
)
from ariane.common.topics import TIMER_TOPIC
from ariane.store.commit_log import PreparedOne
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.record_block import PackedRecord, pack
from ariane.store.results import PutResult, PutStatus

__all__ = ["Copy", "CopyWriter", "TimerStats", "delivery", "roll_copy"]

logger = logging.getLogger(__name__)

#: Put outcomes worth retrying (the store may take the copy later).
_RETRYABLE = frozenset(
    {
        PutStatus.SERVICE_NOT_AVAILABLE,
        PutStatus.CREATE_MAPPED_FILE_FAILED,
        PutStatus.OS_PAGECACHE_BUSY,
        PutStatus.UNKNOWN_ERROR,
    }
)
_RETRY_WAIT_S = 0.5
_by_pos = itemgetter(0)
_topic = itemgetter(1)
_record = itemgetter(2)
_roll = itemgetter(3)


@dataclass(slots=True)
class TimerStats:
    """Counters (since start)."""

    enqueued: int = 0
    delivered: int = 0
    delivered_at_once: int = 0
    rolled: int = 0
    recalled: int = 0
    dropped: int = 0
    skipped_as_delivered: int = 0


#: A delivery ready to store: (its unit's position (delivery order), its topic, its record:
#: packed whole, prepared, or why it cannot be stored; whether it rolls back into the timer
#: topic, the key a recall marker would name). A plain tuple: a packed copy holds atomic values
#: only, so the garbage collector stops tracking the 100,000 copies a burst holds ahead.
Copy = tuple[int, str, PackedRecord | PreparedOne | PutResult, bool, str]


def _packed(copy: Copy) -> bool:
    return type(copy[2]) is tuple


def _all_packed(copies: list[Copy]) -> bool:
    """Whether every copy is packed whole (C-level: no Python call per copy)."""
    return set(map(type, map(_record, copies))) == {tuple}


class CopyWriter:
    """Prepares and stores the wheel's copies.

    Args:
        store: the message store.
        stats: the wheel's counters (updated here).
        waiting: real topic -> timer messages not delivered yet (decremented here).
        stopping: whether the wheel is stopping (a retry loop gives up then).
    """

    def __init__(
        self,
        store: MessageStore,
        stats: TimerStats,
        waiting: dict[str, int],
        stopping: Callable[[], bool],
    ) -> None:
        self.store = store
        self.stats = stats
        self.waiting = waiting
        self.stopping = stopping
        self.blocks = store.writes_blocks

    def prepare(self, inner: MessageInner, packed: bool) -> PackedRecord | PreparedOne | PutResult:
        """The copy's record, packed whole when ``packed`` and the store writes blocks."""
        prepared = self.store.prepare_message(inner)
        if packed and self.blocks and type(prepared) is PreparedOne:
            return pack(prepared) or prepared
        return prepared

    def write(self, copies: list[Copy], recalled: set[str], *, at_once: bool) -> bool:
        """Store ``copies`` in unit order (recalled ones skipped); False when stopped before
        all were stored."""
        if len(copies) > 1:
            copies = sorted(copies, key=_by_pos)
        if not recalled and self.blocks and _all_packed(copies):
            return self._block(copies, at_once)  # a read-ahead slot: one block, no per-copy step
        ready: list[Copy] = []
        for copy in copies:
            _pos, topic, prepared, roll, recall = copy
            if not roll and recall in recalled:
                self.stats.recalled += 1
            elif type(prepared) is PutResult:
                self.refused(topic, prepared)
            else:
                ready.append(copy)
        for packed, group in groupby(ready, key=_packed):
            run = list(group)
            if not (self._block(run, at_once) if packed else self._group(run, at_once)):
                return False
        return True

    def _block(self, copies: list[Copy], at_once: bool) -> bool:
        recs: list[PackedRecord] = list(map(_record, copies))
        while True:
            stored, refusal, durable = self.store.submit_block(recs)
            self.count(copies[:stored], at_once)
            durable.result()  # the flush policy covers the slot (SYNC_FLUSH)
            if refusal is None:
                return True
            copies, recs = copies[stored:], recs[stored:]
            if refusal.status not in _RETRYABLE:
                for copy in copies:
                    self.refused(copy[1], refusal)
                return True
            if not self._wait_retry(copies[0][1], refusal):
                return False

    def _group(self, copies: list[Copy], at_once: bool) -> bool:
        ones: list[PreparedOne] = [c[2] for c in copies]  # type: ignore[misc]
        results, durable = self.store.submit_prepared(ones)
        for one, copy, result in zip(ones, copies, results, strict=True):
            if not result.stored and not self._retry(one.msg, result):
                return False
            self.count([copy], at_once)
        durable.result()  # the flush policy covers the slot (SYNC_FLUSH)
        return True

    def count(self, copies: list[Copy], at_once: bool) -> None:
        """Count ``copies`` as stored."""
        stats = self.stats
        topics = Counter(map(_topic, copies))
        stats.rolled += sum(map(_roll, copies))
        delivered = 0
        for topic, n in topics.items():
            if topic == TIMER_TOPIC:
                continue
            delivered += n
            left = self.waiting.get(topic, 0) - n
            if left > 0:
                self.waiting[topic] = left
            else:
                self.waiting.pop(topic, None)
        if at_once:
            stats.delivered_at_once += delivered
        else:
            stats.delivered += delivered

    def refused(self, topic: str, result: PutResult) -> None:
        """Drop a copy the store refused for good."""
        logger.error(
            "timer: copy for %s refused (%s), dropped", topic,
            result.remark or result.status.value,
        )  # fmt: skip
        self.stats.dropped += 1

    def _wait_retry(self, topic: str, result: PutResult) -> bool:
        """Wait before storing again after a passing refusal; False when stopping."""
        logger.warning("timer: copy for %s not stored (%s), retrying", topic, result.status.value)
        if self.stopping():
            return False
        time.sleep(_RETRY_WAIT_S)
        return True

    def _retry(self, inner: MessageInner, result: PutResult) -> bool:
        """Retry a copy refused for a passing reason until stored (or stopping); one refused
        for good is dropped. False when stopping."""
        while not result.stored:
            if result.status not in _RETRYABLE:
                self.refused(inner.topic, result)
                return True
            if not self._wait_retry(inner.topic, result):
                return False
            result = self.store.submit_message(inner).result()
        return True


def delivery(msg: MessageExt, enqueue_ms: str, now: int) -> MessageInner | None:
    """``convertMessage``: the copy for the real topic and queue."""
    props = dict(msg.properties)
    topic = props.pop(REAL_TOPIC, None)
    try:
        queue_id = int(props.pop(REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
    if not topic:
        return None
    props[TIMER_ENQUEUE_MS] = enqueue_ms
    props[TIMER_DEQUEUE_MS] = str(now)
    return MessageInner(
        topic, max(0, queue_id), msg.body, msg.flag, props, msg.sys_flag,
        msg.born_timestamp_ms, msg.born_host, msg.store_host, msg.reconsume_times,
    )  # fmt: skip


def roll_copy(msg: MessageExt, enqueue_ms: str, now: int) -> MessageInner:
    """A rolled message back into the timer queue (re-read and re-timed from there)."""
    props = dict(msg.properties)
    try:
        rolls = int(props.get(TIMER_ROLL_TIMES, "0")) + 1
    except ValueError:
        rolls = 1
    props[TIMER_ROLL_TIMES] = str(rolls)
    props[TIMER_ENQUEUE_MS] = enqueue_ms
    props[TIMER_DEQUEUE_MS] = str(now)
    return MessageInner(
        TIMER_TOPIC, 0, msg.body, msg.flag, props, msg.sys_flag, msg.born_timestamp_ms,
        msg.born_host, msg.store_host, msg.reconsume_times,
    )  # fmt: skip
