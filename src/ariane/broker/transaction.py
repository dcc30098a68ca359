"""Transactional messages (RocketMQ ``TransactionalMessageServiceImpl``,
``TransactionalMessageBridge`` and the commit/rollback half of ``EndTransactionProcessor``).

How it works. A send with ``TRAN_MSG=true`` becomes a *half message*: :meth:`prepare` keeps
the real topic and queue in ``REAL_TOPIC``/``REAL_QID``, sets ``__transactionId__`` to the
``UNIQ_KEY`` (and ``PGROUP`` from the header when the client did not), clears the transaction
bits of sysFlag and any delay level, and stores it in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0,
which no consumer reads. The send answer's offsetMsgId and queue offset identify it.

END_TRANSACTION (:meth:`end_transaction`) reads the half message back by its CommitLog offset
and checks it (a half-topic record, the producer group, the queue offset). COMMIT stores the
message again in its real topic and queue, transaction type COMMIT, ``TRAN_MSG`` and
``REAL_TOPIC``/``REAL_QID`` removed, the half's CommitLog offset as preparedTransactionOffset;
then both COMMIT and ROLLBACK append an *op record* to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: tag
``d``, body the half queue offsets it resolves (``"12,"``, RocketMQ's format) and, Ariane's
addition, the property ``TRAN_END_TYPE`` = COMMIT / ROLLBACK / DISCARD.

Each transaction has one identity: the queue offset of its first half message. The check-back
(:mod:`ariane.broker.transaction_check`) re-appends unresolved half messages with
``TRAN_PREPARED_QUEUE_OFFSET`` = that identity, so every copy names it, and op records list
the identity (and the copy's offset). The :class:`ResolutionTable` (one byte per half queue
offset) holds the outcome of every identity; it is rebuilt from the op queue at start. Hence:

* a transaction is resolved at most once: a second END_TRANSACTION with the same outcome is
  answered SUCCESS and changes nothing, a different one (COMMIT after ROLLBACK, either after a
  discard) is refused with ILLEGAL_OPERATION, whichever copy's offsets it names;
* a restart re-checks nothing that was resolved;
* the one window between the committed message and its op record (a crash in between) is
  closed by looking the committed message up (index: real topic + ``UNIQ_KEY``, transaction
  type COMMIT) for half messages stored before this broker started, before answering an
  END_TRANSACTION or checking back.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Protocol

from ariane.broker.context import BrokerContext
from ariane.broker.processors import error, ok
from ariane.common.message import MessageExt
from ariane.common.properties import (
    CHECK_IMMUNITY_TIME_IN_SECONDS,
    DELAY,
    PRODUCER_GROUP,
    REAL_QUEUE_ID,
    REAL_TOPIC,
    TAGS,
    TRANSACTION_ID,
    TRANSACTION_PREPARED,
    TRANSACTION_PREPARED_QUEUE_OFFSET,
    UNIQ_KEY,
    WAIT_STORE_MSG_OK,
    encode_properties,
)
from ariane.common.record import decode_record
from ariane.common.sysflag import (
    PERM_READ,
    PERM_WRITE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    reset_transaction_value,
    transaction_value,
)
from ariane.common.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from ariane.errors import CorruptionError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import MessageInner, PutResult, PutStatus
from ariane.store.format import CQ_UNIT

__all__ = [
    "END_TYPE",
    "REMOVE_TAG",
    "TRANS_SYS_GROUP",
    "Resolution",
    "ResolutionTable",
    "TransactionBrokerContext",
    "TransactionalMessageService",
]

logger = logging.getLogger(__name__)

#: System consumer group holding the check progress (``MixAll.CID_SYS_RMQ_TRANS``).
TRANS_SYS_GROUP = "CID_RMQ_SYS_TRANS"
#: Tag of op records (``TransactionalMessageUtil.REMOVE_TAG``).
REMOVE_TAG = "d"
#: Property of op records naming the outcome (Ariane's; RocketMQ's op records have none).
END_TYPE = "TRAN_END_TYPE"
#: Largest offset jump an op record may make the table grow by (guards against bad bodies).
_MAX_GROWTH = 1 << 26


class Resolution(enum.IntEnum):
    """The outcome of a transaction."""

    PENDING = 0
    COMMITTED = 1
    ROLLED_BACK = 2
    DISCARDED = 3
    #: an op record without an outcome (written by RocketMQ): resolved, outcome unknown
    RESOLVED = 4

    @property
    def text(self) -> str:
        """For remarks and logs."""
        return self.name.lower().replace("_", " ")


_END_TYPE_NAMES = {
    Resolution.COMMITTED: "COMMIT",
    Resolution.ROLLED_BACK: "ROLLBACK",
    Resolution.DISCARDED: "DISCARD",
}
_END_TYPE_VALUES = {v: k for k, v in _END_TYPE_NAMES.items()}


class ResolutionTable:
    """Outcome per half queue offset: one byte each from ``base`` on, a small map below it
    (transactions whose first half message was already deleted while a copy lived on)."""

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self._data = bytearray()
        self._below: dict[int, Resolution] = {}

    def __len__(self) -> int:
        return len(self._data) + len(self._below)

    def get(self, offset: int) -> Resolution:
        """The outcome recorded for ``offset`` (PENDING when none)."""
        i = offset - self.base
        if 0 <= i < len(self._data):
            return Resolution(self._data[i])
        if i < 0:
            return self._below.get(offset, Resolution.PENDING)
        return Resolution.PENDING

    def set(self, offset: int, resolution: Resolution, limit: int | None = None) -> bool:
        """Record an outcome; offsets at/after ``limit`` (when given: op record bodies read at
        start) or absurdly far ahead are ignored."""
        i = offset - self.base
        if (
            offset < 0
            or (limit is not None and offset >= limit)
            or i - len(self._data) > _MAX_GROWTH
        ):
            return False
        if i < 0:
            if limit is None:  # a live resolution of an old transaction; rare
                self._below[offset] = resolution
            return limit is None
        if i >= len(self._data):
            self._data.extend(bytes(i + 1 - len(self._data)))
        self._data[i] = resolution
        return True

    def prune(self, base: int) -> None:
        """Forget offsets below ``base`` (their half messages are gone from the store)."""
        if base > self.base:
            del self._data[: base - self.base]
            self.base = base


def identity_of(msg: MessageExt) -> int:
    """The transaction a half message belongs to: its first copy's half queue offset."""
    raw = msg.properties.get(TRANSACTION_PREPARED_QUEUE_OFFSET)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass
    return msg.queue_offset


def immunity_ms(msg: MessageExt, timeout_ms: int) -> tuple[int, bool]:
    """(check immunity, whether the producer set one) (``TransactionalMessageUtil
    .getImmunityTime``): ``CHECK_IMMUNITY_TIME_IN_SECONDS`` x 1000, never below the timeout."""
    raw = msg.properties.get(CHECK_IMMUNITY_TIME_IN_SECONDS)
    if not raw:
        return timeout_ms, False
    try:
        value = int(raw) * 1000
    except ValueError:
        return timeout_ms, True
    return max(value, timeout_ms), True


def op_offsets(body: bytes) -> Iterator[int]:
    """The half queue offsets an op record body lists (``"1,2,"``; 4.x wrote ``"1"``)."""
    for part in body.decode("utf-8", "replace").split(","):
        part = part.strip()
        if part:
            try:
                yield int(part)
            except ValueError:
                continue


class TransactionalMessageService:
    """Half messages, their resolution and the op records.

    Args:
        broker: the broker (store, config, clock).
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.store = broker.store
        self.table = ResolutionTable()
        self.boot_ms = broker.clock.now_ms()
        self.committed = 0
        self.rolled_back = 0
        self.discarded = 0
        #: rewrites of a committed message before it is stored (the timer hook, issue 16)
        self.final_hooks: list[Callable[[MessageInner], RemotingCommand | None]] = []

    # -- start-up --------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the resolution table from the op queue (the store is loaded)."""
        self.boot_ms = self.broker.clock.now_ms()
        half = self.store.get_consume_queue(TRANS_HALF_TOPIC, 0)
        self.table = ResolutionTable(half.min_offset_in_queue if half is not None else 0)
        limit = self._limit()
        count = 0
        for msg in self._op_records():
            if msg.properties.get(TAGS) != REMOVE_TAG:
                continue
            resolution = _END_TYPE_VALUES.get(msg.properties.get(END_TYPE, ""), Resolution.RESOLVED)
            for offset in op_offsets(msg.body):
                if self.table.set(offset, resolution, limit):
                    count += 1
        if count:
            logger.info("transactions: %d resolutions loaded from the op queue", count)

    def _limit(self) -> int:
        half = self.store.get_consume_queue(TRANS_HALF_TOPIC, 0)
        return half.max_offset_in_queue if half is not None else 0

    def _op_records(self) -> Iterator[MessageExt]:
        cq = self.store.get_consume_queue(TRANS_OP_HALF_TOPIC, 0)
        if cq is None:
            return
        offset = cq.min_offset_in_queue
        end = cq.max_offset_in_queue
        while offset < end:
            entries = cq.get_entries(offset, 1024)
            if not entries:
                offset = cq.roll_next_file(offset)
                continue
            for phys, size, _tags in CQ_UNIT.iter_unpack(entries):
                offset += 1
                if size <= 0 or size == 0x7FFFFFFF:
                    continue
                record = self.store.look_message_by_offset(phys, size)
                if record is None:
                    continue
                try:
                    yield decode_record(record)[0]
                except CorruptionError as exc:
                    logger.warning("op record at %d does not decode: %s", phys, exc)

    # -- prepare -------------------------------------------------------------------------------

    def prepare(self, inner: MessageInner, producer_group: str) -> None:
        """``parseHalfMessageInner``: turn a transactional send into a half message."""
        props = inner.properties
        uniq = props.get(UNIQ_KEY)
        if uniq:
            props[TRANSACTION_ID] = uniq
        if not props.get(PRODUCER_GROUP):
            props[PRODUCER_GROUP] = producer_group
        # the timer properties stay: the commit is timed (counting from the commit)
        props.pop(DELAY, None)
        props[REAL_TOPIC] = inner.topic
        props[REAL_QUEUE_ID] = str(inner.queue_id)
        inner.properties_string = None
        inner.sys_flag = reset_transaction_value(inner.sys_flag, TRANSACTION_NOT_TYPE)
        inner.topic = TRANS_HALF_TOPIC
        inner.queue_id = 0

    # -- resolution ------------------------------------------------------------------------------

    def resolution(self, msg: MessageExt) -> Resolution:
        """The outcome of a half message's transaction, closing the commit crash window."""
        identity = identity_of(msg)
        state = self.table.get(identity)
        if (
            state is Resolution.PENDING
            and msg.store_timestamp_ms < self.boot_ms
            and self.committed_before(msg)
        ):
            logger.warning(
                "transaction %s (half offset %d) was committed before the restart; recording it",
                msg.properties.get(UNIQ_KEY), identity,
            )  # fmt: skip
            self._append_op(msg, identity, Resolution.COMMITTED)
            self.table.set(identity, Resolution.COMMITTED)
            state = Resolution.COMMITTED
        return state

    def committed_before(self, msg: MessageExt) -> bool:
        """Whether the real topic holds the committed message of this half message."""
        uniq = msg.properties.get(UNIQ_KEY)
        topic = msg.properties.get(REAL_TOPIC)
        if not uniq or not topic or self.store.index is None:
            return False
        found = self.store.query_message(topic, uniq, 64, msg.born_timestamp_ms - 1, 1 << 62)
        group = msg.properties.get(PRODUCER_GROUP)
        for record in found.messages:
            try:
                final, _ = decode_record(record)
            except CorruptionError:
                continue
            if (
                transaction_value(final.sys_flag) == TRANSACTION_COMMIT_TYPE
                and final.properties.get(UNIQ_KEY) == uniq
                and final.properties.get(PRODUCER_GROUP) == group
            ):
                return True
        return False

    def half_message(self, commit_log_offset: int) -> MessageExt | None:
        """The half message stored at ``commit_log_offset`` (None: none there)."""
        if commit_log_offset < 0:
            return None
        record = self.store.look_message_by_offset(commit_log_offset)
        if record is None:
            return None
        try:
            msg, _ = decode_record(record)
        except CorruptionError:
            return None
        return msg if msg.topic == TRANS_HALF_TOPIC else None

    def end_transaction(
        self, header: h.EndTransactionRequestHeader, remark: str | None
    ) -> tuple[RemotingCommand, list[Future[PutResult]]]:
        """Commit or roll back; returns the answer and the puts it must wait for."""
        kind = header.commit_or_rollback
        check = "check-back answer" if header.from_transaction_check else "producer"
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if kind != TRANSACTION_NOT_TYPE:
                return error(ResponseCode.INVALID_PARAMETER, f"bad commitOrRollback {kind}"), []
            logger.info("transaction %s still unknown (%s): %s", header.msg_id, check, remark)
            return ok(remark="transaction state unknown: nothing done"), []
        msg = self.half_message(header.commit_log_offset)
        refused = self._check_prepared(msg, header)
        if refused is not None:
            return refused, []
        assert msg is not None
        wanted = Resolution.COMMITTED if kind == TRANSACTION_COMMIT_TYPE else Resolution.ROLLED_BACK
        state = self.resolution(msg)
        if state is not Resolution.PENDING:
            if state is wanted:
                return ok(remark=f"transaction already {state.text}"), []
            logger.warning(
                "late %s of transaction %s refused: it was %s",
                _END_TYPE_NAMES[wanted], header.msg_id, state.text,
            )  # fmt: skip
            return error(
                ResponseCode.ILLEGAL_OPERATION,
                f"transaction {header.msg_id} was already {state.text}; "
                f"{_END_TYPE_NAMES[wanted].lower()} refused",
            ), []
        if not header.from_transaction_check and self._immunity_passed(msg):
            return error(
                ResponseCode.ILLEGAL_OPERATION,
                "end transaction after CHECK_IMMUNITY_TIME_IN_SECONDS: waiting for the check",
            ), []
        return self._resolve(msg, wanted, header.commit_log_offset)

    def _check_prepared(
        self, msg: MessageExt | None, header: h.EndTransactionRequestHeader
    ) -> RemotingCommand | None:
        """``checkPrepareMessage``."""
        if msg is None:
            return error(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if msg.properties.get(PRODUCER_GROUP) != header.producer_group:
            return error(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if msg.queue_offset != header.tran_state_table_offset:
            return error(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        return None

    def _immunity_passed(self, msg: MessageExt) -> bool:
        """``rejectCommitOrRollback``: a producer-set immunity is over."""
        immunity, custom = immunity_ms(msg, self.broker.config.transaction_timeout_ms)
        return custom and self.broker.clock.now_ms() - msg.born_timestamp_ms > immunity

    def _resolve(
        self, msg: MessageExt, wanted: Resolution, half_offset: int
    ) -> tuple[RemotingCommand, list[Future[PutResult]]]:
        identity = identity_of(msg)
        futures: list[Future[PutResult]] = []
        if wanted is Resolution.COMMITTED:
            inner = committed_message(msg, half_offset)
            for hook in self.final_hooks:
                refused = hook(inner)
                if refused is not None:
                    return refused, []
            final = self.store.submit_message(inner)
            if final.done() and not final.result().stored:
                return _put_error(final.result()), []
            futures.append(final)
        op = self._append_op(msg, identity, wanted)
        if op.done() and not op.result().stored:
            if wanted is not Resolution.COMMITTED:
                return _put_error(op.result()), []
            logger.error(
                "op record of committed transaction %s not stored (%s); a restart finds the "
                "committed message instead", msg.properties.get(UNIQ_KEY), op.result().status,
            )  # fmt: skip
        else:
            futures.append(op)
        self.table.set(identity, wanted)  # identities come from stored half messages
        if wanted is Resolution.COMMITTED:
            self.committed += 1
        else:
            self.rolled_back += 1
        logger.debug("transaction %s %s", msg.properties.get(UNIQ_KEY), wanted.text)
        return ok(), futures

    def discard(self, msg: MessageExt, reason: str) -> bool:
        """Resolve a transaction as discarded (checked too often or too old); the half message
        is kept, readable, in ``TRANS_CHECK_MAX_TIME_TOPIC``."""
        identity = identity_of(msg)
        self.broker.topics.create_in_send_back(
            TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE
        )
        kept = MessageInner(
            TRANS_CHECK_MAX_TIME_TOPIC, 0, msg.body, msg.flag, dict(msg.properties),
            msg.sys_flag, msg.born_timestamp_ms, msg.born_host, msg.store_host,
            msg.reconsume_times,
        )  # fmt: skip
        result = self.store.submit_message(no_wait(kept)).result()
        if not result.stored:
            logger.error("cannot keep discarded half message %s: %s", identity, result)
            return False
        op = self._append_op(msg, identity, Resolution.DISCARDED)
        if op.done() and not op.result().stored:
            logger.error("cannot record the discard of transaction %s", identity)
            return False
        self.table.set(identity, Resolution.DISCARDED)
        self.discarded += 1
        logger.error(
            "transaction %s (topic %s, half offset %d) discarded: %s; kept in %s",
            msg.properties.get(UNIQ_KEY), msg.properties.get(REAL_TOPIC), identity, reason,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )  # fmt: skip
        return True

    def _append_op(
        self, msg: MessageExt, identity: int, resolution: Resolution
    ) -> Future[PutResult]:
        offsets = [identity] if identity == msg.queue_offset else [identity, msg.queue_offset]
        broker = self.broker
        op = MessageInner(
            TRANS_OP_HALF_TOPIC,
            msg.queue_id,
            "".join(f"{o}," for o in offsets).encode(),
            0,
            {TAGS: REMOVE_TAG, END_TYPE: _END_TYPE_NAMES.get(resolution, "RESOLVED")},
            0,
            broker.clock.now_ms(),
            broker.store_host,
            broker.store_host,
        )
        return self.store.submit_message(op)


def no_wait(inner: MessageInner) -> MessageInner:
    """Append without waiting for the flush (``setWaitStoreMsgOK(false)``): the store sees
    ``WAIT=false``, the stored properties do not carry it (as in RocketMQ)."""
    stored = {k: v for k, v in inner.properties.items() if k != WAIT_STORE_MSG_OK}
    inner.properties_string = encode_properties(stored)
    inner.properties[WAIT_STORE_MSG_OK] = "false"
    return inner


def committed_message(msg: MessageExt, half_offset: int) -> MessageInner:
    """``endMessageTransaction``: the half message rebuilt for its real topic and queue."""
    props = dict(msg.properties)
    topic = props.pop(REAL_TOPIC, "") or ""
    try:
        queue_id = int(props.pop(REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
    props.pop(TRANSACTION_PREPARED, None)
    props.pop(WAIT_STORE_MSG_OK, None)
    return MessageInner(
        topic, max(0, queue_id), msg.body, msg.flag, props,
        reset_transaction_value(msg.sys_flag, TRANSACTION_COMMIT_TYPE), msg.born_timestamp_ms,
        msg.born_host,
        msg.store_host, msg.reconsume_times, half_offset,
    )  # fmt: skip


def _put_error(result: PutResult) -> RemotingCommand:
    """``sendFinalMessage``'s mapping of a failed put."""
    status = result.status
    if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return error(ResponseCode.MESSAGE_ILLEGAL, result.remark or status.value)
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        return error(
            ResponseCode.SERVICE_NOT_AVAILABLE, result.remark or "Service not available now."
        )
    return error(ResponseCode.SYSTEM_ERROR, result.remark or status.value)


class TransactionBrokerContext(BrokerContext, Protocol):
    """A broker with a transaction service (what the send and END_TRANSACTION processors
    need)."""

    transactions: TransactionalMessageService
