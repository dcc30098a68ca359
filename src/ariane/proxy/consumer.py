"""Consuming over v2: POP receives with receipt handles, acks, invisibility changes, dead
letters, and the 5.1 offset RPCs over the pull path (RocketMQ proxy's
``ReceiveMessageActivity``, ``AckMessageActivity``, ``ChangeInvisibleDurationActivity``,
``ForwardMessageToDLQActivity``; the offset RPCs are Ariane's: upstream leaves them
UNIMPLEMENTED).

How it works: ReceiveMessage is one POP_MESSAGE on the client's channel (queue -1: every
queue of the topic; long polling inside the broker), answered as a stream: a status, the
messages, then ``delivery_timestamp``. Each message's receipt handle is the POP extra info plus
its commit-log offset (``startOffset popTime invisibleTime reviveQid retryFlag broker queueId
queueOffset commitLogOffset``, upstream's layout), which is all Ack, ChangeInvisibleDuration
and ForwardMessageToDeadLetterQueue need: ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME (the
answer makes the new handle) and CONSUMER_SEND_MSG_BACK to the DLQ followed by an ack.
Messages past the client's max attempts are sent to the DLQ instead of being delivered.

PullMessage, UpdateOffset, GetOffset and QueryOffset map onto PULL_MESSAGE,
UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET and GET_MIN/MAX_OFFSET /
SEARCH_OFFSET_BY_TIMESTAMP: the same offsets a 4.x consumer of the group sees.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ariane.acl.credentials import SessionCredentials
from ariane.client._pop_api import decode_pop_response, receipt_handle_of
from ariane.common.message import MessageExt
from ariane.common.pop import ReceiptHandle
from ariane.common.record import iter_records
from ariane.common.sysflag import PULL_SUBSCRIPTION, PULL_SUSPEND
from ariane.errors import ArianeError, CorruptionError, InvalidArgumentError
from ariane.proxy.clients import ClientSession
from ariane.proxy.convert import (
    duration_ms,
    expression_type,
    incoming,
    timestamp_ms,
    to_timestamp,
    validate_group,
    validate_topic,
)
from ariane.proxy.core import CallContext, ProxyCore, check_request, rpc
from ariane.proxy.renew import Lease
from ariane.proxy.settings import effective_settings
from ariane.proxy.status import ProxyError, from_remoting, overall_status, status
from ariane.proxy.trace import GrpcTracer
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["ConsumerService", "decode_handle"]

logger = logging.getLogger(__name__)

_NOT_FOUND_CODES = (
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.POLLING_TIMEOUT,
    ResponseCode.NO_MESSAGE,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
)


def decode_handle(text: str) -> ReceiptHandle:
    """A client's receipt handle; INVALID_RECEIPT_HANDLE when it is not one of ours."""
    try:
        return ReceiptHandle.decode(text)
    except InvalidArgumentError as exc:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None


class ConsumerService:
    """ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue,
    PullMessage, UpdateOffset, GetOffset and QueryOffset."""

    def __init__(self, core: ProxyCore, tracer: GrpcTracer | None = None) -> None:
        self.core = core
        self.tracer = tracer
        self.inflight = 0

    # -- receive -----------------------------------------------------------------------------------

    def _polling_ms(self, request: spb.ReceiveMessageRequest, ctx: CallContext) -> int:
        cfg = self.core.cfg
        remaining = ctx.remaining_ms()
        if request.HasField("long_polling_timeout"):
            wanted = duration_ms(request.long_polling_timeout)
        elif remaining is not None:
            timeout = ctx.session.settings.request_timeout if ctx.session.settings else None
            half = duration_ms(timeout) // 2 if timeout is not None else 1500
            wanted = remaining - half
        else:
            wanted = cfg.max_long_polling_ms
        polling = max(cfg.min_long_polling_ms, min(cfg.max_long_polling_ms, wanted))
        if remaining is not None and polling > remaining:
            if remaining < cfg.min_long_polling_ms:
                raise ProxyError(
                    pb.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check "
                    "network condition",
                )
            polling = remaining - 200
        return max(0, polling)

    def _invisible_ms(self, request: spb.ReceiveMessageRequest) -> int:
        cfg = self.core.cfg
        if request.auto_renew or not request.HasField("invisible_duration"):
            return cfg.default_invisible_time_ms
        ms = duration_ms(request.invisible_duration)
        if ms < cfg.min_invisible_time_ms:
            raise ProxyError(
                pb.ILLEGAL_INVISIBLE_TIME,
                f"the invisibleTime is too small. min is {cfg.min_invisible_time_ms}",
            )
        if ms > cfg.max_invisible_time_ms:
            raise ProxyError(
                pb.ILLEGAL_INVISIBLE_TIME,
                f"the invisibleTime is too large. max is {cfg.max_invisible_time_ms}",
            )
        return ms

    async def ReceiveMessage(
        self, request: spb.ReceiveMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        try:
            check_request(request)
            ctx = self.core.context(context)
        except ProxyError as exc:
            yield spb.ReceiveMessageResponse(status=status(exc.code, exc.message))
            return
        if self.inflight >= self.core.cfg.max_inflight_receives:
            yield spb.ReceiveMessageResponse(
                status=status(pb.TOO_MANY_REQUESTS, "too many receives in flight, retry later")
            )
            return
        self.inflight += 1
        try:
            frames = await self._receive(request, ctx)
        except ProxyError as exc:
            frames = [spb.ReceiveMessageResponse(status=status(exc.code, exc.message))]
        except Exception as exc:
            logger.exception("ReceiveMessage raised")
            frames = [
                spb.ReceiveMessageResponse(
                    status=status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
                )
            ]
        finally:
            self.inflight -= 1
        for frame in frames:
            yield frame
        yield spb.ReceiveMessageResponse(delivery_timestamp=to_timestamp(self.core.now_ms()))

    async def _receive(
        self, request: spb.ReceiveMessageRequest, ctx: CallContext
    ) -> list[spb.ReceiveMessageResponse]:
        polling = self._polling_ms(request, ctx)
        topic = validate_topic(request.message_queue.topic)
        group = validate_group(request.group)
        settings = ctx.session.settings
        if settings is None:
            # a client that does not wait for its settings reply (the Python SimpleConsumer)
            # may receive first: use what the reply would say, from the group's config
            defaults = pb.Settings(
                client_type=pb.SIMPLE_CONSUMER,
                subscription=pb.Subscription(group=pb.Resource(name=group)),
            )
            settings = effective_settings(
                defaults, self.core.cfg, self.core.broker.groups.find(group)
            )
        invisible = self._invisible_ms(request)
        expression = request.filter_expression
        fifo = settings.subscription.fifo
        max_attempts = settings.backoff_policy.max_attempts or 17
        batch = max(1, min(request.batch_size or self.core.cfg.max_batch_size, 32))
        header = h.PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=batch,
            invisible_time=invisible,
            poll_time=polling,
            born_time=self.core.now_ms(),
            init_mode=0,
            exp_type=expression_type(expression),
            exp=expression.expression or "*",
            order=fifo,
            attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
        )
        command = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        response = await self.core.invoke(ctx, command, polling + 5_000)
        if response.code in _NOT_FOUND_CODES:
            return [
                spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
            ]
        if response.code == ResponseCode.POLLING_FULL:
            return [spb.ReceiveMessageResponse(status=status(pb.TOO_MANY_REQUESTS, "polling full"))]
        if response.code != ResponseCode.SUCCESS:
            raise from_remoting(response.code, response.remark)
        try:
            popped = decode_pop_response(response, self.core.broker_name, fifo).messages
            handles = [
                receipt_handle_of(m).with_commit_log_offset(m.commit_log_offset) for m in popped
            ]
        except (ArianeError, CorruptionError) as exc:
            raise ProxyError(
                pb.INTERNAL_SERVER_ERROR, f"broker answer does not decode: {exc}"
            ) from None
        delivered = []
        traced: list[MessageExt] = []
        now = self.core.now_ms()
        for ext, handle in zip(popped, handles, strict=True):
            if ext.reconsume_times >= max_attempts and not fifo:
                await self._to_dlq(ctx, topic, group, ext.msg_id, handle)
                continue
            message = incoming(ext, topic=topic, receipt_handle=handle.encode(), now_ms=now)
            delivered.append(spb.ReceiveMessageResponse(message=message))
            traced.append(ext)
            if request.auto_renew:
                ctx.session.credentials = ctx.credentials
                ctx.session.leases.add(handle.encode(), Lease(group, topic, handle, now))
        if not delivered:
            return [
                spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no match message"))
            ]
        if self.tracer is not None:
            self.tracer.sub_before(
                ctx, group, traced, [d.message.system_properties.receipt_handle for d in delivered]
            )
        return [spb.ReceiveMessageResponse(status=status()), *delivered]

    # -- ack, change, dead letters -----------------------------------------------------------------

    async def _ack(
        self, ctx: CallContext, topic: str, group: str, handle: ReceiptHandle
    ) -> RemotingCommand:
        header = h.AckMessageRequestHeader(
            consumer_group=group,
            topic=handle.real_topic(topic, group),
            queue_id=handle.queue_id,
            extra_info=handle.encode(),
            offset=handle.queue_offset,
        )
        command = RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
        return await self.core.invoke(ctx, command)

    async def _ack_entry(
        self, ctx: CallContext, topic: str, group: str, entry: spb.AckMessageEntry
    ) -> spb.AckMessageResultEntry:
        result = spb.AckMessageResultEntry(
            message_id=entry.message_id, receipt_handle=entry.receipt_handle
        )
        try:
            handle = decode_handle(ctx.session.leases.latest(entry.receipt_handle))
            ctx.session.leases.settle(entry.receipt_handle)
            if handle.is_expired(self.core.now_ms()):
                raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
            response = await self._ack(ctx, topic, group, handle)
            if response.code == ResponseCode.SUCCESS:
                result.status.CopyFrom(status())
                if self.tracer is not None:
                    self.tracer.sub_after(
                        ctx, group, entry.message_id, entry.receipt_handle, success=True
                    )
            elif response.code == ResponseCode.NO_MESSAGE:
                result.status.CopyFrom(
                    status(pb.INVALID_RECEIPT_HANDLE, response.remark or "message already acked")
                )
            else:
                error = from_remoting(response.code, response.remark)
                result.status.CopyFrom(status(error.code, f"ack failed: {error.message}"))
        except ProxyError as exc:
            result.status.CopyFrom(status(exc.code, exc.message))
        return result

    @rpc(spb.AckMessageResponse)
    async def AckMessage(
        self, request: spb.AckMessageRequest, ctx: CallContext
    ) -> spb.AckMessageResponse:
        topic = validate_topic(request.topic)
        group = validate_group(request.group)
        if not request.entries:
            raise ProxyError(pb.BAD_REQUEST, "no entry to ack")
        entries = [await self._ack_entry(ctx, topic, group, e) for e in request.entries]
        return spb.AckMessageResponse(status=overall_status(entries), entries=entries)

    @rpc(spb.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(
        self, request: spb.ChangeInvisibleDurationRequest, ctx: CallContext
    ) -> spb.ChangeInvisibleDurationResponse:
        topic = validate_topic(request.topic)
        group = validate_group(request.group)
        ms = duration_ms(request.invisible_duration)
        if not 0 <= ms <= self.core.cfg.max_invisible_time_ms:
            raise ProxyError(
                pb.ILLEGAL_INVISIBLE_TIME,
                f"the invisibleTime must be within [0, {self.core.cfg.max_invisible_time_ms}] ms",
            )
        handle = decode_handle(ctx.session.leases.latest(request.receipt_handle))
        ctx.session.leases.settle(request.receipt_handle)
        if handle.is_expired(self.core.now_ms()):
            raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        new = await self._change(ctx.session, ctx.credentials, group, topic, handle, ms)
        if self.tracer is not None:
            self.tracer.sub_after(
                ctx, group, request.message_id, request.receipt_handle, success=False
            )
        return spb.ChangeInvisibleDurationResponse(status=status(), receipt_handle=new.encode())

    async def _change(
        self,
        session: ClientSession,
        credentials: SessionCredentials | None,
        group: str,
        topic: str,
        handle: ReceiptHandle,
        ms: int,
    ) -> ReceiptHandle:
        """CHANGE_MESSAGE_INVISIBLETIME; the new handle."""
        header = h.ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=handle.real_topic(topic, group),
            queue_id=handle.queue_id,
            extra_info=handle.encode(),
            offset=handle.queue_offset,
            invisible_time=ms,
        )
        command = RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
        )
        response = await self.core.invoke_for(session, credentials, command)
        if response.code == ResponseCode.NO_MESSAGE:
            raise ProxyError(pb.INVALID_RECEIPT_HANDLE, response.remark or "message already acked")
        if response.code != ResponseCode.SUCCESS:
            error = from_remoting(response.code, response.remark)
            raise ProxyError(error.code, f"changeInvisibleDuration failed: {error.message}")
        answer = h.ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        return ReceiptHandle(
            handle.queue_offset, answer.pop_time, answer.invisible_time, answer.revive_qid,
            handle.retry_flag, handle.broker_name, handle.queue_id, handle.queue_offset,
            handle.commit_log_offset,
        )  # fmt: skip

    async def renew(self) -> int:
        """Renew the auto-renewed leases that end soon (called every few seconds); how many."""
        now = self.core.now_ms()
        renewed = 0
        for session in list(self.core.clients.sessions.values()):
            for key, lease in session.leases.due(now):
                try:
                    handle = await self._change(
                        session, session.credentials, lease.group, lease.topic, lease.handle,
                        lease.next_invisible_ms(),
                    )  # fmt: skip
                except ProxyError as exc:
                    logger.info("renewal of %s failed: %s", key, exc.message)
                    if exc.code == pb.INVALID_RECEIPT_HANDLE:
                        session.leases.settle(key)
                    continue
                session.leases.renewed(key, handle)
                renewed += 1
        return renewed

    async def _to_dlq(
        self, ctx: CallContext, topic: str, group: str, msg_id: str, handle: ReceiptHandle
    ) -> None:
        """CONSUMER_SEND_MSG_BACK to ``%DLQ%<group>`` (delay level -1), then the ack."""
        if handle.commit_log_offset < 0:
            raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        header = h.ConsumerSendMsgBackRequestHeader(
            offset=handle.commit_log_offset,
            group=group,
            delay_level=-1,
            origin_msg_id=msg_id,
            origin_topic=topic,
            max_reconsume_times=0,
        )
        command = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
        )
        await self.core.invoke_ok(ctx, command)
        response = await self._ack(ctx, topic, group, handle)
        if response.code not in (ResponseCode.SUCCESS, ResponseCode.NO_MESSAGE):
            logger.warning("dead-lettered message %s not acked: %s", msg_id, response.remark)

    @rpc(spb.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, ctx: CallContext
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        topic = validate_topic(request.topic)
        group = validate_group(request.group)
        handle = decode_handle(ctx.session.leases.latest(request.receipt_handle))
        ctx.session.leases.settle(request.receipt_handle)
        await self._to_dlq(ctx, topic, group, request.message_id, handle)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status())

    # -- the offset RPCs ---------------------------------------------------------------------------

    def _queue(self, mq: pb.MessageQueue) -> tuple[str, int]:
        topic = validate_topic(mq.topic)
        if mq.id < 0:
            raise ProxyError(pb.BAD_REQUEST, f"queue id must be >= 0, got {mq.id}")
        return topic, mq.id

    async def PullMessage(
        self, request: spb.PullMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[spb.PullMessageResponse]:
        try:
            check_request(request)
            ctx = self.core.context(context)
            if self.inflight >= self.core.cfg.max_inflight_receives:
                raise ProxyError(pb.TOO_MANY_REQUESTS, "too many receives in flight, retry later")
            self.inflight += 1
            try:
                frames = await self._pull(request, ctx)
            finally:
                self.inflight -= 1
        except ProxyError as exc:
            frames = [spb.PullMessageResponse(status=status(exc.code, exc.message))]
        except Exception as exc:
            logger.exception("PullMessage raised")
            frames = [
                spb.PullMessageResponse(
                    status=status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
                )
            ]
        for frame in frames:
            yield frame

    async def _pull(
        self, request: spb.PullMessageRequest, ctx: CallContext
    ) -> list[spb.PullMessageResponse]:
        group = validate_group(request.group)
        topic, queue_id = self._queue(request.message_queue)
        if request.offset < 0:
            raise ProxyError(pb.ILLEGAL_OFFSET, f"offset must be >= 0, got {request.offset}")
        polling = min(duration_ms(request.long_polling_timeout), self.core.cfg.max_long_polling_ms)
        remaining = ctx.remaining_ms()
        if remaining is not None:
            polling = max(0, min(polling, remaining - 500))
        expression = request.filter_expression
        header = h.PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=request.offset,
            max_msg_nums=max(1, min(request.batch_size or self.core.cfg.max_batch_size, 1024)),
            sys_flag=PULL_SUBSCRIPTION | (PULL_SUSPEND if polling > 0 else 0),
            commit_offset=0,
            suspend_timeout_millis=polling,
            sub_version=0,
            subscription=expression.expression or "*",
            expression_type=expression_type(expression),
        )
        command = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = await self.core.invoke(ctx, command, polling + 5_000)
        if response.code not in (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            raise from_remoting(response.code, response.remark)
        answer = h.PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        nxt = spb.PullMessageResponse(next_offset=answer.next_begin_offset)
        if response.code == ResponseCode.PULL_OFFSET_MOVED:
            message = (
                f"offset {request.offset} is out of [{answer.min_offset}, {answer.max_offset}]"
            )
            return [spb.PullMessageResponse(status=status(pb.ILLEGAL_OFFSET, message)), nxt]
        if response.code != ResponseCode.SUCCESS:
            return [
                spb.PullMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message")),
                nxt,
            ]
        now = self.core.now_ms()
        messages = [
            spb.PullMessageResponse(message=incoming(ext, now_ms=now))
            for ext in iter_records(response.body or b"", decompress=True)
        ]
        return [spb.PullMessageResponse(status=status()), *messages, nxt]

    @rpc(spb.UpdateOffsetResponse)
    async def UpdateOffset(
        self, request: spb.UpdateOffsetRequest, ctx: CallContext
    ) -> spb.UpdateOffsetResponse:
        group = validate_group(request.group)
        topic, queue_id = self._queue(request.message_queue)
        if request.offset < 0:
            raise ProxyError(pb.ILLEGAL_OFFSET, f"offset must be >= 0, got {request.offset}")
        header = h.UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=request.offset
        )
        command = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()
        )
        await self.core.invoke_ok(ctx, command)
        return spb.UpdateOffsetResponse(status=status())

    @rpc(spb.GetOffsetResponse)
    async def GetOffset(
        self, request: spb.GetOffsetRequest, ctx: CallContext
    ) -> spb.GetOffsetResponse:
        group = validate_group(request.group)
        topic, queue_id = self._queue(request.message_queue)
        header = h.QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id
        )
        command = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
        response = await self.core.invoke(ctx, command)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            raise ProxyError(
                pb.OFFSET_NOT_FOUND, f"group {group} has no offset in {topic} queue {queue_id}"
            )
        if response.code != ResponseCode.SUCCESS:
            raise from_remoting(response.code, response.remark)
        answer = h.QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields)
        return spb.GetOffsetResponse(status=status(), offset=answer.offset)

    @rpc(spb.QueryOffsetResponse)
    async def QueryOffset(
        self, request: spb.QueryOffsetRequest, ctx: CallContext
    ) -> spb.QueryOffsetResponse:
        topic, queue_id = self._queue(request.message_queue)
        policy = request.query_offset_policy
        if policy == pb.BEGINNING:
            code = RequestCode.GET_MIN_OFFSET
            ext = h.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id).to_ext_fields()
        elif policy == pb.END:
            code = RequestCode.GET_MAX_OFFSET
            ext = h.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id).to_ext_fields()
        elif policy == pb.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise ProxyError(pb.BAD_REQUEST, "the TIMESTAMP policy needs a timestamp")
            code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
            ext = h.SearchOffsetRequestHeader(
                topic=topic, queue_id=queue_id, timestamp=timestamp_ms(request.timestamp)
            ).to_ext_fields()
        else:
            raise ProxyError(pb.BAD_REQUEST, f"unknown query offset policy {policy}")
        response = await self.core.invoke_ok(ctx, RemotingCommand.request(code, ext))
        offset = int(response.ext_fields.get("offset", "0"))
        return spb.QueryOffsetResponse(status=status(), offset=offset)
