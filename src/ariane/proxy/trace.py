"""4.x message traces for 5.x clients (``grpcMessageTraceEnable``).

How it works: RocketMQ 5 clients trace through OpenTelemetry (the ``trace_context`` that
Ariane stores and hands back unchanged); they never write the 4.x trace records that
``mqadmin queryMsgTraceById`` and the dashboard read. With ``grpcMessageTraceEnable=true`` the
proxy writes them on the clients' behalf, as a 4.x client with ``enableMsgTrace`` would: a
**Pub** per sent message (its group is the topic, as gRPC has no producer group), a
**SubBefore** per receive (one record per message delivered), a **SubAfter** per ack (success)
or per invisible-time change / dead-lettering (failure), and an **EndTransaction** per
transaction decision. Each capture becomes one message of the trace topic (``msgTraceTopicName``)
keyed by the traced message ids and keys, sent through the broker's own SEND path in the
caller's session (signed with its account under ACL; trace-topic sends need no permission).
Writes run in the background: a trace that cannot be written is logged, never fails the call.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence

from ariane.common import properties as p
from ariane.common import trace as t
from ariane.common.message import MessageExt
from ariane.common.topics import AUTO_CREATE_TOPIC
from ariane.errors import ArianeError
from ariane.proxy.convert import OutgoingMessage
from ariane.proxy.core import CallContext, ProxyCore
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["GrpcTracer"]

logger = logging.getLogger(__name__)

#: Receipt handles remembered to pair a SubAfter with its SubBefore (oldest forgotten first).
_MAX_REMEMBERED = 100_000


def _keys(props: dict[str, str]) -> str:
    return props.get(p.KEYS) or t.JAVA_NULL


class GrpcTracer:
    """Writes the 4.x trace records of gRPC calls.

    Args:
        core: the proxy core (broker access, clock, invoke).
    """

    def __init__(self, core: ProxyCore) -> None:
        self.core = core
        config = core.broker.config
        self.topic = config.msg_trace_topic_name
        self.region = config.region_id
        self._tasks: set[asyncio.Task[None]] = set()
        #: receipt handle -> (SubBefore request id, when received)
        self._received: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.written = 0
        self.failed = 0

    def pub(
        self,
        ctx: CallContext,
        msg: OutgoingMessage,
        offset_msg_id: str,
        cost_ms: int,
        success: bool,
    ) -> None:
        """A sent message (``offset_msg_id`` empty when it was not stored)."""
        props = msg.properties
        bean = t.TraceBean(
            topic=msg.topic,
            msg_id=props.get(p.UNIQ_KEY, ""),
            offset_msg_id=offset_msg_id,
            tags=props.get(p.TAGS) or t.JAVA_NULL,
            keys=_keys(props),
            store_host=self.core.broker.broker_addr,
            body_length=len(msg.body),
            msg_type=t.message_type_of(props),
        )
        self._emit(
            ctx,
            t.TraceContext(
                t.TraceType.Pub, self.core.now_ms() - cost_ms, self.region, msg.topic, cost_ms,
                success, beans=(bean,),
            ),
        )  # fmt: skip

    def sub_before(
        self,
        ctx: CallContext,
        group: str,
        messages: Sequence[MessageExt],
        handles: Sequence[str],
    ) -> None:
        """Messages handed to a consumer by one receive, with the handles it was given."""
        if not messages:
            return
        now = self.core.now_ms()
        request_id = uuid.uuid4().hex
        for handle in handles:
            self._received[handle] = (request_id, now)
        while len(self._received) > _MAX_REMEMBERED:
            self._received.popitem(last=False)
        beans = tuple(
            t.TraceBean(
                topic=m.topic,
                msg_id=m.msg_id,
                tags=m.tags or t.JAVA_NULL,
                keys=_keys(m.properties),
                retry_times=m.reconsume_times,
            )
            for m in messages
        )
        self._emit(
            ctx,
            t.TraceContext(
                t.TraceType.SubBefore, now, self.region, group, request_id=request_id,
                beans=beans,
            ),
        )  # fmt: skip

    def sub_after(
        self, ctx: CallContext, group: str, msg_id: str, handle: str, success: bool
    ) -> None:
        """A consumer settled a message: acked it (success) or gave it back (failure)."""
        request_id, received = self._received.pop(handle, ("", 0))
        now = self.core.now_ms()
        code = t.ConsumeReturnType.SUCCESS if success else t.ConsumeReturnType.FAILED
        self._emit(
            ctx,
            t.TraceContext(
                t.TraceType.SubAfter, now, self.region, group,
                max(0, now - received) if received else 0, success, request_id=request_id,
                context_code=int(code), beans=(t.TraceBean(msg_id=msg_id, keys=t.JAVA_NULL),),
            ),
        )  # fmt: skip

    def end_transaction(
        self, ctx: CallContext, topic: str, msg_id: str, transaction_id: str, state: str,
        from_check: bool,
    ) -> None:  # fmt: skip
        """A producer's COMMIT_MESSAGE / ROLLBACK_MESSAGE / UNKNOW decision."""
        bean = t.TraceBean(
            topic=topic,
            msg_id=msg_id,
            tags=t.JAVA_NULL,
            keys=t.JAVA_NULL,
            store_host=self.core.broker.broker_addr,
            msg_type=t.TraceMessageType.Trans_msg_Commit,
            transaction_id=transaction_id,
            transaction_state=state,
            from_transaction_check=from_check,
        )
        self._emit(
            ctx,
            t.TraceContext(
                t.TraceType.EndTransaction, self.core.now_ms(), self.region, topic,
                beans=(bean,),
            ),
        )  # fmt: skip

    # -- writing -------------------------------------------------------------------------------

    def _emit(self, ctx: CallContext, context: t.TraceContext) -> None:
        try:
            transfer = t.encode_context(context)
        except ArianeError as exc:  # a value holding a separator character
            logger.debug("gRPC trace not encoded: %s", exc)
            self.failed += 1
            return
        task = asyncio.ensure_future(self._write(ctx, transfer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, ctx: CallContext, transfer: t.TraceTransfer) -> None:
        header = h.SendMessageRequestHeaderV2(
            producer_group=f"{t.TRACE_PRODUCER_GROUP_PREFIX}-{self.topic}",
            topic=self.topic,
            default_topic=AUTO_CREATE_TOPIC,
            default_topic_queue_nums=1,
            queue_id=0,
            sys_flag=0,
            born_timestamp=self.core.now_ms(),
            flag=0,
            properties=p.encode_properties({p.KEYS: " ".join(sorted(transfer.keys))}),
            reconsume_times=0,
        )
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), transfer.data.encode()
        )
        try:
            response = await self.core.invoke(ctx, request)
        except ArianeError as exc:
            response = RemotingCommand.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if response.code == ResponseCode.SUCCESS:
            self.written += 1
        else:
            self.failed += 1
            logger.warning(
                "gRPC trace not written to %s: %s (%s)", self.topic, response.code,
                response.remark,
            )  # fmt: skip

    async def drain(self) -> None:
        """Wait for the trace writes under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
