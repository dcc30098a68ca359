"""The on-disk formats of the timer wheel (RocketMQ 5 ``TimerWheel``, ``Slot``, ``TimerLog``,
``TimerCheckpoint``), byte for byte. Big-endian throughout; P = ``timerPrecisionMs``.

``timerwheel`` (one file, exactly ``SLOTS_TOTAL * 2 * 32`` = 38 707 200 bytes): slot i covers
the times t with ``(t / P) mod (SLOTS_TOTAL * 2) == i``; slot i sits at byte ``i * 32``::

    0  i64  slot time in units of P (t / P); a slot is valid for t only when it equals t / P,
            so an all-zero slot is empty
    8  i64  firstPos: timer-log offset of the slot's first unit (-1: none)
    16 i64  lastPos: offset of the slot's latest unit (the head of its backward chain)
    24 i32  num: units of the slot (+1 per normal or roll unit, -1 per delete marker)
    28 i32  magic: unused, kept

``timerlog/<20-digit start offset>`` (same-size files, ``mappedFileSizeTimerLog``): 52-byte
units, appended; a slot's units form a singly linked list through ``prevPos``::

    0  i32  size = 52
    4  i64  prevPos: the slot's lastPos before this unit (-1 at the chain's start)
    12 i32  magic: bit 0 DEFAULT (always), bit 1 ROLL, bit 2 DELETE (nothing above 0xF)
    16 i64  enqueue time: the wheel's write time (a multiple of P) when appended
    24 i32  delta: slot time - enqueue time (ms)
    28 i64  CommitLog offset of the message copy in ``rmq_sys_wheel_timer``
    36 i32  its size in bytes
    40 i32  Java ``String.hashCode()`` of its ``REAL_TOPIC`` (0 when absent; metrics only)
    44 i64  reserved, 0

When a unit and a filler do not both fit in what is left of a file (``52 + 16 > room``), a
16-byte filler ``{i32 room, i64 0, i32 BLANK_MAGIC 0xCBD43194}`` ends the file and the unit
goes to the next one.

``config/timercheck`` (4096 bytes; the first 56 are also the body of GET_TIMER_CHECK_POINT)::

    0  i64  lastReadTimeMs: the next slot time to read
    8  i64  lastTimerLogFlushPos: end of the durable timer log
    16 i64  lastTimerQueueOffset: next ``rmq_sys_wheel_timer`` queue offset to enqueue
    24 i64  masterTimerQueueOffset (= lastTimerQueueOffset on a master)
    32 i64  dataVersion.stateVersion
    40 i64  dataVersion.timestamp
    48 i64  dataVersion.counter

Pure code: no I/O.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ariane.common.hashing import java_string_hash
from ariane.errors import CorruptionError
from ariane.store.format import ReadableBuffer

__all__ = [
    "BLANK_MAGIC",
    "CHECKPOINT_SIZE",
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "SLOTS_TOTAL",
    "SLOT_SIZE",
    "TIMER_BLANK_SLOTS",
    "UNIT_SIZE",
    "WHEEL_FILE_SIZE",
    "Checkpoint",
    "Slot",
    "Unit",
    "java_string_hash",
    "slot_time",
]

#: ``TIMER_WHEEL_TTL_DAY`` (7) days of seconds: the wheel's slot count whatever P is.
SLOTS_TOTAL = 7 * 86_400
SLOT_SIZE = 32
WHEEL_FILE_SIZE = SLOTS_TOTAL * 2 * SLOT_SIZE
UNIT_SIZE = 52
FILLER_SIZE = 16
BLANK_MAGIC = 0xCBD43194
MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4
#: ``TIMER_BLANK_SLOTS``: slots kept free at the wheel's end (roll window bound).
TIMER_BLANK_SLOTS = 60
CHECKPOINT_SIZE = 4096
CHECKPOINT_FIELDS = 56

_SLOT = struct.Struct(">qqqii")
_UNIT = struct.Struct(">iqiqiqiiq")
_FILLER = struct.Struct(">iqI")
_CHECKPOINT = struct.Struct(">qqqqqqq")
_I32 = struct.Struct(">i")


def slot_time(deliver_ms: int, precision_ms: int) -> int:
    """The slot a due time goes to (``TIMER_OUT_MS``): ``floor(t / P) * P``, one slot
    earlier for an exact multiple of P; the slot is read once the clock has passed its end,
    so delivery is at the first P boundary at or after ``deliver_ms``."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


class Slot(NamedTuple):
    """One wheel slot (``time_ms`` is in ms; -1 positions mean none)."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0

    @classmethod
    def empty(cls) -> Slot:
        """No units."""
        return cls(-1, -1, -1, 0, 0)

    def pack(self, precision_ms: int) -> bytes:
        """The 32 bytes of the slot."""
        return _SLOT.pack(
            self.time_ms // precision_ms, self.first_pos, self.last_pos, self.num, self.magic
        )

    @classmethod
    def unpack(cls, buf: ReadableBuffer, offset: int, precision_ms: int) -> Slot:
        """The slot at ``offset`` of ``buf``, times back in ms."""
        units, first, last, num, magic = _SLOT.unpack_from(buf, offset)
        return cls(units * precision_ms, first, last, num, magic)


class Unit(NamedTuple):
    """One timer-log unit."""

    prev_pos: int
    magic: int
    enqueue_time_ms: int
    delta_ms: int
    commit_log_offset: int
    size: int
    topic_hash: int = 0

    @property
    def slot_time_ms(self) -> int:
        """The slot the unit belongs to."""
        return self.enqueue_time_ms + self.delta_ms

    @property
    def is_roll(self) -> bool:
        """The message only passes through this slot on its way further (roll)."""
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        """A delete marker (recall)."""
        return bool(self.magic & MAGIC_DELETE)

    def pack(self) -> bytes:
        """The 52 bytes of the unit."""
        return _UNIT.pack(
            UNIT_SIZE, self.prev_pos, self.magic, self.enqueue_time_ms, self.delta_ms,
            self.commit_log_offset, self.size, self.topic_hash, 0,
        )  # fmt: skip

    @classmethod
    def unpack(cls, buf: ReadableBuffer, offset: int = 0) -> Unit:
        """The unit at ``offset``.

        Raises:
            CorruptionError: not a unit (size is not 52, bad magic, too short).
        """
        if len(buf) - offset < UNIT_SIZE:
            raise CorruptionError(f"timer-log unit at {offset}: only {len(buf) - offset} bytes")
        size, prev, magic, enqueue, delta, phys, phys_size, topic_hash, _ = _UNIT.unpack_from(
            buf, offset
        )
        if size != UNIT_SIZE or magic & ~0xF or not magic & MAGIC_DEFAULT:
            raise CorruptionError(f"timer-log unit at {offset}: size {size} magic {magic:#x}")
        return cls(prev, magic, enqueue, delta, phys, phys_size, topic_hash)


def pack_filler(room: int) -> bytes:
    """The 16-byte filler that ends a timer-log file with ``room`` bytes left."""
    return _FILLER.pack(room, 0, BLANK_MAGIC)


def is_filler(buf: ReadableBuffer, offset: int) -> bool:
    """Whether a filler starts at ``offset`` (the file ends there)."""
    if len(buf) - offset < FILLER_SIZE:
        return False
    room, _zero, magic = _FILLER.unpack_from(buf, offset)
    return bool(magic == BLANK_MAGIC and room >= FILLER_SIZE)


class Checkpoint(NamedTuple):
    """The timer's progress (``TimerCheckpoint``)."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def pack(self) -> bytes:
        """The 56 bytes (GET_TIMER_CHECK_POINT body)."""
        return _CHECKPOINT.pack(*self)

    @classmethod
    def unpack(cls, buf: ReadableBuffer) -> Checkpoint:
        """Parse 56 bytes (or the older 32-byte form).

        Raises:
            CorruptionError: fewer than 32 bytes.
        """
        if len(buf) >= CHECKPOINT_FIELDS:
            return cls(*_CHECKPOINT.unpack_from(buf, 0))
        if len(buf) >= 32:
            return cls(*struct.unpack_from(">qqqq", buf, 0))
        raise CorruptionError(f"timer checkpoint of {len(buf)} bytes")
