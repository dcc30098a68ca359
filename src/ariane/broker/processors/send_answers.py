"""The answers of the send family, shared by single and batch sends (part of RocketMQ
``SendMessageProcessor``: ``handlePutMessageResult`` and the idempotence window's checks).

How it works: :class:`SendAnswers` turns a store result into the send answer
(``put_response``: the status code, ``msgId`` from the broker's address and the physical
offsets, queue id and offset, ``MSG_REGION``/``TRACE_ON``), waits for the store's future or a
SYNC_MASTER's slaves before answering when it must (``_answer``, ``_answer_replicated``),
answers a send the idempotence window dropped with its first copy's place
(``_answer_duplicate``), and stamps the broker's region and trace switch into messages
(``_stamp_trace``). :class:`~ariane.broker.processors.send_batch.BatchSends` and
:class:`~ariane.broker.processors.send.SendMessageProcessor` build on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING

from ariane.broker.processors import error, finish_on_loop
from ariane.common.msgid import create_offset_msg_id, offset_msg_ids
from ariane.common.properties import MSG_REGION, TRACE_SWITCH, TRANSACTION_PREPARED
from ariane.ha import ReplicaWait
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import (
    CURRENT_VERSION,
    FLAG_RESPONSE,
    LanguageCode,
    RemotingCommand,
)
from ariane.store import PutResult, PutStatus
from ariane.store.dedup import DedupEntry, dedup_topic

if TYPE_CHECKING:
    from ariane.broker.transaction import TransactionBrokerContext

__all__ = ["SendAnswers"]

logger = logging.getLogger(__name__)

_STATUS_CODE: dict[PutStatus, int] = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}
# Enum members as module constants: a class-attribute lookup of an Enum member is slow in
# CPython 3.11 (about 50 ns; hot path)
_PUT_OK = PutStatus.PUT_OK
_SUCCESS = ResponseCode.SUCCESS
_PYTHON = LanguageCode.PYTHON
_STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)


class _DuplicatePut(PutResult):
    """The answer to a send the idempotence window dropped: the first copy's place. It is
    answered like a put but counted nowhere (the store's and topic's put counters count
    what was stored)."""

    __slots__ = ()


class SendAnswers:
    """Send answers for one broker (see the module's docstring).

    Args:
        broker: the broker whose store, config, stats and replication answer.
    """

    def __init__(self, broker: TransactionBrokerContext) -> None:
        self.broker = broker
        self.store = broker.store
        self.stats = broker.stats
        # replication: wakes the transfer to slaves; a SYNC_MASTER waits for them
        self._after_put: Callable[[PutResult, bool], PutStatus | ReplicaWait | None] = (
            broker.replication.after_put
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_flush = broker.store.answers_at_once  # else puts complete later
        # offsetMsgId = hex(host + port) + hex(offset, 16 digits): the first part is fixed
        self._msg_id_prefix = create_offset_msg_id(
            broker.store_host.addr, broker.store_host.port, 0
        )[:-16]
        # MSG_REGION/TRACE_ON stamped into stored messages (see _stamp_trace)
        self._trace_config: object = None
        self._trace_values = ("", "")
        self._trace_text = ""
        # the idempotence window (None when dedupWindowSize is 0)
        store = broker.store
        self._dedup = store.dedup if store.dedup.enabled and store.supports_dedup else None

    # -- idempotent sends (ariane.store.dedup) -------------------------------------------------

    def _dedup_id(self, topic: str, dedup_id: str, props: dict[str, str]) -> str | None:
        """``dedup_id`` if this send is deduplicated: the window is on, not a retry or
        dead-letter topic, not a transactional message."""
        if self._dedup is None or not dedup_topic(topic) or not dedup_id:
            return None
        if props.get(TRANSACTION_PREPARED) == "true":
            return None
        return dedup_id

    def _remember(
        self, topic: str, ids: Sequence[str | None], queue_id: int, result: PutResult
    ) -> None:
        if self._dedup is not None:
            self._dedup.remember_put(topic, ids, queue_id, result)

    def _answer_duplicate(
        self, ctx: RequestContext, topic: str, firsts: tuple[DedupEntry, ...], uniq: str | None
    ) -> RemotingCommand | None:
        """SEND_OK with the first copies' queue, offsets and message ids, once those copies
        are as durable and replicated as a new message would be."""
        start = min(e.phys_offset for e in firsts)
        end = max(e.phys_offset + e.size for e in firsts)
        first = firsts[0]
        result = _DuplicatePut(
            _PUT_OK, start, end - start, first.store_timestamp_ms, first.queue_offset,
            len(firsts), offsets=tuple(e.phys_offset for e in firsts),
        )  # fmt: skip
        if self._async_flush:
            replicated = self._after_put(result, True)
            if replicated is None:
                return self.put_response(result, topic, first.queue_id, uniq)
            return self._answer_replicated(ctx, result, replicated, topic, first.queue_id, uniq)
        return self._answer(ctx, self.store.wait_durable(result), topic, first.queue_id, uniq, True)

    def _stamp_trace(self, props: dict[str, str]) -> str:
        """Set ``MSG_REGION`` and ``TRACE_ON`` of this broker in ``props``; their encoded
        text (recomputed only when the broker's config object changes)."""
        config = self.broker.config
        if config is not self._trace_config:
            self._trace_config = config
            self._trace_values = (config.region_id, "true" if config.trace_on else "false")
            self._trace_text = (
                f"{MSG_REGION}\x01{self._trace_values[0]}\x02"
                f"{TRACE_SWITCH}\x01{self._trace_values[1]}\x02"
            )
        props[MSG_REGION], props[TRACE_SWITCH] = self._trace_values
        return self._trace_text

    # -- answers -------------------------------------------------------------------------------

    def _answer(
        self,
        ctx: RequestContext,
        future: Future[PutResult],
        topic: str,
        queue_id: int,
        uniq: str | None,
        wait: bool,
    ) -> RemotingCommand | None:
        if future.done():
            result = future.result()
            replicated = self._after_put(result, wait)
            if replicated is None:
                return self.put_response(result, topic, queue_id, uniq)
            return self._answer_replicated(ctx, result, replicated, topic, queue_id, uniq)
        loop = self._loop
        assert loop is not None

        def finish(f: Future[PutResult]) -> None:
            try:
                result = f.result()
            except Exception as exc:  # the store resolves futures with results only
                logger.exception("store put failed")
                ctx.send_response(error(ResponseCode.SYSTEM_ERROR, f"store put failed: {exc}"))
                return
            replicated = self._after_put(result, wait)
            if replicated is None:
                ctx.send_response(self.put_response(result, topic, queue_id, uniq))
                return
            response = self._answer_replicated(ctx, result, replicated, topic, queue_id, uniq)
            if response is not None:
                ctx.send_response(response)

        future.add_done_callback(partial(finish_on_loop, loop, finish))
        return None

    def _answer_replicated(
        self,
        ctx: RequestContext,
        result: PutResult,
        replicated: PutStatus | ReplicaWait,
        topic: str,
        queue_id: int,
        uniq: str | None,
    ) -> RemotingCommand | None:
        """The answer of a SYNC_MASTER send: once slaves hold the message, or with
        FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE (the message is stored either way)."""
        if isinstance(replicated, PutStatus):
            if replicated is not _PUT_OK and result.status is _PUT_OK:
                result.status = replicated
            return self.put_response(result, topic, queue_id, uniq)

        def done(status: PutStatus) -> None:
            if status is not _PUT_OK and result.status is _PUT_OK:
                result.status = status
            ctx.send_response(self.put_response(result, topic, queue_id, uniq))

        replicated.callback = done
        return None

    def put_response(
        self, result: PutResult, topic: str, queue_id: int, uniq: str | None
    ) -> RemotingCommand:
        """The send answer for a store result."""
        status = result.status
        # PUT_OK by identity first: a dict lookup hashes the Enum in Python (hot path)
        if status is _PUT_OK:
            code: int = _SUCCESS
        else:
            code = _STATUS_CODE.get(status, ResponseCode.SYSTEM_ERROR)
        if code in _STORED_CODES and result.msg_num > 0:
            if result.__class__ is not _DuplicatePut:  # a dropped duplicate stored nothing
                self.stats.on_put(topic, result.msg_num, result.wrote_bytes)
            config = self.broker.config
            prefix = self._msg_id_prefix
            offsets = result.offsets
            if len(offsets) == 1:
                msg_id = f"{prefix}{offsets[0]:016X}"
            else:  # one C call over the batch's offsets
                msg_id = offset_msg_ids(prefix, offsets)
            # SendMessageResponseHeader's extFields, built directly (hot path)
            ext = {
                "msgId": msg_id,
                "queueId": str(queue_id),
                "queueOffset": str(result.logics_offset),
                "MSG_REGION": config.region_id,
                "TRACE_ON": "true" if config.trace_on else "false",
            }
            if uniq is not None:
                ext["transactionId"] = uniq
            # = RemotingCommand.response(code, None, ext), positional (hot path)
            return RemotingCommand(code, _PYTHON, CURRENT_VERSION, 0, FLAG_RESPONSE, None, ext)
        if status is PutStatus.CREATE_MAPPED_FILE_FAILED:
            remark = "create mapped file failed, server is busy or broken." + (
                f" ({result.remark})" if result.remark else ""
            )
        else:
            remark = result.remark or result.status.value
        return error(code, remark)
