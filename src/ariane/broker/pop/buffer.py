"""Checkpoints held in memory and the order of POP offset commits (RocketMQ 5
``PopBufferMergeService``).

How it works. Every non-FIFO read of a queue by a POP becomes a *span* (start offset, the offset
after the read, its checkpoint) appended to that (topic, group, queue)'s list; the next POP of
the queue reads from the end of the last span, and the group's committed offset only ever moves
to the end of the oldest spans that are *done*, in order. A span is done when its checkpoint is
stored in the revive log, when all its messages were acked, or at once when it read nothing
(a filtered range).

With ``enablePopBufferMerge`` a checkpoint whose revive time is more than 4.5 s away is not
written at pop time but *held*: acks that arrive while it is held only set bits in memory. The
periodic :meth:`CheckpointBuffer.scan` drops a held checkpoint once all its messages are acked
(nothing was ever written for them) and writes it, with only the offsets still unacked, once its
revive time is less than ``popCkStayBufferTimeOut`` (3 s) away or it was held
``popCkStayBufferTime`` (10 s); acks after that are written as usual. The common case, a
message acked within seconds, thus costs no revive-log write at all. Shutdown writes every held
checkpoint. A crash loses held checkpoints but never messages: the committed offset did not
move past their spans, so their messages are popped again after the restart.

Without the buffer (or for short invisible times, and for CHANGE_MESSAGE_INVISIBLETIME) the
checkpoint is written at pop time and the span is done once the write is stored.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ariane.broker.pop.records import CheckpointKey, PopCheckPoint
from ariane.store import PutResult

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext
    from ariane.broker.pop.revive import ReviveLog

__all__ = ["CheckpointBuffer", "Span"]

logger = logging.getLogger(__name__)

#: A checkpoint is held only when its revive time is at least this far away (ms):
#: ``popCkStayBufferTimeOut`` + 1500.
_HOLD_MARGIN_MS = 1500

_QueueKey = tuple[str, str, int]


@dataclass(slots=True, eq=False)
class Span:
    """One read of one queue by one POP."""

    key: _QueueKey
    next_begin: int
    ck: PopCheckPoint | None
    revive_qid: int
    held: bool = False
    acked: set[int] = field(default_factory=set)
    write: Future[PutResult] | None = None
    done: bool = False

    def unacked(self) -> tuple[int, ...]:
        """Diffs of the messages not acked yet."""
        assert self.ck is not None
        so = self.ck.start_offset
        return tuple(d for d in self.ck.diffs if so + d not in self.acked)


class CheckpointBuffer:
    """Held checkpoints and in-order offset commits.

    Args:
        host: the broker (config, clock, offsets).
        log: where checkpoints are written.
    """

    def __init__(self, host: BrokerContext, log: ReviveLog) -> None:
        self.host = host
        self.log = log
        self._queues: dict[_QueueKey, deque[Span]] = {}
        self._held: dict[CheckpointKey, Span] = {}
        #: (when the held checkpoint must be written, sequence, span)
        self._due: list[tuple[int, int, Span]] = []
        self._seq = itertools.count()
        self.held_acks = 0
        self.dropped_checkpoints = 0
        #: called when the buffer gets work while it had none (the owner's periodic pass
        #: then starts again; set by the owner)
        self.on_work: Callable[[], None] = lambda: None

    @property
    def idle(self) -> bool:
        """Nothing held and no queue waiting for a commit: the periodic pass has nothing to do
        (what is left in ``_due`` then is no longer held and is skipped by a later pass)."""
        return not self._held and not self._queues

    @property
    def held(self) -> int:
        """Checkpoints held in memory now."""
        return len(self._held)

    def next_offset(self, topic: str, group: str, queue_id: int) -> int:
        """Where the next POP of the queue reads (-1: from the committed offset)."""
        spans = self._queues.get((topic, group, queue_id))
        return spans[-1].next_begin if spans else -1

    def clear_queue(self, topic: str, group: str, queue_id: int) -> None:
        """Forget the queue's spans (an administrator reset its offset)."""
        for span in self._queues.pop((topic, group, queue_id), ()):
            if span.ck is not None and span.held:
                self._held.pop(span.ck.key, None)
                span.held = False

    # -- pops ----------------------------------------------------------------------------------

    def add(
        self, topic: str, group: str, queue_id: int, next_begin: int,
        ck: PopCheckPoint | None, revive_qid: int,
    ) -> Future[PutResult] | None:  # fmt: skip
        """Record a read; hold or write its checkpoint. Returns the write (None when held or
        when there is no checkpoint); a write refused at once leaves no span behind."""
        key = (topic, group, queue_id)
        was_idle = self.idle
        span = Span(key, next_begin, ck, revive_qid)
        cfg = self.host.config
        now = self.host.clock.now_ms()
        if ck is None:
            span.done = True
        elif (
            cfg.enable_pop_buffer_merge
            and ck.revive_time - now >= cfg.pop_ck_stay_buffer_time_out_ms + _HOLD_MARGIN_MS
            and len(self._held) < cfg.pop_ck_max_buffer_size
            and ck.key not in self._held
        ):
            span.held = True
            self._held[ck.key] = span
            deadline = min(
                ck.pop_time + cfg.pop_ck_stay_buffer_time_ms,
                ck.revive_time - cfg.pop_ck_stay_buffer_time_out_ms,
            )
            heapq.heappush(self._due, (deadline, next(self._seq), span))
        else:
            span.write = self.log.append_ck(ck, revive_qid)
            if span.write.done() and not span.write.result().stored:
                return span.write
        self._queues.setdefault(key, deque()).append(span)
        self._commit(key)
        if was_idle and not self.idle:
            self.on_work()
        return span.write

    # -- acks ----------------------------------------------------------------------------------

    def ack(self, key: CheckpointKey, offsets: tuple[int, ...]) -> bool:
        """Take acks of a held checkpoint in memory; False when it is not held (the caller
        writes an ack record)."""
        span = self._held.get(key)
        if span is None or span.ck is None:
            return False
        if (
            self.host.clock.now_ms() - span.ck.pop_time
            > self.host.config.pop_ck_stay_buffer_time_ms - _HOLD_MARGIN_MS
        ):
            # about to be written: write it now, so that the ack record comes after it
            self._write(span)
            return False
        covered = set(span.ck.offsets())
        span.acked.update(o for o in offsets if o in covered)
        self.held_acks += len(offsets)
        if not span.unacked():
            self._held.pop(key, None)
            span.held = False
            span.done = True
            self.dropped_checkpoints += 1
            self._commit(span.key)
        return True

    # -- the periodic pass ---------------------------------------------------------------------

    def scan(self, flush_all: bool = False) -> int:
        """Write the held checkpoints that must not wait longer (all with ``flush_all``) and
        commit what is done; returns the checkpoints written."""
        now = self.host.clock.now_ms()
        written = 0
        due = self._due
        while due and (flush_all or due[0][0] <= now):
            _deadline, _seq, span = heapq.heappop(due)
            ck = span.ck
            if not span.held or ck is None:
                continue  # fully acked (dropped) meanwhile
            written += self._write(span)
        for key in list(self._queues):
            self._commit(key)
        return written

    def _write(self, span: Span) -> int:
        """Stop holding ``span``'s checkpoint: write what is unacked (1), or nothing (0)."""
        ck = span.ck
        assert ck is not None
        self._held.pop(ck.key, None)
        span.held = False
        rest = span.unacked()
        if not rest:
            span.done = True
            return 0
        partial = PopCheckPoint(
            ck.start_offset, ck.pop_time, ck.invisible_time, ck.queue_id, ck.topic, ck.group,
            ck.broker_name, rest, ck.reput_times,
        )  # fmt: skip
        span.write = self.log.append_ck(partial, span.revive_qid)
        return 1

    def pending_writes(self) -> list[Future[PutResult]]:
        """Checkpoint writes of spans not done yet."""
        return [
            s.write for spans in self._queues.values() for s in spans
            if s.write is not None and not s.done
        ]  # fmt: skip

    def _commit(self, key: _QueueKey) -> None:
        """Commit the end of the leading done spans of a queue."""
        spans = self._queues.get(key)
        if not spans:
            return
        last = -1
        while spans:
            head = spans[0]
            if not head.done and head.write is not None and head.write.done():
                if head.write.result().stored:
                    head.done = True
                else:  # not stored: its messages come back through a re-read
                    logger.error("checkpoint of %s not stored: the queue is read again", key)
                    spans.clear()
                    break
            if not head.done:
                break
            last = head.next_begin
            spans.popleft()
        if not spans:
            del self._queues[key]
        if last >= 0:
            topic, group, queue_id = key
            offsets = self.host.offsets
            if last > offsets.query(group, topic, queue_id):
                offsets.commit(group, topic, queue_id, last)
