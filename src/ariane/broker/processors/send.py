"""Sending: SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (RocketMQ
``SendMessageProcessor`` / ``AbstractSendMessageProcessor``; CONSUMER_SEND_MSG_BACK is in
``send_back`` and shares this module's rewriters).

How it works, per send: parse the header (V1 or the short-key V2, one type afterwards); check
the broker may be written, the topic name, that it is not a system topic closed to senders;
find the topic or auto-create it from its template; check the queue id (a negative one picks a
random writable queue) and the topic's write permission; decode the properties once, add
``UNIQ_KEY`` when the client did not, ``CLUSTER``, and (as RocketMQ 5 does, for message
trace) the broker's ``MSG_REGION`` and ``TRACE_ON``, appending them to the client's encoded
string instead of re-encoding it; run the *send interceptors*; append to the store. Under
ASYNC_FLUSH the store's future is already done and the answer goes out at once; under
SYNC_FLUSH the group commit completes a light :class:`~.send_sync.SyncSend` and the loop
answers a round's sends in bulk (``send_sync``). Then the
replication service is told (:meth:`BrokerReplication.after_put`): a SYNC_MASTER answers once
enough slaves hold the message, or FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE. Before the put,
a SYNC_MASTER with ``enableAutoInSyncReplicas`` and fewer replicas in sync than
``minInSyncReplicas`` refuses the send (SYSTEM_ERROR "in-sync replicas not enough", nothing
stored), as RocketMQ 5 answers IN_SYNC_REPLICAS_NOT_ENOUGH.
``header.batch`` (not the request code) selects the batch path.

Two seams rewrite messages before the store: *send interceptors* see each client send with
its header (the built-in :class:`~ariane.broker.retry.RetryToDlqInterceptor` sends ``%RETRY%``
messages past their maximum reconsume count, or of a group holding queue locks, to
``%DLQ%<group>``); *message rewriters* see every single
message the broker stores for a client, sends and CONSUMER_SEND_MSG_BACK alike (the built-in
:class:`~ariane.broker.schedule.DelayLevelRewriter` moves delayed messages to
``SCHEDULE_TOPIC_XXXX``). Between the two, a ``TRAN_MSG=true`` send becomes a half message
(:meth:`ariane.broker.transaction.TransactionalMessageService.prepare`). Answers carry the
queue id the client asked for (or was given), whatever queue the message was stored in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ariane.broker.loop_round import LoopRound
from ariane.broker.processors import error
from ariane.broker.processors.send_batch import AppendScanned, BatchSends
from ariane.broker.processors.send_check import NOT_ALLOWED_SEND_TOPICS, check_send
from ariane.broker.processors.send_run import RUN_CODES, SendRun
from ariane.broker.processors.send_sync import LoopAnswers, SyncSend
from ariane.broker.retry import DLQ_PERM, RetryToDlqInterceptor
from ariane.broker.schedule import DelayLevelRewriter, delay_level_of
from ariane.common.message import HostPort
from ariane.common.msgid import UniqueIdGenerator
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    MSG_REGION,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    WAIT_STORE_MSG_OK,
    decode_properties,
)
from ariane.common.sysflag import (
    MULTI_TAGS_FLAG,
    TRANSACTION_NOT_TYPE,
    reset_transaction_value,
    transaction_value,
)
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import (
    RemotingCommand,
)
from ariane.remoting.server import RemotingServer
from ariane.store import (
    MessageInner,
)
from ariane.store.dispatch import ReputService
from ariane.store.put_native import new_inner

if TYPE_CHECKING:
    from ariane.broker.transaction import TransactionBrokerContext

__all__ = [
    "DLQ_PERM",
    "NOT_ALLOWED_SEND_TOPICS",
    "MessageRewriter",
    "SendInterceptor",
    "SendMessageProcessor",
]

logger = logging.getLogger(__name__)


class SendInterceptor(Protocol):
    """Rewrites a message before it is stored (the seam for retry/DLQ, delay, transactions).

    ``before_put`` may change ``inner`` (topic, queue, properties; set
    ``inner.properties_string = None`` after changing ``inner.properties``) and returns an
    error response to refuse the message, or ``None`` to go on.
    """

    def before_put(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: h.SendMessageRequestHeader,
        inner: MessageInner,
    ) -> RemotingCommand | None:
        """Inspect or rewrite one message."""
        ...


class MessageRewriter(Protocol):
    """Rewrites every single message right before it is stored (sends and send-backs).

    ``rewrite`` may change ``inner`` as a send interceptor may, and returns an error response
    to refuse it or ``None``.
    """

    def rewrite(self, inner: MessageInner) -> RemotingCommand | None:
        """Inspect or rewrite one message."""
        ...


class SendMessageProcessor(BatchSends):
    """Handles the send family.

    Args:
        broker: the broker whose store, topics and groups are used.
    """

    def __init__(self, broker: TransactionBrokerContext) -> None:
        super().__init__(broker)
        self.topics = broker.topics
        self.interceptors: list[SendInterceptor] = [RetryToDlqInterceptor(broker)]
        self.rewriters: list[MessageRewriter] = [
            DelayLevelRewriter(len(broker.store_config.delay_levels_ms))
        ]
        self._store_host = broker.store_host
        # a SYNC_MASTER with too few replicas in sync refuses before storing (5.x)
        self._refuse_put = broker.replication.refuse_put
        self._uniq = UniqueIdGenerator(broker.store_host.addr)
        store = broker.store
        self._clock = broker.store.clock
        # a batch of the common shape put straight from its body (store.batch_put); not on a
        # store whose log is not its own CommitLog files (DLedger: batches go through the
        # quorum), where append_scanned would answer None after the body's scan
        self._append_scanned: AppendScanned | None = (
            store.append_scanned if store.writes_blocks else None
        )
        self._max_props = broker.store_config.max_properties_length
        # SYNC_FLUSH single sends with a light completion answered in bulk (send_sync); not
        # on the DLedger store, whose puts complete through futures on the loop
        completion_submit = getattr(store, "completion_submit", None)
        self._submit_to: Callable[[MessageInner, SyncSend], None] | None = (
            None if completion_submit is None else completion_submit()
        )
        self._loop_answers: LoopAnswers[SyncSend] | None = None
        self.run: SendRun | None = None
        #: ASYNC_FLUSH: a light round run on the loop for a send a held pull waits for
        self.loop_round: LoopRound | None = None

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        self._loop = asyncio.get_running_loop()
        reput = getattr(self.store, "reput", None)
        if self._async_flush and isinstance(reput, ReputService):
            self.loop_round = LoopRound(reput, self.broker.hold.table, self._loop)
        server.register_processor(RequestCode.SEND_MESSAGE, self.send_v1)
        server.register_processor(RequestCode.SEND_MESSAGE_V2, self.send_v2)
        server.register_processor(RequestCode.SEND_BATCH_MESSAGE, self.send_v2)
        # a read's plain single sends in one pass (send_run), the rest as above
        self.run = SendRun(self, server.dispatcher)
        server.dispatcher.register_run_processor(RUN_CODES, self.run)

    # -- entry points ------------------------------------------------------------------------

    def send_v1(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """SEND_MESSAGE (10)."""
        header = h.SendMessageRequestHeader.from_ext_fields(request.ext_fields)
        return self.send(ctx, request, header)

    def send_v2(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)."""
        header = h.SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
        return self.send(ctx, request, header)

    def send(
        self, ctx: RequestContext, request: RemotingCommand, header: h.SendMessageRequestHeader
    ) -> RemotingCommand | None:
        """Check, store and answer one send request (single or batch)."""
        checked = check_send(self.broker, ctx, header)
        if isinstance(checked, RemotingCommand):
            return checked
        tc, queue_id = checked
        sys_flag = header.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        born = ctx.channel.attributes.get("born_host")
        if born is None:
            born = ctx.channel.attributes["born_host"] = _host_port(ctx.remote_addr)
        if header.batch:
            return self._send_batch(ctx, request, header, queue_id, sys_flag, born)
        props_text = header.properties or ""
        props = decode_properties(props_text)
        extra = ""
        uniq = props.get(UNIQ_KEY)
        if uniq is None:
            uniq = props[UNIQ_KEY] = self._uniq.next_id()
            extra = f"{UNIQ_KEY}\x01{uniq}\x02"
        if CLUSTER not in props:
            cluster = props[CLUSTER] = self.broker.config.broker_cluster_name
            extra += f"{CLUSTER}\x01{cluster}\x02"
        if MSG_REGION not in props:  # message trace: consumers' region and trace switch
            extra += self._stamp_trace(props)
        if extra and props_text and props_text[-1] != "\x02":
            props_text += "\x02"
        dedup_id = props.get(DEDUP)
        if dedup_id is not None:
            dedup_id = self._dedup_id(header.topic, dedup_id, props)
            if dedup_id is not None:
                first = self._dedup.seen(header.topic, dedup_id, self._clock.now_ms())  # type: ignore[union-attr]
                if first is not None:
                    return self._answer_duplicate(ctx, header.topic, (first,), uniq)
        inner = new_inner(  # MessageInner(...), compiled without its Python __init__
            header.topic, queue_id, request.body or b"", header.flag, props, sys_flag,
            header.born_timestamp, born, self._store_host, header.reconsume_times or 0, 0,
            props_text + extra,
        )  # fmt: skip
        for interceptor in self.interceptors:
            refused = interceptor.before_put(ctx, request, header, inner)
            if refused is not None:
                return refused
        if inner.properties.get(TRANSACTION_PREPARED) == "true" and _is_half_message(inner):
            if self.broker.config.reject_transaction_message:
                return self._transaction_refused()
            self.broker.transactions.prepare(inner, header.producer_group)
        elif transaction_value(inner.sys_flag):
            # a PREPARED/ROLLBACK type without TRAN_MSG (old clients' retries of transactional
            # messages) would be stored where no consumer ever sees it: store it as normal
            inner.sys_flag = reset_transaction_value(inner.sys_flag, TRANSACTION_NOT_TYPE)
        for rewriter in self.rewriters:
            refused = rewriter.rewrite(inner)
            if refused is not None:
                return refused
        topic = header.topic
        wait = inner.properties.get(WAIT_STORE_MSG_OK) != "false"
        too_few = self._refuse_put(wait)
        if too_few is not None:
            return error(ResponseCode.SYSTEM_ERROR, too_few)
        if self._async_flush:  # stored when put returns: no future, no thread hop
            if self.loop_round is not None:  # a held pull on the queue: dispatched after the read
                self.loop_round.claim(((inner.topic, inner.queue_id),))
            result = self.store.put_message(inner)
            if dedup_id is not None:
                self._remember(topic, (dedup_id,), queue_id, result)
            replicated = self._after_put(result, wait)
            if replicated is None:
                return self.put_response(result, topic, queue_id, uniq)
            return self._answer_replicated(ctx, result, replicated, topic, queue_id, uniq)
        if dedup_id is not None:
            appended, future = self.store.append_message(inner)
            self._remember(topic, (dedup_id,), queue_id, appended)
        elif self._submit_to is not None:  # completed by the group commit, answered in bulk
            return self._submit_sync(ctx, inner, topic, queue_id, uniq)
        else:
            future = self.store.submit_message(inner)
        return self._answer(ctx, future, topic, queue_id, uniq, wait)

    def _submit_sync(
        self, ctx: RequestContext, inner: MessageInner, topic: str, queue_id: int, uniq: str | None
    ) -> RemotingCommand | None:
        """Put under SYNC_FLUSH with a :class:`SyncSend` as the store's completion; the answer
        now if the store completed it at once, else None (``_answer_sync`` answers it)."""
        send = SyncSend(self._sync_answers(), ctx, topic, queue_id, uniq)
        assert self._submit_to is not None
        try:
            self._submit_to(inner, send)
        finally:
            send.submitting = False
        if not send.at_once:
            return None
        result = send.result
        assert result is not None
        replicated = self._after_put(result, inner.properties.get(WAIT_STORE_MSG_OK) != "false")
        if replicated is None:
            return self.put_response(result, topic, queue_id, uniq)
        return self._answer_replicated(ctx, result, replicated, topic, queue_id, uniq)

    def _sync_answers(self) -> LoopAnswers[SyncSend]:
        answers = self._loop_answers
        if answers is None:
            loop = self._loop
            assert loop is not None
            answers = self._loop_answers = LoopAnswers(loop, self._answer_sync)
        return answers

    def _answer_sync(self, send: SyncSend) -> None:
        """Answer a send the group commit completed (on the loop; it waited: WAIT is not
        false, or the store would have completed it at once)."""
        result = send.result
        assert result is not None
        ctx = send.ctx
        replicated = self._after_put(result, True)
        if replicated is None:
            ctx.send_response(self.put_response(result, send.topic, send.queue_id, send.uniq))
            return
        response = self._answer_replicated(
            ctx, result, replicated, send.topic, send.queue_id, send.uniq
        )
        if response is not None:
            ctx.send_response(response)

    def _transaction_refused(self) -> RemotingCommand:
        return error(
            ResponseCode.NO_PERMISSION,
            f"the broker[{self.broker.broker_addr}] sending transaction message is forbidden",
        )


def _is_half_message(inner: MessageInner) -> bool:
    """A transactional send (``TRAN_MSG=true``), unless it is an old client's retry of one
    (reconsumed and delayed: clients before 4.6.1 kept the property on retries)."""
    if inner.properties.get(TRANSACTION_PREPARED) != "true":
        return False
    return not (inner.reconsume_times > 0 and delay_level_of(inner.properties) > 0)


def _host_port(addr: str) -> HostPort:
    try:
        return HostPort.parse(addr)
    except ValueError:
        return HostPort(b"\x7f\x00\x00\x01", 0)
