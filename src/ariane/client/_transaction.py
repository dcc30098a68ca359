"""Transactional messages (RocketMQ ``TransactionMQProducer``,
``DefaultMQProducerImpl.sendMessageInTransaction`` / ``endTransaction`` /
``checkTransactionState``).

How it works: ``send_in_transaction`` sends a *half* message (properties ``TRAN_MSG=true`` and
``PGROUP=<group>``, sysFlag PREPARED) with the normal retrying send; consumers cannot see it.
If it was stored with SEND_OK, the caller's local transaction runs and returns COMMIT,
ROLLBACK or UNKNOW (an exception or ``None`` counts as UNKNOW; a send stored with a non-OK
status is rolled back without running it). The decision travels in a one-way END_TRANSACTION
to the broker that stored the half message: ``commitLogOffset`` from the send's offsetMsgId,
``tranStateTableOffset`` = its queue offset, ``msgId`` = the UNIQ_KEY, ``transactionId``.

A broker that gets no decision (UNKNOW, or a lost END_TRANSACTION) later sends
CHECK_TRANSACTION_STATE to a producer of the group; the ``ClientInstance`` routes it here and
``check_transaction_state`` runs the user's checker in the background, answering with
END_TRANSACTION ``fromTransactionCheck=true``. At most ``CHECK_REQUEST_HOLD_MAX`` checks run at
once; more are dropped (the broker asks again later).

User callables may be ``async def`` (awaited on the loop) or plain functions (run in a worker
thread with ``asyncio.to_thread``, so database calls never block the loop).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, Unpack

from ariane.client._producer import Producer
from ariane.client.config import ProducerOptions
from ariane.client.message import (
    LocalTransactionState,
    MessageExt,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from ariane.common import properties as props
from ariane.common.message import Message
from ariane.common.msgid import decode_offset_msg_id
from ariane.errors import ArianeError, InvalidArgumentError
from ariane.remoting.protocol import headers as h

__all__ = [
    "CHECK_REQUEST_HOLD_MAX",
    "LocalTransaction",
    "TransactionChecker",
    "TransactionProducer",
]

logger = logging.getLogger(__name__)

#: Transaction checks allowed to run at once (``checkRequestHoldMax``).
CHECK_REQUEST_HOLD_MAX = 2000

_State: TypeAlias = LocalTransactionState | None
#: ``checker(msg) -> state``: answers a broker's question about a half message.
TransactionChecker: TypeAlias = Callable[[MessageExt], _State | Awaitable[_State]]
#: ``local_transaction(msg, arg) -> state``: the work the message depends on.
LocalTransaction: TypeAlias = Callable[[Message, Any], _State | Awaitable[_State]]


async def call_user(fn: Callable[..., Any], *args: Any) -> LocalTransactionState:
    """Run a user callable: ``async def`` on the loop, plain functions in a worker thread.
    ``None`` means UNKNOW.

    Raises:
        Whatever the callable raises; ``TypeError`` for a result that is not a state.
    """
    if inspect.iscoroutinefunction(fn):
        result = await fn(*args)
    else:
        result = await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(result):
            result = await result
    return as_state(result)


def as_state(result: object) -> LocalTransactionState:
    """A user callable's result as a state (``None`` = UNKNOW).

    Raises:
        TypeError: anything else that is not a ``LocalTransactionState``.
    """
    if result is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(result, LocalTransactionState):
        raise TypeError(f"expected a LocalTransactionState, got {result!r}")
    return result


class TransactionProducer(Producer):
    """A producer of transactional messages.

    Args:
        group: the producer group; brokers send check-backs to any live producer of it, so
            every process of the group must be able to answer for every transaction.
        checker: ``checker(msg: MessageExt) -> LocalTransactionState`` (or ``None`` for
            UNKNOW; may be ``async def``); called when a broker asks about a half message.
        **kwargs: every ``Producer`` option (``namesrv_addr``, ``send_timeout_ms``...).
    """

    def __init__(
        self, group: str, *, checker: TransactionChecker, **kwargs: Unpack[ProducerOptions]
    ) -> None:
        if not callable(checker):
            raise InvalidArgumentError("checker must be callable")
        super().__init__(group, **kwargs)
        self.checker = checker
        self._checks: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """Stop answering checks and leave the client instance."""
        for task in list(self._checks):
            task.cancel()
        await super().close()

    async def send_in_transaction(
        self,
        msg: Message,
        local_transaction: LocalTransaction,
        arg: Any = None,
        *,
        timeout_ms: int | None = None,
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``local_transaction(msg, arg)``, and tell the
        broker to commit or roll back.

        Args:
            msg: the message (delay levels are dropped: transactional messages cannot be
                delayed).
            local_transaction: returns ``COMMIT_MESSAGE``, ``ROLLBACK_MESSAGE`` or
                ``UNKNOW``/``None`` (the broker will ask the checker later); may be
                ``async def``; plain functions run in a worker thread.
            arg: passed to ``local_transaction``.
            timeout_ms: budget of the half message's send.

        Returns:
            The half message's send result and the state sent to the broker.

        Raises:
            Everything ``Producer.send`` raises, for the half message (nothing ran then).
        """
        result = await self.send_half(msg, timeout_ms=timeout_ms)
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = await call_user(local_transaction, msg, arg)
            except Exception as exc:
                logger.warning("local transaction of %s raised: %r", result.msg_id, exc)
                state, error = LocalTransactionState.UNKNOW, exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        await self.end_transaction(result, state, error, msg=msg)
        return TransactionSendResult.of(result, state)

    async def send_half(self, msg: Message, *, timeout_ms: int | None = None) -> SendResult:
        """Step 1 of ``send_in_transaction``: store ``msg`` as a half message.

        Sets ``TRAN_MSG``/``PGROUP`` (and ``__transactionId__`` from the answer) on ``msg``.
        """
        properties = msg.properties
        properties.pop(props.DELAY, None)
        properties[props.TRANSACTION_PREPARED] = "true"
        properties[props.PRODUCER_GROUP] = self.group
        result = await self.send(msg, timeout_ms=timeout_ms)
        if result.transaction_id:
            properties[props.TRANSACTION_ID] = result.transaction_id
        return result

    async def end_transaction(
        self,
        result: SendResult,
        state: LocalTransactionState,
        error: BaseException | None = None,
        *,
        msg: Message | None = None,
    ) -> None:
        """Step 3 of ``send_in_transaction``: one-way END_TRANSACTION with ``state``; with
        tracing on, an EndTransaction trace record of ``msg`` once it went out.

        Failures are logged, not raised: the broker will ask the checker instead.
        """
        try:
            offset_id = result.offset_msg_id.split(",", 1)[0] or result.msg_id
            commit_log_offset = decode_offset_msg_id(offset_id).phys_offset
            addr = self.instance.find_broker_addr_in_publish(result.message_queue.broker_name)
            if addr is None:
                raise ArianeError(f"broker {result.message_queue.broker_name} has no address")
            header = h.EndTransactionRequestHeader(
                producer_group=self.group,
                tran_state_table_offset=result.queue_offset,
                commit_log_offset=commit_log_offset,
                commit_or_rollback=state.sys_flag,
                msg_id=result.msg_id,
                topic=result.message_queue.topic,
                from_transaction_check=False,
                transaction_id=result.transaction_id,
            )
            remark = None
            if error is not None:
                remark = f"executeLocalTransactionBranch exception: {error!r}"[:1000]
            await self.instance.api.end_transaction_oneway(addr, header, remark)
        except ArianeError as exc:
            logger.warning("END_TRANSACTION for %s failed: %s", result.msg_id, exc)
            return
        if self._tracer is not None and msg is not None:
            self._tracer.end_transaction(msg, header, state.value, addr, result.region_id)

    # -- check-backs ----------------------------------------------------------------------------

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: h.CheckTransactionStateRequestHeader
    ) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE in the background."""
        if len(self._checks) >= CHECK_REQUEST_HOLD_MAX:
            logger.warning("too many transaction checks in progress; dropping %s", header.msg_id)
            return
        task = asyncio.ensure_future(self._check(broker_addr, msg, header))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check(
        self, broker_addr: str, msg: MessageExt, header: h.CheckTransactionStateRequestHeader
    ) -> None:
        if header.transaction_id and props.TRANSACTION_ID not in msg.properties:
            msg.properties[props.TRANSACTION_ID] = header.transaction_id
        error: BaseException | None = None
        try:
            state = await call_user(self.checker, msg)
        except Exception as exc:
            logger.warning("transaction checker raised for %s: %r", msg.msg_id, exc)
            state, error = LocalTransactionState.UNKNOW, exc
        end = h.EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.sys_flag,
            msg_id=msg.properties.get(props.UNIQ_KEY) or msg.msg_id,
            topic=header.topic,
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        remark = f"checkLocalTransactionState Exception: {error!r}"[:1000] if error else None
        try:
            await self.instance.api.end_transaction_oneway(broker_addr, end, remark)
        except ArianeError as exc:
            logger.warning("END_TRANSACTION (check) for %s failed: %s", msg.msg_id, exc)
            return
        if self._tracer is not None:
            real_topic = msg.properties.get(props.REAL_TOPIC)
            shown = msg if not real_topic else Message(real_topic, b"", properties=msg.properties)
            region = msg.properties.get(props.MSG_REGION)
            self._tracer.end_transaction(shown, end, state.value, broker_addr, region)
