"""CONSUMER_SEND_MSG_BACK: a consumer hands back a message it failed to process (RocketMQ
``SendMessageProcessor.consumerSendMsgBack``; the retry/DLQ routing is ``broker.retry``).

How it works: the message is read back from the CommitLog by its physical offset, gets
``RETRY_TOPIC`` and ``ORIGIN_MESSAGE_ID``, and is stored again with one more reconsume count
in ``%RETRY%<group>`` (or, past the group's maximum, in ``%DLQ%<group>``). It goes through the
same rewriters as a send (delay levels, timers), so a retry waits out its delay level. The
answer is given when the put completes; under SYNC_FLUSH that is later, on the event loop.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING

from ariane.broker.processors import error, finish_on_loop
from ariane.broker.processors.send import MessageRewriter
from ariane.broker.retry import max_reconsume_times, route_retry
from ariane.common.properties import DELAY, ORIGIN_MESSAGE_ID, RETRY_TOPIC
from ariane.common.record import decode_record
from ariane.common.sysflag import PERM_WRITE
from ariane.errors import CorruptionError
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer
from ariane.store import MessageInner, PutResult

if TYPE_CHECKING:
    from ariane.broker.transaction import TransactionBrokerContext

__all__ = ["SendBackProcessor"]


class SendBackProcessor:
    """Handles CONSUMER_SEND_MSG_BACK.

    Args:
        broker: the broker whose store and groups are used.
        rewriters: the send path's rewriters (the same list object, so rewriters added to
            the send processor later apply to retries too).
    """

    def __init__(self, broker: TransactionBrokerContext, rewriters: list[MessageRewriter]) -> None:
        self.broker = broker
        self.store = broker.store
        self.rewriters = rewriters
        self._store_host = broker.store_host
        self._after_put = broker.replication.after_put
        self._loop: asyncio.AbstractEventLoop | None = None

    def register(self, server: RemotingServer) -> None:
        """Register the handler on ``server``."""
        self._loop = asyncio.get_running_loop()
        server.register_processor(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back)

    def send_back(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """CONSUMER_SEND_MSG_BACK (36): re-store a message the consumer failed to process in
        ``%RETRY%<group>`` with delay level ``delayLevel`` (0: 3 + its reconsume count) or,
        past the maximum reconsume count (``maxReconsumeTimes`` from clients of version
        V3_4_9 and later, else the group's ``retryMaxTimes``) or with ``delayLevel`` < 0, in
        the write-only ``%DLQ%<group>``. The rewriters then send the retry message through the
        delay levels.
        """
        header = h.ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        group = header.group
        cfg = broker.groups.find(group)
        if cfg is None:
            return error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        if not broker.config.broker_permission & PERM_WRITE:
            return error(
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.broker_addr}] sending message is forbidden",
            )
        if cfg.retry_queue_nums <= 0:
            return RemotingCommand.response(ResponseCode.SUCCESS)
        record = self.store.look_message_by_offset(header.offset)
        if record is None:
            return error(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        try:
            msg, _ = decode_record(record)
        except CorruptionError as exc:
            return error(ResponseCode.SYSTEM_ERROR, f"stored message does not decode: {exc}")
        max_times = max_reconsume_times(cfg, request.version, header.max_reconsume_times)
        props = dict(msg.properties)
        props.setdefault(RETRY_TOPIC, msg.topic)
        props.setdefault(ORIGIN_MESSAGE_ID, header.origin_msg_id or msg.msg_id)
        delay = header.delay_level
        route = route_retry(
            broker, cfg, group, dead=msg.reconsume_times >= max_times or delay < 0,
            reconsume_times=msg.reconsume_times, delay_level=delay,
        )  # fmt: skip
        if route.delay_level is None:
            props.pop(DELAY, None)
        else:
            props[DELAY] = str(route.delay_level)
        if not route.config.perm & PERM_WRITE:
            return error(
                ResponseCode.NO_PERMISSION,
                f"the topic[{route.topic}] sending message is forbidden",
            )
        inner = MessageInner(
            route.topic, route.queue_id, msg.body, msg.flag, props, msg.sys_flag, msg.born_timestamp_ms,
            msg.born_host, self._store_host, msg.reconsume_times + 1,
        )  # fmt: skip
        for rewriter in self.rewriters:
            refused = rewriter.rewrite(inner)
            if refused is not None:
                return refused
        future = self.store.submit_message(inner)
        if future.done():
            result = future.result()
            self._after_put(result, False)  # wake the transfer to slaves, no waiting
            return self._answer(result)
        loop = self._loop
        assert loop is not None

        def finish(f: Future[PutResult]) -> None:
            ctx.send_response(self._answer(f.result()))

        future.add_done_callback(partial(finish_on_loop, loop, finish))
        return None

    def _answer(self, result: PutResult) -> RemotingCommand:
        if result.msg_num > 0:
            return RemotingCommand.response(ResponseCode.SUCCESS)
        return error(ResponseCode.SYSTEM_ERROR, result.remark or result.status.value)
