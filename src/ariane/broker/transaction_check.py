"""The transaction check-back (RocketMQ ``TransactionalMessageCheckService``,
``TransactionalMessageServiceImpl.check`` and ``AbstractTransactionalMessageCheckListener``).

How it works. Every ``transactionCheckInterval`` a round walks the half queue
(``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0) from its progress offset, kept like a consumer's in
``consumerOffset.json`` under the system group ``CID_RMQ_SYS_TRANS`` (the op queue's offset is
kept there too, for the tools). For each half message:

* resolved (committed, rolled back or discarded; see :mod:`ariane.broker.transaction`) ->
  skipped;
* stored after the round began -> the round stops (later ones are newer still);
* younger than its immunity (``transactionTimeOut``, or ``CHECK_IMMUNITY_TIME_IN_SECONDS``
  when the producer set it) -> the round stops; with a producer-set immunity the message is
  instead re-appended to the half queue so the round can go on;
* checked ``transactionCheckMax`` times already, or born longer than ``fileReservedTime`` ago ->
  discarded: kept in ``TRANS_CHECK_MAX_TIME_TOPIC``, resolved as DISCARDED (logged);
* otherwise re-appended to the half queue with ``TRANSACTION_CHECK_TIMES`` + 1 and
  ``TRAN_PREPARED_QUEUE_OFFSET`` = the transaction's identity, and a one-way
  CHECK_TRANSACTION_STATE naming that copy is sent to one live connection of its producer
  group (``PGROUP``). The producer answers with END_TRANSACTION (``fromTransactionCheck``).

The progress moves past every examined message (an unresolved one lives on as its copy), so
half and op offsets only move forward. A restart resumes from the persisted progress: a crash
before it was written re-examines some messages (extra copies, never extra deliveries: the
outcome is kept per transaction, not per copy). Rounds run on the event loop in slices of
``_SLICE`` messages so other work is not held up.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ariane.broker.transaction import (
    TRANS_SYS_GROUP,
    Resolution,
    TransactionalMessageService,
    identity_of,
    immunity_ms,
    no_wait,
)
from ariane.common.message import MessageExt
from ariane.common.msgid import create_offset_msg_id
from ariane.common.properties import (
    PRODUCER_GROUP,
    REAL_QUEUE_ID,
    REAL_TOPIC,
    TRANSACTION_CHECK_TIMES,
    TRANSACTION_PREPARED_QUEUE_OFFSET,
    UNIQ_KEY,
)
from ariane.common.record import decode_record, encode_record
from ariane.common.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from ariane.errors import ConnectionClosedError, CorruptionError, LocalProtocolError
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import MessageInner

if TYPE_CHECKING:
    from ariane.broker.consumer_offset import ConsumerOffsetManager
    from ariane.broker.context import BrokerContext

__all__ = ["CheckStats", "TransactionalMessageCheckService"]

logger = logging.getLogger(__name__)

#: Half messages examined before the round yields to the event loop.
_SLICE = 512


@dataclass(slots=True)
class CheckStats:
    """What one round did."""

    examined: int = 0
    checked: int = 0
    discarded: int = 0
    no_producer: int = 0
    done: bool = False


class TransactionalMessageCheckService:
    """Asks producers about half messages nobody resolved.

    Args:
        broker: the broker (store, config, clients, remoting server).
        service: the transaction service holding the outcomes.
    """

    def __init__(self, broker: BrokerContext, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service
        self.store = broker.store
        self.rounds = 0
        self.checks_sent = 0
        self._round_start_ms: int | None = None
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Run rounds every ``transactionCheckInterval`` on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="tx-check")

    async def stop(self) -> None:
        """Stop running rounds (a round in progress stops at its next slice)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.transaction_check_interval_ms / 1000)
            try:
                await self._round()
            except Exception:
                logger.exception("transaction check round failed")
                self._round_start_ms = None

    async def _round(self) -> None:
        """One whole round, yielding to the loop between slices."""
        done = False
        while not done:
            done = self.check_once(_SLICE).done
            await asyncio.sleep(0)

    # -- one round ---------------------------------------------------------------------------

    def check_once(self, budget: int | None = None) -> CheckStats:
        """Run (a slice of) one round.

        Args:
            budget: half messages to examine before returning; None for the whole round.

        Returns:
            What was done; ``done`` is False when the round continues at the next call.
        """
        stats = CheckStats()
        cq = self.store.get_consume_queue(TRANS_HALF_TOPIC, 0)
        if cq is None:
            stats.done = True
            return stats
        broker = self.broker
        now = broker.clock.now_ms()
        if self._round_start_ms is None:
            self._round_start_ms = now
            self.rounds += 1
        start_ms = self._round_start_ms
        offsets = broker.offsets
        offset = max(offsets.query(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, 0), cq.min_offset_in_queue)
        self.service.table.prune(cq.min_offset_in_queue)
        end = cq.max_offset_in_queue
        stop = False
        while offset < end and not stop:
            if budget is not None and stats.examined >= budget:
                break
            stats.examined += 1
            msg = self._half_at(offset)
            if msg is None or self.service.resolution(msg) is not Resolution.PENDING:
                offset += 1
                continue
            if msg.store_timestamp_ms >= start_ms:
                stop = True
                break
            stop = not self._examine(msg, now, stats)
            if not stop:
                offset += 1
        else:
            stop = True
        _commit(offsets, TRANS_HALF_TOPIC, offset)
        op_cq = self.store.get_consume_queue(TRANS_OP_HALF_TOPIC, 0)
        if op_cq is not None:
            _commit(offsets, TRANS_OP_HALF_TOPIC, op_cq.max_offset_in_queue)
        if stop:
            stats.done = True
            self._round_start_ms = None
        return stats

    def _half_at(self, offset: int) -> MessageExt | None:
        cq = self.store.get_consume_queue(TRANS_HALF_TOPIC, 0)
        entry = cq.get_entry(offset) if cq is not None else None
        if entry is None:
            return None
        record = self.store.look_message_by_offset(entry[0], entry[1])
        if record is None:
            return None
        try:
            return decode_record(record)[0]
        except CorruptionError as exc:
            logger.error("half message at queue offset %d does not decode: %s", offset, exc)
            return None

    def _examine(self, msg: MessageExt, now: int, stats: CheckStats) -> bool:
        """Handle one unresolved half message; False stops the round here."""
        config = self.broker.config
        immunity, custom = immunity_ms(msg, config.transaction_timeout_ms)
        age = now - msg.born_timestamp_ms
        if 0 <= age < immunity:
            if not custom:
                return False
            return self._put_back(msg, _check_times(msg)) is not None
        times = _check_times(msg)
        reserved_ms = self.store.config.file_reserved_time_hours * 3_600_000
        reason = None
        if times >= config.transaction_check_max:
            reason = f"checked {times} times without an answer"
        elif msg.born_timestamp_ms > 0 and now - msg.born_timestamp_ms > reserved_ms:
            reason = "older than fileReservedTime"
        if reason is not None:
            if not self.service.discard(msg, reason):
                return False  # retried next round
            stats.discarded += 1
            return True
        copy = self._put_back(msg, times + 1)
        if copy is None:
            return False
        stats.checked += 1
        if not self._send_check(copy):
            stats.no_producer += 1
        return True

    def _put_back(self, msg: MessageExt, times: int) -> MessageExt | None:
        """``putBackHalfMsgQueue``: append a copy to the half queue; the stored copy."""
        props = dict(msg.properties)
        props[TRANSACTION_CHECK_TIMES] = str(times)
        props[TRANSACTION_PREPARED_QUEUE_OFFSET] = str(identity_of(msg))
        inner = MessageInner(
            TRANS_HALF_TOPIC, msg.queue_id, msg.body, msg.flag, props, msg.sys_flag,
            msg.born_timestamp_ms, msg.born_host, msg.store_host, msg.reconsume_times,
        )  # fmt: skip
        result = self.store.submit_message(no_wait(inner)).result()  # done: WAIT=false
        if not result.stored:
            logger.error("cannot put back half message %s: %s", identity_of(msg), result)
            return None
        copy_phys, copy_queue_offset = result.wrote_offset, result.logics_offset
        return MessageExt(
            topic=TRANS_HALF_TOPIC, body=msg.body, flag=msg.flag, properties=props,
            queue_id=msg.queue_id, queue_offset=copy_queue_offset, sys_flag=msg.sys_flag,
            born_timestamp_ms=msg.born_timestamp_ms, born_host=msg.born_host,
            store_timestamp_ms=self.broker.clock.now_ms(), store_host=msg.store_host,
            reconsume_times=msg.reconsume_times, commit_log_offset=copy_phys,
        )  # fmt: skip

    def _send_check(self, copy: MessageExt) -> bool:
        """``sendCheckMessage``: one-way CHECK_TRANSACTION_STATE to a producer of the group."""
        group = copy.properties.get(PRODUCER_GROUP, "")
        channel = self.broker.clients.find_producer_channel(group)
        uniq = copy.properties.get(UNIQ_KEY)
        if channel is None:
            logger.warning("check of transaction %s skipped: no producer of %s online", uniq, group)
            return False
        header = h.CheckTransactionStateRequestHeader(
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commit_log_offset,
            topic=copy.topic,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=create_offset_msg_id(
                copy.store_host.addr, copy.store_host.port, copy.commit_log_offset
            ),
            broker_name=self.broker.config.broker_name,
        )
        shown = MessageExt(
            topic=copy.properties.get(REAL_TOPIC, copy.topic), body=copy.body, flag=copy.flag,
            properties=copy.properties, queue_id=_int(copy.properties.get(REAL_QUEUE_ID), 0),
            queue_offset=copy.queue_offset, sys_flag=copy.sys_flag,
            born_timestamp_ms=copy.born_timestamp_ms, born_host=copy.born_host,
            store_timestamp_ms=copy.store_timestamp_ms, store_host=copy.store_host,
            reconsume_times=copy.reconsume_times, commit_log_offset=copy.commit_log_offset,
        )  # fmt: skip
        try:
            body = encode_record(shown)
        except ValueError as exc:
            logger.error("cannot encode the check of transaction %s: %s", uniq, exc)
            return False
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body
        )
        try:
            self.broker.remoting.invoke_oneway(channel, request)
        except (ConnectionClosedError, LocalProtocolError) as exc:
            logger.warning("check of transaction %s not sent to %r: %s", uniq, channel, exc)
            return False
        self.checks_sent += 1
        return True


def _commit(offsets: ConsumerOffsetManager, topic: str, offset: int) -> None:
    """Store the check's progress (only a change makes consumerOffset.json dirty)."""
    if offsets.query(TRANS_SYS_GROUP, topic, 0) != offset:
        offsets.commit(TRANS_SYS_GROUP, topic, 0, offset)


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _check_times(msg: MessageExt) -> int:
    return max(0, _int(msg.properties.get(TRANSACTION_CHECK_TIMES), 0))
