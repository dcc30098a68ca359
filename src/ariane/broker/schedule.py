"""Delay levels (RocketMQ ``ScheduleMessageService`` and
``HookUtils.transformDelayLevelMessage``).

How it works. A message whose ``DELAY`` property is a level > 0 (sends, the client's retry
sends and CONSUMER_SEND_MSG_BACK alike) is rewritten by :class:`DelayLevelRewriter` just
before the store: the level is clamped to the highest configured one, ``REAL_TOPIC`` and
``REAL_QID`` keep where it was going, and it is stored in ``SCHEDULE_TOPIC_XXXX`` queue
``level - 1``. The store gives each such ConsumeQueue entry the delivery time
(store time + the level's delay) as its tagsCode, so within one queue entries are in delivery
order.

:class:`ScheduleMessageService` (its own thread) walks each level's queue from its progress
offset: entries that are due are read back, rebuilt for their real topic and queue (``DELAY``
removed; ``REAL_TOPIC``/``REAL_QID`` kept, as RocketMQ does; body, flag, other properties,
sysFlag, born time and host, store host and reconsume count unchanged) and appended; the
first entry not yet due stops the level until its time. A delivery time further away than the
level's delay (the clock went back) counts as now. The thread sleeps until the next delivery
time (at most 1 s) and is woken when a new entry arrives.

Progress (level -> next queue offset) is kept in ``<storePathRootDir>/config/delayOffset.json``
(RocketMQ's ``DelayOffsetSerializeWrapper``), written atomically every
``flushDelayOffsetInterval`` when it changed and at shutdown; it only ever covers entries whose
re-put has completed (under SYNC_FLUSH: is flushed).

Guarantee across restarts: every delayed message still in the store is delivered, and a
process crash (SIGKILL) at any moment neither loses nor repeats a delivery. After a restart
the entries between the persisted offset and the end of the queue as it was at start are
checked before their re-put: the index is asked for a record of the real topic with the same
``UNIQ_KEY``, born time and reconsume count stored after the schedule entry; when found, the
entry was delivered before the crash and is skipped. Deliveries are sequential per level, so
the check stops at the first entry that was not delivered. Limits: without the message index
(``messageIndexEnable=false``) or ``UNIQ_KEY`` the check cannot be made and the crash window
(at most ``flushDelayOffsetInterval`` of deliveries) may be delivered twice; an operating
system crash under ASYNC_FLUSH may lose what was not flushed, as for any message.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

from ariane.broker.metadata import MetadataFile
from ariane.common.clock import Clock
from ariane.common.message import MessageExt
from ariane.common.properties import (
    DELAY,
    REAL_QUEUE_ID,
    REAL_TOPIC,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    UNIQ_KEY,
)
from ariane.common.record import decode_record
from ariane.common.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    transaction_value,
)
from ariane.common.topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from ariane.errors import CorruptionError
from ariane.remoting.protocol.admin_bodies import DelayOffsetSerializeWrapper
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import MessageInner, MessageStore, PutResult
from ariane.store.format import CQ_UNIT
from ariane.store.service import ServiceThread

__all__ = ["DELAY_OFFSET_FILE", "DelayLevelRewriter", "ScheduleMessageService"]

logger = logging.getLogger(__name__)

#: Under ``<storePathRootDir>/config``.
DELAY_OFFSET_FILE = "delayOffset.json"

_BLANK_SIZE = 0x7FFFFFFF
#: Longest sleep between rounds (arrivals and stop wake the thread earlier), ms.
_MAX_WAIT_MS = 1000
#: Retry delay after a failed re-put (disk full, store not writeable), ms.
_RETRY_AFTER_MS = 1000
#: Entries handled per batch (one durability wait per batch under SYNC_FLUSH).
_BATCH = 256
_TIMER_KEYS = (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)


def delay_level_of(properties: dict[str, str]) -> int:
    """The ``DELAY`` level of a message; 0 when absent or not a number."""
    raw = properties.get(DELAY)
    if raw is None:
        return 0
    try:
        return int(raw.strip())
    except ValueError:
        return 0


class DelayLevelRewriter:
    """Sends messages with a delay level to ``SCHEDULE_TOPIC_XXXX`` (a ``MessageRewriter``).

    Args:
        max_level: the number of configured delay levels.
    """

    def __init__(self, max_level: int) -> None:
        self.max_level = max_level

    def rewrite(self, inner: MessageInner) -> RemotingCommand | None:
        """Move a delayed message to its level's schedule queue (timer messages without a
        level are the timer hook's, :mod:`ariane.broker.timer`)."""
        tx = transaction_value(inner.sys_flag)
        if tx not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return None
        props = inner.properties
        if DELAY not in props:
            return None
        level = delay_level_of(props)
        if level <= 0:
            return None
        if inner.topic in (SCHEDULE_TOPIC, TRANS_HALF_TOPIC):
            return None
        for key in _TIMER_KEYS:  # RocketMQ: DELAY wins over the timer properties
            props.pop(key, None)
        if level > self.max_level:
            level = self.max_level
            props[DELAY] = str(level)
        props[REAL_TOPIC] = inner.topic
        props[REAL_QUEUE_ID] = str(inner.queue_id)
        inner.properties_string = None
        inner.topic = SCHEDULE_TOPIC
        inner.queue_id = level - 1
        return None


def message_time_up(msg: MessageExt) -> MessageInner | None:
    """``messageTimeUp``: the message to deliver for a due schedule record (None: drop it)."""
    props = dict(msg.properties)
    topic = props.get(REAL_TOPIC)
    try:
        queue_id = int(props.get(REAL_QUEUE_ID, ""))
    except ValueError:
        queue_id = -1
    if not topic or queue_id < 0 or topic == TRANS_HALF_TOPIC:
        return None
    props.pop(DELAY, None)
    return MessageInner(
        topic, queue_id, msg.body, msg.flag, props, msg.sys_flag, msg.born_timestamp_ms,
        msg.born_host, msg.store_host, msg.reconsume_times,
    )  # fmt: skip


class ScheduleMessageService(ServiceThread):
    """Delivers due delayed messages to their real topics.

    Args:
        store: the message store (loaded before :meth:`load` is called).
        levels_ms: delay of each level (level 1 first), ms.
        path: ``delayOffset.json``.
        clock: time source (store timestamps use the same clock).
        persist_interval_ms: returns ``flushDelayOffsetInterval`` (read on every round, so
            run-time config changes apply).
    """

    def __init__(
        self,
        store: MessageStore,
        levels_ms: tuple[int, ...],
        path: str,
        clock: Clock,
        persist_interval_ms: Callable[[], int] = lambda: 10_000,
    ) -> None:
        super().__init__("ScheduleMessageService")
        self.store = store
        self.levels_ms = levels_ms
        self.clock = clock
        self.persist_interval_ms = persist_interval_ms
        self.file = MetadataFile(path, self.encode)
        self.offset_table: dict[int, int] = {}
        self.wrapper = DelayOffsetSerializeWrapper()
        self.delivered = 0
        self.skipped_as_delivered = 0
        self._lock = threading.Lock()
        self._dirty = False
        self._last_persist_ms = clock.now_ms()
        #: level -> entries below this queue offset may have been delivered before a crash
        self._verify: dict[int, int] = {}

    @property
    def max_level(self) -> int:
        """The highest delay level."""
        return len(self.levels_ms)

    # -- persistence -----------------------------------------------------------------------

    def encode(self) -> bytes:
        """``delayOffset.json`` content (and the GET_ALL_DELAY_OFFSET body)."""
        with self._lock:
            return DelayOffsetSerializeWrapper(
                dict(self.offset_table), self.wrapper.data_version
            ).encode()

    def load(self) -> None:
        """Read the persisted progress and prepare the restart check (store loaded first).

        Raises:
            ConfigError: the file exists but does not parse.
        """
        wrapper = self.file.load(DelayOffsetSerializeWrapper.decode, "delay offset")
        if wrapper is not None:
            self.wrapper = wrapper
            self.offset_table = {
                level: max(0, off)
                for level, off in wrapper.offset_table.items()
                if 1 <= level <= self.max_level
            }
        for level in range(1, self.max_level + 1):
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is not None and self.offset_table.get(level, 0) < cq.max_offset_in_queue:
                self._verify[level] = cq.max_offset_in_queue
        for queue_id in self.store.topic_queues().get(SCHEDULE_TOPIC, []):
            if queue_id >= self.max_level:
                logger.warning(
                    "%s queue %d belongs to delay level %d, which messageDelayLevel no longer "
                    "has: its messages are not delivered", SCHEDULE_TOPIC, queue_id, queue_id + 1,
                )  # fmt: skip

    def persist(self) -> None:
        """Write ``delayOffset.json`` now (atomically).

        Raises:
            OSError: the file cannot be written.
        """
        with self._lock:
            self._dirty = False
            self.wrapper.data_version = self.wrapper.data_version.next_version(self.clock.now_ms())
        self.file.write_now()
        self._last_persist_ms = self.clock.now_ms()

    def replace_offsets(self, wrapper: DelayOffsetSerializeWrapper) -> None:
        """Take a master's progress per level (a slave's copy, ``SlaveSynchronize``) and write
        it to ``delayOffset.json`` if it changed."""
        offsets = {
            level: max(0, off)
            for level, off in wrapper.offset_table.items()
            if 1 <= level <= self.max_level
        }
        with self._lock:
            if offsets == self.offset_table:
                return
            self.offset_table = offsets
            self.wrapper = wrapper
            self._dirty = True
        self._persist_if_due(force=True)

    def _persist_if_due(self, force: bool = False) -> None:
        if not self._dirty:
            return
        if not force and self.clock.now_ms() - self._last_persist_ms < self.persist_interval_ms():
            return
        try:
            self.persist()
        except OSError as exc:
            self._dirty = True
            logger.error("cannot write %s: %s", self.file.path, exc)

    def _set_offset(self, level: int, offset: int) -> None:
        with self._lock:
            if self.offset_table.get(level) != offset:
                self.offset_table[level] = offset
                self._dirty = True

    def running_stats(self) -> dict[str, str]:
        """``buildRunningStats``: ``scheduleMessageOffset_<level>`` = "progress,max offset"
        for the broker runtime info."""
        out = {}
        for level in range(1, self.max_level + 1):
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is not None:
                progress = self.offset_table.get(level, 0)
                out[f"scheduleMessageOffset_{level}"] = f"{progress},{cq.max_offset_in_queue}"
        return out

    # -- the thread --------------------------------------------------------------------------

    def run_once(self) -> None:
        wait_ms = self.deliver_due()
        self._persist_if_due()
        if wait_ms is None:
            wait_ms = _MAX_WAIT_MS
        self.wait(min(max(wait_ms, 1), _MAX_WAIT_MS) / 1000.0)

    def on_stop(self) -> None:
        self._persist_if_due(force=True)

    def on_arrival(self) -> None:
        """A new schedule entry was dispatched: look at the queues again now."""
        self.wakeup()

    # -- delivery ------------------------------------------------------------------------------

    def deliver_due(self) -> int | None:
        """Deliver every due message of every level.

        Returns:
            Milliseconds until the next entry is due, None when no entry is waiting.
        """
        soonest: int | None = None
        for level in range(1, self.max_level + 1):
            if self.stopped and self._thread is not None:
                break
            try:
                wait_ms = self._deliver_level(level)
            except Exception:
                logger.exception("delivering delay level %d failed", level)
                wait_ms = _RETRY_AFTER_MS
            if wait_ms is not None and (soonest is None or wait_ms < soonest):
                soonest = wait_ms
        return soonest

    def _start_offset(self, level: int) -> int | None:
        cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return None
        offset = self.offset_table.get(level, 0)
        lo, hi = cq.min_offset_in_queue, cq.max_offset_in_queue
        if offset < lo or offset > hi:
            logger.warning(
                "delay level %d progress %d outside its queue [%d, %d], moved", level, offset,
                lo, hi,
            )  # fmt: skip
            offset = lo if offset < lo else hi
            self._set_offset(level, offset)
        return offset

    def _deliver_level(self, level: int) -> int | None:
        offset = self._start_offset(level)
        if offset is None:
            return None
        cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
        assert cq is not None
        delay_ms = self.levels_ms[level - 1]
        while offset < cq.max_offset_in_queue:
            entries = cq.get_entries(offset, _BATCH)
            if not entries:
                next_file = cq.roll_next_file(offset)
                logger.warning("delay level %d: entries at %d are gone", level, offset)
                self._set_offset(level, min(next_file, cq.max_offset_in_queue))
                return _RETRY_AFTER_MS
            now = self.clock.now_ms()
            pending: list[tuple[int, Future[PutResult]]] = []
            wait_ms: int | None = None
            failed = False
            cursor = offset
            for phys, size, deliver_ms in CQ_UNIT.iter_unpack(entries):
                if size <= 0:
                    break
                if size == _BLANK_SIZE and phys == 0:
                    cursor += 1
                    continue
                if deliver_ms > now + delay_ms:  # the clock went back, or bad data
                    deliver_ms = now
                if deliver_ms > now:
                    wait_ms = deliver_ms - now
                    break
                future = self._deliver_entry(level, cursor, phys, size)
                if future is not None:
                    if future.done() and not future.result().stored:
                        result = future.result()
                        logger.error(
                            "delay level %d: re-put of entry %d failed (%s), retrying",
                            level, cursor, result.remark or result.status.value,
                        )  # fmt: skip
                        failed = True
                        break
                    pending.append((cursor, future))
                cursor += 1
            if cursor == offset and wait_ms is None and not failed:
                logger.error("delay level %d: unreadable entry %d skipped", level, offset)
                cursor += 1  # an invalid entry inside the queue: never loop on it
            offset = self._complete(level, offset, cursor, pending)
            if failed or offset < cursor:
                return _RETRY_AFTER_MS
            if wait_ms is not None:
                return wait_ms
        return None

    def _complete(
        self, level: int, start: int, end: int, pending: list[tuple[int, Future[PutResult]]]
    ) -> int:
        """Wait until the batch's re-puts are durable; advance the progress over them."""
        done = end
        for cursor, future in pending:
            result = future.result()
            if not result.stored:
                logger.error(
                    "delay level %d: re-put of entry %d failed (%s)", level, cursor,
                    result.remark or result.status.value,
                )  # fmt: skip
                done = cursor
                break
            self.delivered += 1
        if done != start:
            self._set_offset(level, done)
        return done

    def _deliver_entry(
        self, level: int, cursor: int, phys: int, size: int
    ) -> Future[PutResult] | None:
        """Re-put one due entry; None when it is skipped (gone, undecodable, delivered)."""
        record = self.store.look_message_by_offset(phys, size)
        if record is None:
            logger.warning("delay level %d: message of entry %d is gone", level, cursor)
            return None
        try:
            msg, _ = decode_record(record)
        except CorruptionError as exc:
            logger.error("delay level %d: entry %d does not decode: %s", level, cursor, exc)
            return None
        inner = message_time_up(msg)
        if inner is None:
            logger.error(
                "delay level %d: entry %d has no usable real topic/queue (%s), dropped",
                level, cursor, msg.properties.get(REAL_TOPIC),
            )  # fmt: skip
            return None
        verify_below = self._verify.get(level)
        if verify_below is not None:
            if cursor < verify_below and self._already_delivered(msg, inner.topic):
                self.skipped_as_delivered += 1
                logger.info(
                    "delay level %d: entry %d was delivered before the restart", level, cursor
                )
                return None
            del self._verify[level]  # deliveries are sequential: later ones were not made
        return self.store.submit_message(inner)

    def _already_delivered(self, msg: MessageExt, real_topic: str) -> bool:
        """Whether the real topic holds this schedule record's delivery (index lookup)."""
        uniq = msg.properties.get(UNIQ_KEY)
        if not uniq or self.store.index is None:
            return False
        found = self.store.query_message(real_topic, uniq, 64, msg.store_timestamp_ms, 1 << 62)
        for record in found.messages:
            try:
                copy, _ = decode_record(record)
            except CorruptionError:
                continue
            if (
                copy.topic == real_topic
                and copy.properties.get(UNIQ_KEY) == uniq
                and DELAY not in copy.properties
                and copy.born_timestamp_ms == msg.born_timestamp_ms
                and copy.reconsume_times == msg.reconsume_times
                and copy.store_timestamp_ms >= msg.store_timestamp_ms
            ):
                return True
        return False
