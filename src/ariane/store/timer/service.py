"""Timer messages: the wheel's enqueue and dequeue (RocketMQ 5 ``TimerMessageStore``).

How it works. A message with a future delivery time was stored (by the broker's send hook,
:mod:`ariane.broker.timer`) in ``rmq_sys_wheel_timer`` queue 0, with its due slot time in
``TIMER_OUT_MS`` and its destination in ``REAL_TOPIC``/``REAL_QID``. One thread
(:class:`TimerMessageStore`) loops:

* **enqueue**: read that queue on from the last entry taken; for each message append a 52-byte
  unit (its CommitLog offset and size, the slot) to the timer log and link it into its wheel
  slot (the slot's latest unit). A due time more than the roll window (``timerRollWindowSlot``
  slots, 48 h at P = 1 s) ahead goes to a nearer slot marked ROLL instead. A message whose slot
  was already read is delivered at once.
* **dequeue**: while the wheel's read time is behind the write time (``floor(now / P) * P``),
  read the slot at the read time: walk its units back through ``prevPos``, collect the recall
  markers (``TIMER_DEL_UNIQKEY``), and write a *fresh copy* of every other message into its real
  topic and queue (``REAL_*`` removed, ``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS`` added, body,
  flags, ``UNIQ_KEY`` and the other properties kept; ``TIMER_OUT_MS`` stays, so the copy is never
  timed again), or for a ROLL unit back into the timer topic (``TIMER_ROLL_TIMES`` + 1). Only
  when every copy of the slot is stored does the read time move on by P. A copy that the store
  refuses for a passing reason (not writeable, busy) is retried until it is stored; one it can
  never store (illegal) is dropped with an error log. Delivery is therefore at the first P
  boundary at or after the requested time, plus the loop's latency, never early.
* **read ahead**: the slots due within the next 10 s are read before their boundary, a few
  thousand units per pass: their messages decoded, recall markers collected and the copies'
  records packed whole (:mod:`ariane.store.timer.copies`, :mod:`ariane.store.record_block`;
  ``TIMER_DEQUEUE_MS`` is then the boundary). Units that reach such a slot later are read at the
  boundary, and recall markers apply to read-ahead copies too. At the boundary only the writes
  remain: the copies go to the CommitLog in unit order, thousands per hold of the put lock in
  one copy each (``MessageStore.submit_block``), so a burst of 100,000 timers due in one second
  is written in well under a second instead of being decoded and encoded one by one after it.
  The copies held ahead are plain tuples of atomic values, which the garbage collector stops
  tracking (100,000 tracked objects made every full collection cost hundreds of ms). Nothing is
  written ahead: a stop before the boundary leaves nothing to undo.

Files (byte layouts in :mod:`ariane.store.timer.format`): the wheel and the checkpoint are
mapped and written in place; progress (read time, timer-queue offset) is written into the
checkpoint after every slot and every enqueue round and made durable with the timer log and
the wheel every ``timerFlushIntervalMs``.

Restarts. ``load`` replays the timer log from the last durable position, re-linking each
unit into its slot and cutting the log at the first damaged unit; the timer queue is enqueued
again from the newest of the checkpoint's offset and the last unit's message. Slots between the
read time and now are read at once. Nothing is lost, and nothing is delivered twice: the slot
that was being read when the broker stopped (after a crash, every slot since the last durable
checkpoint) is read with a check of the message index: a message whose copy is already in its
real topic (same ``UNIQ_KEY``, same ``TIMER_OUT_MS``, stored after it) is skipped. Without the
index (``messageIndexEnable=false``) that window may be delivered twice. A broker down longer
than the wheel's span (7 days at P = 1 s) loses the timers of the slots it skipped, as upstream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ariane.common.clock import Clock
from ariane.common.message import MessageExt
from ariane.common.properties import (
    REAL_TOPIC,
    TIMER_DEL_UNIQKEY,
    TIMER_OUT_MS,
    TIMER_ROLL_TIMES,
    UNIQ_KEY,
)
from ariane.common.record import decode_record, record_properties
from ariane.common.topics import TIMER_TOPIC
from ariane.errors import CorruptionError
from ariane.store.config import StoreConfig
from ariane.store.format import CQ_UNIT
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.service import ServiceThread
from ariane.store.timer.copies import Copy, CopyWriter, TimerStats, delivery, roll_copy
from ariane.store.timer.files import TimerCheckpointFile, TimerLog, TimerWheel
from ariane.store.timer.format import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    SLOTS_TOTAL,
    TIMER_BLANK_SLOTS,
    Checkpoint,
    Unit,
    java_string_hash,
)

__all__ = ["TimerMessageStore", "TimerStats"]

logger = logging.getLogger(__name__)

_BLANK_SIZE = 0x7FFFFFFF
#: ``Long.MAX_VALUE``: ``TIMER_ENQUEUE_MS`` of a message that was due when it was enqueued.
_NEVER_ENQUEUED = str(2**63 - 1)
_ENQUEUE_BATCH = 1024
#: Slots due within this time are read ahead of their boundary (see the module docs).
_AHEAD_MS = 10_000
#: Copies held ready at most (all slots); the rest are made at the boundary.
_AHEAD_MAX = 150_000
#: Bytes of messages (CommitLog records) held ready at most.
_AHEAD_MAX_BYTES = 64 * 1024 * 1024
#: Units read ahead per pass (the thread comes back at once while there are more).
_AHEAD_PER_PASS = 4096
#: seconds the timer TPS keys of GET_BROKER_RUNTIME_INFO average over
_RATE_WINDOW_S = 10


@dataclass(slots=True)
class _Ahead:
    """What was read of one slot before its boundary: units above ``top`` are new; units
    from ``resume`` down through ``prev_pos`` are still to read (-1: none)."""

    top: int
    resume: int
    size: int = 0
    copies: list[Copy] = field(default_factory=list)
    recalled: set[str] = field(default_factory=set)


class TimerMessageStore(ServiceThread):
    """The timer wheel of one store.

    Args:
        store: the message store (loaded before :meth:`load`).
        config: the store configuration (``timer*`` fields).
        clock: time source (tests drive a manual clock and call :meth:`run_pass`).
    """

    def __init__(self, store: MessageStore, config: StoreConfig, clock: Clock) -> None:
        super().__init__("TimerMessageStore")
        self.store = store
        self.config = config
        self.clock = clock
        self.precision_ms = config.timer_precision_ms
        roll = config.timer_roll_window_slot
        if roll < 2 or roll > SLOTS_TOTAL - TIMER_BLANK_SLOTS:
            roll = SLOTS_TOTAL - TIMER_BLANK_SLOTS
        self.roll_window_ms = roll * self.precision_ms
        self._roll_half_ms = roll // 2 * self.precision_ms
        self._roll_third_ms = roll // 3 * self.precision_ms
        self.wheel: TimerWheel | None = None
        self.log: TimerLog | None = None
        self.checkpoint: TimerCheckpointFile | None = None
        self.read_time_ms = 0
        self.write_time_ms = 0
        self.queue_offset = 0
        self.stats = TimerStats()
        self._rate_samples: deque[tuple[int, int, int]] = deque(maxlen=_RATE_WINDOW_S + 1)
        #: slots (and at-once deliveries) before this time are checked against the index
        self.verify_before_ms = 0
        self._last_flush = 0.0
        self._backlog = False
        #: real topic -> timer messages enqueued and not delivered yet (since start)
        self._waiting: dict[str, int] = {}
        #: slot time -> what was read of it ahead of its boundary
        self._ahead: dict[int, _Ahead] = {}
        self._ahead_count = 0
        self._ahead_bytes = 0
        self._ahead_more = False
        self._lock = threading.RLock()
        self._loaded = False
        self._writer = CopyWriter(store, self.stats, self._waiting, self._stopping)

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self) -> None:
        """Open the files and recover (see the module docs).

        Raises:
            CorruptionError: the wheel or checkpoint file has a wrong size.
            OSError: a file cannot be opened.
        """
        cfg = self.config
        p = self.precision_ms
        self.wheel = TimerWheel(cfg.timer_wheel_path, p)
        self.log = TimerLog(cfg.timer_log_dir, cfg.mapped_file_size_timer_log)
        self.log.load()
        self.checkpoint = TimerCheckpointFile(cfg.timer_checkpoint_path)
        cp = self.checkpoint.read()
        size = cfg.mapped_file_size_timer_log
        start = max(0, cp.last_timer_log_flush_pos - size)
        start -= start % size
        units: list[tuple[int, Unit]] = []
        end = self.log.recover(start, units)
        for pos, unit in units:
            self.wheel.revise(unit.slot_time_ms, pos)
        now = self.clock.now_ms()
        floor_now = now // p * p
        read = cp.last_read_time_ms if cp.last_read_time_ms > 0 else floor_now
        oldest = floor_now - (SLOTS_TOTAL - TIMER_BLANK_SLOTS) * p
        if read < oldest:
            logger.error(
                "timer: the broker was down longer than the wheel's span; slots before %d are "
                "skipped", oldest,
            )  # fmt: skip
            read = oldest
        self.read_time_ms = read // p * p
        self.write_time_ms = max(floor_now, self.read_time_ms)
        self.queue_offset = max(cp.last_timer_queue_offset, self._queue_offset_after(units))
        abnormal = not self.store.last_exit_ok
        window = cfg.timer_flush_interval_ms + 2 * p if abnormal else p
        self.verify_before_ms = self.read_time_ms + window
        self._write_checkpoint(end)
        self._loaded = True
        logger.info(
            "timer: read time %d, queue offset %d, log end %d, %d units replayed",
            self.read_time_ms, self.queue_offset, end, len(units),
        )  # fmt: skip

    def _queue_offset_after(self, units: list[tuple[int, Unit]]) -> int:
        """One past the timer-queue offset of the newest unit's message (0 when none)."""
        for _pos, unit in reversed(units):
            record = self.store.look_message_by_offset(unit.commit_log_offset, unit.size)
            if record is None:
                continue
            try:
                msg, _ = decode_record(record)
            except CorruptionError:
                continue
            if msg.topic == TIMER_TOPIC:
                return msg.queue_offset + 1
        return 0

    @property
    def loaded(self) -> bool:
        """Whether the files are open (``load`` done, ``shutdown`` not yet)."""
        return self._loaded

    def run_once(self) -> None:
        self.run_pass()
        self._flush_if_due()
        if self._backlog or self._ahead_more:
            return  # more of the timer queue to enqueue, or to read ahead: no sleep
        p = self.precision_ms
        now = self.clock.now_ms()
        until_next = (now // p + 1) * p - now
        self.wait(max(0.001, min(until_next, p) / 1000.0))

    def on_stop(self) -> None:
        self.flush()

    def shutdown(self) -> None:
        """Stop the thread (if started), flush and close the files."""
        if self._thread is not None:
            self.stop()
            self._thread = None
        elif self._loaded:
            self.flush()
        with self._lock:
            for closable in (self.wheel, self.checkpoint):
                if closable is not None:
                    closable.close()
            if self.log is not None:
                self.log.shutdown()
            self._ahead.clear()
            self._ahead_count = 0
            self._ahead_bytes = 0
            self._loaded = False

    def on_arrival(self) -> None:
        """A message reached the timer queue: enqueue it now."""
        self.wakeup()

    # -- one pass ------------------------------------------------------------------------------

    def run_pass(self) -> int:
        """Enqueue what arrived and deliver the due slots; returns messages delivered."""
        with self._lock:
            if not self._loaded:
                return 0
            now = self.clock.now_ms()
            p = self.precision_ms
            self.write_time_ms = max(self.write_time_ms, now // p * p)
            before = self.stats.delivered + self.stats.delivered_at_once
            self._sample_rates(now)
            self.enqueue()
            self.dequeue()
            self.read_ahead()
            return self.stats.delivered + self.stats.delivered_at_once - before

    def enqueue(self) -> int:
        """Take the timer queue's new messages into the wheel; returns how many."""
        cq = self.store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return 0
        offset = max(self.queue_offset, cq.min_offset_in_queue)
        taken = 0
        self._backlog = False
        while offset < cq.max_offset_in_queue:
            if taken >= _ENQUEUE_BATCH * 8:  # deliver due slots in between
                self._backlog = True
                break
            entries = cq.get_entries(offset, _ENQUEUE_BATCH)
            if not entries:
                offset = min(cq.roll_next_file(offset), cq.max_offset_in_queue)
                continue
            for phys, size, _tags in CQ_UNIT.iter_unpack(entries):
                if not (size == _BLANK_SIZE and phys == 0):
                    self._enqueue_one(offset, phys, size)
                    taken += 1
                offset += 1
            self.queue_offset = offset
        self.queue_offset = offset
        self._write_checkpoint()
        return taken

    def _enqueue_one(self, offset: int, phys: int, size: int) -> None:
        record = self.store.look_message_by_offset(phys, size)
        if record is None:
            logger.warning("timer: message of timer-queue offset %d is gone", offset)
            self.stats.dropped += 1
            return
        try:
            props = record_properties(record)
            slot = int(props[TIMER_OUT_MS])
        except (CorruptionError, KeyError, ValueError) as exc:
            logger.error("timer: timer-queue offset %d has no usable TIMER_OUT_MS: %s", offset, exc)
            self.stats.dropped += 1
            return
        if slot < self.read_time_ms:  # its slot was read already: due now
            self._deliver_at_once(phys, size, slot)
            return
        self._append_unit(phys, size, slot, props)
        self.stats.enqueued += 1
        real = props.get(REAL_TOPIC)
        if real and TIMER_DEL_UNIQKEY not in props:
            self._waiting[real] = self._waiting.get(real, 0) + 1

    def _append_unit(self, phys: int, size: int, slot: int, props: dict[str, str]) -> None:
        """``doEnqueue``: a unit into the timer log, linked into its slot (or a roll slot)."""
        wheel, log = self.wheel, self.log
        assert wheel is not None
        assert log is not None
        w = self.write_time_ms
        magic = MAGIC_DEFAULT
        if slot - w >= self.roll_window_ms:
            magic |= MAGIC_ROLL
            if slot - w - self.roll_window_ms < self._roll_third_ms:
                slot = w + self._roll_half_ms
            else:
                slot = w + self.roll_window_ms
        delete = TIMER_DEL_UNIQKEY in props
        if delete:
            magic |= MAGIC_DELETE
        real = props.get(REAL_TOPIC)
        current = wheel.get_slot(slot)
        unit = Unit(
            current.last_pos, magic, w, slot - w, phys, size,
            java_string_hash(real) if real else 0,
        )  # fmt: skip
        pos = log.append(unit)
        first = current.first_pos if current.first_pos >= 0 else pos
        wheel.put_slot(slot, first, pos, current.num + (-1 if delete else 1), current.magic)

    def dequeue(self) -> int:
        """Deliver every slot before the write time; returns the slots read."""
        wheel = self.wheel
        assert wheel is not None
        p = self.precision_ms
        read = 0
        while self.read_time_ms < self.write_time_ms:
            if self.stopped and self._thread is not None:
                break
            t = self.read_time_ms
            slot = wheel.get_slot(t)
            if slot.time_ms >= 0 and slot.last_pos >= 0 and not self._read_slot(t, slot.last_pos):
                break  # stopping in the middle of a slot: read it again after the restart
            self.read_time_ms = t + p
            self._write_checkpoint()
            read += 1
        return read

    # -- reading a slot ------------------------------------------------------------------------

    def _chain(
        self,
        last_pos: int,
        stop: int = -1,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> tuple[list[tuple[int, Unit]], int]:
        """The units from ``last_pos`` back through ``prevPos`` while above ``stop`` (at most
        ``limit`` of them, of at most ``max_bytes`` messages), newest first, and the position
        to go on from (-1: the chain ended, or is damaged)."""
        log = self.log
        assert log is not None
        units: list[tuple[int, Unit]] = []
        pos = last_pos
        total = 0
        while pos > stop:
            if limit is not None and len(units) >= limit:
                break
            unit = log.read(pos)
            if unit is None:
                logger.error("timer: unit at %d is missing; the rest of its slot is lost", pos)
                return units, -1
            if max_bytes is not None and total + unit.size > max_bytes:
                break
            total += unit.size
            units.append((pos, unit))
            if unit.prev_pos >= pos:  # never loop on a damaged chain
                return units, -1
            pos = unit.prev_pos
        return units, pos

    def _take_units(
        self,
        ahead: _Ahead,
        t: int,
        last_pos: int,
        dequeue_ms: int,
        budget: int | None,
        max_bytes: int | None = None,
    ) -> int:
        """Read ``ahead``'s slot further: its new units (above ``top``), then up to
        ``budget`` units (``max_bytes`` of messages) of the older ones still unread (all when
        None). Returns the units read."""
        new: list[tuple[int, Unit]] = []
        if last_pos > ahead.top:
            new, _ = self._chain(last_pos, ahead.top)
        new_bytes = sum(unit.size for _, unit in new)
        if max_bytes is not None and new_bytes > max_bytes:
            return 0  # no room now: later, or at the boundary
        ahead.top = max(ahead.top, last_pos)
        left = None if budget is None else max(0, budget - len(new))
        left_bytes = None if max_bytes is None else max_bytes - new_bytes
        old: list[tuple[int, Unit]] = []
        if ahead.resume >= 0 and left != 0 and left_bytes != 0:
            old, ahead.resume = self._chain(ahead.resume, -1, left, left_bytes)
        normal: list[tuple[int, Unit | None, int, int, int]] = []
        for pos, unit in new + old:
            ahead.size += unit.size
            if unit.is_delete and not unit.is_roll:
                key = self._recall_key(unit)
                if key is not None:
                    ahead.recalled.add(key)
            else:
                normal.append((pos, unit, unit.commit_log_offset, unit.size, t))
        ahead.copies += self._copies(normal, dequeue_ms)
        return len(new) + len(old)

    def _forget(self, ahead: _Ahead) -> None:
        self._ahead_count -= len(ahead.copies)
        self._ahead_bytes -= ahead.size

    def _read_slot(self, t: int, last_pos: int) -> bool:
        ahead = self._ahead.pop(t, None)
        if ahead is None:
            ahead = _Ahead(top=last_pos, resume=last_pos)
            dequeue_ms = self.clock.now_ms()
        else:
            self._forget(ahead)
            dequeue_ms = t + self.precision_ms
        self._take_units(ahead, t, last_pos, dequeue_ms, None)
        return self._writer.write(ahead.copies, ahead.recalled, at_once=False)

    def read_ahead(self) -> int:
        """Read the slots due within ``_AHEAD_MS`` before their boundary: decode their
        messages and prepare the copies' records, so that at the boundary only the writes
        remain (at most ``_AHEAD_MAX`` copies, ``_AHEAD_MAX_BYTES`` of messages, held).
        Nothing is written; returns the units read."""
        self._ahead_more = False
        wheel = self.wheel
        if wheel is None:
            return 0
        p = self.precision_ms
        for stale in [t for t in self._ahead if t < self.read_time_ms]:
            self._forget(self._ahead.pop(stale))
        # slots read right after a restart check the index per message: not ahead
        start = max(self.read_time_ms, -(-self.verify_before_ms // p) * p)
        end = self.write_time_ms + max(_AHEAD_MS, p)
        budget = _AHEAD_PER_PASS
        read = 0
        t = start
        while t < end and budget > 0 and self._ahead_count < _AHEAD_MAX:
            room = _AHEAD_MAX_BYTES - self._ahead_bytes
            if room <= 0:
                break
            slot = wheel.get_slot(t)
            if slot.time_ms >= 0 and slot.last_pos >= 0:
                ahead = self._ahead.get(t)
                if ahead is None:
                    ahead = self._ahead[t] = _Ahead(top=slot.last_pos, resume=slot.last_pos)
                if slot.last_pos > ahead.top or ahead.resume >= 0:
                    count, size = len(ahead.copies), ahead.size
                    n = self._take_units(ahead, t, slot.last_pos, t + p, budget, room)
                    self._ahead_count += len(ahead.copies) - count
                    self._ahead_bytes += ahead.size - size
                    budget -= n
                    read += n
            t += p
        self._ahead_more = budget <= 0
        return read

    def _recall_key(self, unit: Unit) -> str | None:
        record = self.store.look_message_by_offset(unit.commit_log_offset, unit.size)
        if record is None:
            return None
        try:
            return record_properties(record).get(TIMER_DEL_UNIQKEY)
        except CorruptionError:
            return None

    def _copies(
        self, items: list[tuple[int, Unit | None, int, int, int]], dequeue_ms: int
    ) -> list[Copy]:
        """Read and decode ``items`` (unit position, unit, CommitLog offset, size, slot) and
        prepare their copies (``TIMER_DEQUEUE_MS`` = ``dequeue_ms``); those read from a slot
        (with a unit) are packed whole for a block write."""
        copies: list[Copy] = []
        for pos, unit, phys, size, slot in items:
            record = self.store.look_message_by_offset(phys, size)
            if record is None:
                logger.warning("timer: message at %d is gone (CommitLog cleaned up)", phys)
                self.stats.dropped += 1
                continue
            try:
                msg, _ = decode_record(record)
            except CorruptionError as exc:
                logger.error("timer: message at %d does not decode: %s", phys, exc)
                self.stats.dropped += 1
                continue
            roll = unit is not None and unit.is_roll
            if TIMER_DEL_UNIQKEY in msg.properties and not roll:
                continue  # a recall marker whose target slot was read already
            enqueue_ms = _NEVER_ENQUEUED if unit is None else str(unit.enqueue_time_ms)
            if roll:
                inner: MessageInner | None = roll_copy(msg, enqueue_ms, dequeue_ms)
            else:
                inner = delivery(msg, enqueue_ms, dequeue_ms)
            if inner is None:
                logger.error("timer: message at %d has no real topic, dropped", phys)
                self.stats.dropped += 1
                continue
            if slot < self.verify_before_ms and self._already_stored(msg, inner, roll):
                self.stats.skipped_as_delivered += 1
                continue
            prepared = self._writer.prepare(inner, unit is not None)
            copies.append((pos, inner.topic, prepared, roll, self._recall_of(msg)))
        return copies

    def _deliver_at_once(self, phys: int, size: int, slot: int) -> None:
        copies = self._copies([(-1, None, phys, size, slot)], self.clock.now_ms())
        self._writer.write(copies, set(), at_once=True)

    def _stopping(self) -> bool:
        return self.stopped and self._thread is not None

    @staticmethod
    def _recall_of(msg: MessageExt) -> str:
        return f"{msg.properties.get(REAL_TOPIC, '')}+{msg.properties.get(UNIQ_KEY, '')}"

    def _already_stored(self, msg: MessageExt, copy: MessageInner, roll: bool) -> bool:
        """Whether the copy was stored before a restart (index lookup)."""
        uniq = msg.properties.get(UNIQ_KEY)
        if not uniq or self.store.index is None:
            return False
        found = self.store.query_message(copy.topic, uniq, 64, msg.store_timestamp_ms, 1 << 62)
        out_ms = msg.properties.get(TIMER_OUT_MS)
        rolls = copy.properties.get(TIMER_ROLL_TIMES)
        for record in found.messages:
            try:
                other, _ = decode_record(record)
            except CorruptionError:
                continue
            if (
                other.commit_log_offset != msg.commit_log_offset
                and other.topic == copy.topic
                and other.properties.get(UNIQ_KEY) == uniq
                and other.properties.get(TIMER_OUT_MS) == out_ms
                and other.store_timestamp_ms >= msg.store_timestamp_ms
                and (not roll or other.properties.get(TIMER_ROLL_TIMES) == rolls)
            ):
                return True
        return False

    # -- progress ------------------------------------------------------------------------------

    def _write_checkpoint(self, flushed_log: int | None = None) -> None:
        cp_file = self.checkpoint
        if cp_file is None:
            return
        old = cp_file.read()
        log_pos = old.last_timer_log_flush_pos if flushed_log is None else flushed_log
        cp_file.write(
            Checkpoint(
                self.read_time_ms,
                log_pos,
                self.queue_offset,
                self.queue_offset,
                old.state_version,
                self.clock.now_ms(),
                old.counter + 1,
            )
        )

    def _flush_if_due(self) -> None:
        mono = time.monotonic()
        if (mono - self._last_flush) * 1000 >= self.config.timer_flush_interval_ms:
            self._last_flush = mono
            self.flush()

    def flush(self) -> None:
        """Make the timer log, the wheel and then the checkpoint durable."""
        with self._lock:
            if not self._loaded:
                return
            assert self.log is not None
            assert self.wheel is not None
            assert self.checkpoint
            flushed = self.log.flush()
            self.wheel.flush()
            self._write_checkpoint(flushed)
            self.checkpoint.flush()

    # -- views ---------------------------------------------------------------------------------

    def waiting_by_topic(self) -> dict[str, int]:
        """Timer messages waiting per real topic (counted since this store started)."""
        with self._lock:
            return dict(self._waiting)

    def checkpoint_bytes(self) -> bytes:
        """GET_TIMER_CHECK_POINT's body."""
        with self._lock:
            if self.checkpoint is None:
                return Checkpoint().pack()
            return self.checkpoint.read().pack()

    def _sample_rates(self, now_ms: int) -> None:
        """Keep one (time, enqueued, delivered) sample per second of the last
        ``_RATE_WINDOW_S`` seconds, for the TPS keys of :meth:`runtime_info`."""
        samples = self._rate_samples
        if samples and now_ms - samples[-1][0] < 1000:
            return
        stats = self.stats
        samples.append((now_ms, stats.enqueued, stats.delivered + stats.delivered_at_once))

    def runtime_info(self) -> dict[str, str]:
        """The timer keys of GET_BROKER_RUNTIME_INFO (RocketMQ ``prepareRuntimeInfo``):
        ``timerReadBehind`` (seconds the read time trails now), ``timerOffsetBehind``
        (timer-queue messages not yet in the wheel), ``timerCongestNum`` (timers whose slot
        is due but not yet delivered: RocketMQ counts every pending timer by walking the
        whole wheel, 1.2 million slots, too slow to do per request here), and
        ``timerEnqueueTps`` / ``timerDequeueTps`` over the last ten seconds."""
        with self._lock:
            now = self.clock.now_ms()
            cq = self.store.get_consume_queue(TIMER_TOPIC, 0)
            behind = (cq.max_offset_in_queue if cq is not None else 0) - self.queue_offset
            congest = 0
            if self._loaded and self.wheel is not None:
                due_end = now // self.precision_ms * self.precision_ms
                congest = self.wheel.units_behind(self.read_time_ms, due_end)
            self._sample_rates(now)
            enqueue_tps = dequeue_tps = 0.0
            first, last = self._rate_samples[0], self._rate_samples[-1]
            if last[0] > first[0]:
                seconds = (last[0] - first[0]) / 1000
                enqueue_tps = (last[1] - first[1]) / seconds
                dequeue_tps = (last[2] - first[2]) / seconds
            return {
                "timerReadBehind": str(max(0, now - self.read_time_ms) // 1000),
                "timerOffsetBehind": str(max(0, behind)),
                "timerCongestNum": str(congest),
                "timerEnqueueTps": f"{enqueue_tps:.1f}",
                "timerDequeueTps": f"{dequeue_tps:.1f}",
            }
