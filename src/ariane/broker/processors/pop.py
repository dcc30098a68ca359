"""The POP family over remoting: POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO (RocketMQ 5's
``PopMessageProcessor``, ``AckMessageProcessor``, ``ChangeInvisibleTimeProcessor``,
``PeekMessageProcessor``, ``NotificationProcessor``, ``PollingInfoProcessor``).

How it works: each handler turns the request header into a call of the broker's POP API
(:mod:`ariane.broker.pop`, which the gRPC proxy calls as well) and the result into the
response. A POP that finds messages under ASYNC_FLUSH is answered at once; one that must wait
(long polling, or its checkpoints' SYNC_FLUSH) continues as a task, and stops waiting when its
connection closes. A missing or "0" ``bornTime`` is the broker's now, as upstream does.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from ariane.broker.context import BrokerContext
from ariane.broker.pop import PopConsumption, PopRequest, PopResult
from ariane.broker.pop.service import with_born_time
from ariane.broker.processors import error, ok
from ariane.remoting.dispatch import ProcessResult, RequestContext
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.headers import pop as hp
from ariane.remoting.server import RemotingServer

__all__ = ["PopContext", "PopMessageProcessor"]


class PopContext(BrokerContext, Protocol):
    """The broker as the POP processors see it."""

    pop: PopConsumption


def _pop_response(result: PopResult) -> RemotingCommand:
    if result.code not in (
        ResponseCode.SUCCESS,
        ResponseCode.POLLING_TIMEOUT,
        ResponseCode.POLLING_FULL,
    ):
        return error(result.code, result.remark)
    ext = hp.PopMessageResponseHeader(
        pop_time=result.pop_time,
        invisible_time=result.invisible_time,
        revive_qid=result.revive_qid,
        rest_num=result.rest_num,
        start_offset_info=result.start_offset_info,
        msg_offset_info=result.msg_offset_info,
        order_count_info=result.order_count_info,
    ).to_ext_fields()
    body = b"".join(result.records) if result.records else None
    return RemotingCommand.response(result.code, result.remark, ext, body)


class PopMessageProcessor:
    """Handles the POP family.

    Args:
        broker: the broker (its ``pop`` is used).
    """

    def __init__(self, broker: PopContext) -> None:
        self.broker = broker
        self.pop: PopConsumption = broker.pop

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.POP_MESSAGE, self.pop_message)
        server.register_processor(RequestCode.ACK_MESSAGE, self.ack_message)
        server.register_processor(RequestCode.BATCH_ACK_MESSAGE, self.batch_ack_message)
        server.register_processor(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time
        )
        server.register_processor(RequestCode.PEEK_MESSAGE, self.peek_message)
        server.register_processor(RequestCode.NOTIFICATION, self.notification)
        server.register_processor(RequestCode.POLLING_INFO, self.polling_info)

    def _born(self, request: RemotingCommand) -> None:
        ext = request.ext_fields
        if ext.get("bornTime") in (None, "", "0"):
            ext["bornTime"] = str(self.broker.clock.now_ms())

    # -- POP -------------------------------------------------------------------------------------

    def pop_message(self, ctx: RequestContext, request: RemotingCommand) -> ProcessResult:
        """POP_MESSAGE (200050)."""
        self._born(request)
        header = hp.PopMessageRequestHeader.from_ext_fields(request.ext_fields)
        req = PopRequest(
            header.consumer_group, header.topic, header.queue_id if header.queue_id >= 0 else -1,
            header.max_msg_nums, header.invisible_time, header.poll_time, header.born_time,
            header.init_mode, header.exp_type, header.exp, header.order, header.attempt_id,
        )  # fmt: skip
        req = with_born_time(req, header.born_time)
        service = self.pop.service
        result, pop = service.pop_now(req)
        waits = pop is not None and (
            any(not f.done() for f in pop.pending)
            or (result.code == ResponseCode.POLLING_TIMEOUT and req.poll_time_ms > 0)
        )
        if not waits:
            return _pop_response(result)
        channel = ctx.channel

        async def later() -> RemotingCommand:
            final = await service.pop(req, lambda: channel.is_active, (result, pop))
            return _pop_response(final)

        return later()

    # -- ACK -------------------------------------------------------------------------------------

    def ack_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """ACK_MESSAGE (200051)."""
        header = hp.AckMessageRequestHeader.from_ext_fields(request.ext_fields)
        result = self.pop.ack(
            header.consumer_group, header.topic, header.queue_id, header.offset, header.extra_info
        )
        return ok() if result.ok else error(result.code, result.remark)

    def batch_ack_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """BATCH_ACK_MESSAGE (200151): JSON body, no header."""
        if not request.body:
            return error(ResponseCode.NO_MESSAGE, "batch ack without a body")
        result = self.pop.acks.batch_ack(request.body)
        return ok() if result.ok else error(result.code, result.remark)

    def change_invisible_time(self, ctx: RequestContext, request: RemotingCommand) -> ProcessResult:
        """CHANGE_MESSAGE_INVISIBLETIME (200053)."""
        header = hp.ChangeInvisibleTimeRequestHeader.from_ext_fields(request.ext_fields)
        acks = self.pop.acks
        result, pending = acks.change_invisible_time(
            header.consumer_group, header.topic, header.queue_id, header.offset,
            header.extra_info, header.invisible_time,
        )  # fmt: skip

        def answer() -> RemotingCommand:
            if not result.ok:
                return error(result.code, result.remark)
            if pending and not pending[0].result().stored:
                return error(ResponseCode.SYSTEM_ERROR, "change invisible time failed")
            ext = hp.ChangeInvisibleTimeResponseHeader(
                pop_time=result.pop_time,
                invisible_time=result.invisible_time,
                revive_qid=result.revive_qid,
            ).to_ext_fields()
            return ok(ext)

        if all(f.done() for f in pending):
            return answer()

        async def later() -> RemotingCommand:
            for future in pending:
                await asyncio.wrap_future(future)
            return answer()

        return later()

    # -- PEEK, NOTIFICATION, POLLING_INFO ----------------------------------------------------------

    def peek_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """PEEK_MESSAGE (200052)."""
        header = hp.PeekMessageRequestHeader.from_ext_fields(request.ext_fields)
        result = self.pop.peeks.peek(
            header.consumer_group, header.topic, header.queue_id, header.max_msg_nums
        )
        if result.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND):
            return error(result.code, result.remark)
        ext = hp.PopMessageResponseHeader(
            pop_time=0, invisible_time=0, revive_qid=0, rest_num=result.rest_num
        ).to_ext_fields()
        body = b"".join(result.records) if result.records else None
        return RemotingCommand.response(result.code, result.remark, ext, body)

    def notification(self, ctx: RequestContext, request: RemotingCommand) -> ProcessResult:
        """NOTIFICATION (200054): answered when there is something to pop or the time is up."""
        self._born(request)
        header = hp.NotificationRequestHeader.from_ext_fields(request.ext_fields)
        channel = ctx.channel

        async def run() -> RemotingCommand:
            result = await self.pop.peeks.notification(
                header.consumer_group, header.topic, header.queue_id, header.poll_time,
                header.born_time, header.order, header.attempt_id, lambda: channel.is_active,
            )  # fmt: skip
            if result.code != ResponseCode.SUCCESS:
                return error(result.code, result.remark)
            ext = hp.NotificationResponseHeader(
                has_msg=result.has_msg, polling_full=result.polling_full
            ).to_ext_fields()
            return ok(ext)

        return run()

    def polling_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """POLLING_INFO (200055)."""
        header = hp.PollingInfoRequestHeader.from_ext_fields(request.ext_fields)
        code, remark, num = self.pop.peeks.polling_info(
            header.consumer_group, header.topic, header.queue_id
        )
        if code != ResponseCode.SUCCESS:
            return error(code, remark)
        return ok(hp.PollingInfoResponseHeader(polling_num=num).to_ext_fields())
