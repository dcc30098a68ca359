"""Routes, client registration, sending and transactions over v2 (RocketMQ proxy's
``RouteActivity``, ``ClientActivity``, ``SendMessageActivity`` and ``EndTransactionActivity``).

How it works: QueryRoute and QueryAssignment describe this broker's queues of the topic with
the access point the client used as their endpoints (the client comes back here). Heartbeat
and each Telemetry settings message register the client through HEART_BEAT on its channel: a
producer under the group named like each of its topics (gRPC has no producer group, so
transaction checks are routed by topic, as upstream), a consumer in its group. SendMessage
validates and converts each message and sends it with SEND_MESSAGE_V2 to a queue the server
picks (a message group always maps to the same queue). The transaction id handed to the
client names the half message (its offset id and queue offset), so EndTransaction needs no
proxy-side memory and works however late the client resolves.
"""

from __future__ import annotations

import itertools

from ariane.common import properties as p
from ariane.common.hashing import consistent_hash, java_string_hash
from ariane.common.sysflag import (
    PERM_READ,
    PERM_WRITE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from ariane.common.topics import AUTO_CREATE_TOPIC, DLQ_PREFIX, RETRY_PREFIX
from ariane.proxy.convert import (
    OutgoingMessage,
    expression_type,
    make_transaction_id,
    outgoing,
    parse_transaction_id,
    validate_group,
    validate_topic,
)
from ariane.proxy.core import CallContext, ProxyCore, rpc
from ariane.proxy.status import ProxyError, from_remoting, overall_status, status
from ariane.proxy.trace import GrpcTracer
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.client_bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["ACCEPTED_TYPES", "ProducerService", "consistent_hash"]

MESSAGE_TYPE_ATTRIBUTE = "message.type"
#: ``message.type`` attribute value -> the types a queue of the topic accepts.
ACCEPTED_TYPES: dict[str, tuple[int, ...]] = {
    "NORMAL": (pb.NORMAL,),
    "FIFO": (pb.FIFO,),
    "DELAY": (pb.DELAY,),
    "TRANSACTION": (pb.TRANSACTION,),
    "MIXED": (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION),
}
_STORED: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
}


def topic_type(tc: TopicConfig | None) -> str:
    """The topic's ``message.type`` (NORMAL when absent)."""
    if tc is None:
        return "NORMAL"
    return (tc.attributes.get(MESSAGE_TYPE_ATTRIBUTE) or "NORMAL").upper()


def _endpoints(request_endpoints: pb.Endpoints, host: str, port: int) -> pb.Endpoints:
    if request_endpoints.addresses:
        if request_endpoints.scheme == pb.ADDRESS_SCHEME_UNSPECIFIED:
            raise ProxyError(pb.ILLEGAL_ACCESS_POINT, "the access point has no address scheme")
        return request_endpoints
    scheme = pb.IPv6 if ":" in host else pb.IPv4
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


class ProducerService:
    """QueryRoute, QueryAssignment, Heartbeat, SendMessage, EndTransaction,
    NotifyClientTermination and the settings half of Telemetry."""

    def __init__(self, core: ProxyCore, port: int, tracer: GrpcTracer | None = None) -> None:
        self.core = core
        self.port = port
        self.tracer = tracer
        self._round_robin = itertools.count()

    # -- topics ----------------------------------------------------------------------------------

    def topic_config(self, topic: str, peer: str, create: bool) -> TopicConfig:
        """The topic's configuration (auto-created when the broker allows it)."""
        broker = self.core.broker
        tc = broker.topics.get(topic)
        if tc is None and create:
            tc = broker.topics.create_in_send(
                topic, AUTO_CREATE_TOPIC, peer, broker.config.default_topic_queue_nums, 0
            )
        if tc is None:
            raise ProxyError(
                pb.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}"
            )
        return tc

    def _broker(self, endpoints: pb.Endpoints) -> pb.Broker:
        cfg = self.core.cfg
        return pb.Broker(
            name=self.core.broker_name,
            id=0,
            endpoints=_endpoints(endpoints, cfg.advertised_host, self.port),
        )

    @rpc(spb.QueryRouteResponse)
    async def QueryRoute(
        self, request: spb.QueryRouteRequest, ctx: CallContext
    ) -> spb.QueryRouteResponse:
        topic = validate_topic(request.topic)
        tc = self.topic_config(topic, ctx.peer, create=self.core.broker.acl is None)
        broker = self._broker(request.endpoints)
        accepted = ACCEPTED_TYPES.get(topic_type(tc), (pb.MESSAGE_TYPE_UNSPECIFIED,))
        perm = tc.perm & self.core.broker.config.broker_permission
        read, write = tc.read_queue_nums, tc.write_queue_nums
        queues: list[pb.MessageQueue] = []
        both = min(read, write) if perm & PERM_READ and perm & PERM_WRITE else 0
        kinds: list[int] = []
        if perm & PERM_READ:
            kinds += [pb.READ] * (read - both)
        if perm & PERM_WRITE:
            kinds += [pb.WRITE] * (write - both)
        kinds += [pb.READ_WRITE] * both
        if not kinds:
            kinds = [pb.NONE] * max(1, read, write)
        for qid, permission in enumerate(kinds):
            queues.append(
                pb.MessageQueue(
                    topic=request.topic,
                    id=qid,
                    permission=permission,  # type: ignore[arg-type]
                    broker=broker,
                    accept_message_types=accepted,  # type: ignore[arg-type]
                )
            )
        return spb.QueryRouteResponse(status=status(), message_queues=queues)

    @rpc(spb.QueryAssignmentResponse)
    async def QueryAssignment(
        self, request: spb.QueryAssignmentRequest, ctx: CallContext
    ) -> spb.QueryAssignmentResponse:
        topic = validate_topic(request.topic)
        group = validate_group(request.group)
        tc = self.topic_config(topic, ctx.peer, create=False)
        perm = tc.perm & self.core.broker.config.broker_permission
        if not perm & PERM_READ or tc.read_queue_nums <= 0:
            raise ProxyError(pb.FORBIDDEN, "no readable queue")
        cfg = self.core.broker.groups.find(group)
        fifo = cfg is not None and cfg.consume_message_orderly
        broker = self._broker(request.endpoints)
        ids = range(tc.read_queue_nums) if fifo else [-1]
        permission = pb.READ_WRITE if perm & PERM_WRITE else pb.READ
        assignments = [
            pb.Assignment(
                message_queue=pb.MessageQueue(
                    topic=request.topic,
                    id=qid,
                    permission=permission,
                    broker=broker,
                )
            )
            for qid in ids
        ]
        return spb.QueryAssignmentResponse(status=status(), assignments=assignments)

    # -- registration ------------------------------------------------------------------------------

    async def register(self, ctx: CallContext, settings: pb.Settings, group_hint: str = "") -> None:
        """Register the client in the broker from its settings (HEART_BEAT on its channel).

        Raises:
            ProxyError: an invalid topic or group, or a client type that cannot register.
        """
        data = HeartbeatData(client_id=ctx.client_id)
        kind = settings.client_type
        if kind == pb.PRODUCER:
            for resource in settings.publishing.topics:
                data.producer_data_set.append(ProducerData(validate_topic(resource)))
        elif kind in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER):
            sub = settings.subscription
            group = validate_group(sub.group) if sub.HasField("group") else group_hint
            if not group:
                raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be blank")
            subs = [
                SubscriptionData.build(
                    validate_topic(entry.topic),
                    entry.expression.expression or "*",
                    expression_type(entry.expression),
                    self.core.now_ms(),
                )
                for entry in sub.subscriptions
            ]
            data.consumer_data_set.append(
                ConsumerData(
                    group,
                    ConsumeType.CONSUME_ACTIVELY
                    if kind == pb.PULL_CONSUMER
                    else ConsumeType.CONSUME_POP,
                    MessageModel.CLUSTERING,
                    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                    subs,
                )
            )
        else:
            name = pb.ClientType.Name(kind) if kind in pb.ClientType.values() else str(kind)
            raise ProxyError(pb.UNRECOGNIZED_CLIENT_TYPE, f"unrecognized client type {name}")
        request = RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode())
        await self.core.invoke_ok(ctx, request)

    @rpc(spb.HeartbeatResponse)
    async def Heartbeat(
        self, request: spb.HeartbeatRequest, ctx: CallContext
    ) -> spb.HeartbeatResponse:
        settings = ctx.session.settings
        if settings is None:
            raise ProxyError(
                pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"
            )
        hint = request.group.name if request.HasField("group") else ""
        await self.register(ctx, settings, hint)
        return spb.HeartbeatResponse(status=status())

    @rpc(spb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(
        self, request: spb.NotifyClientTerminationRequest, ctx: CallContext
    ) -> spb.NotifyClientTerminationResponse:
        session = ctx.session
        if session.settings is None:
            self.core.clients.close(ctx.client_id)
            raise ProxyError(
                pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"
            )
        if request.HasField("group") and request.group.name:
            validate_group(request.group)
        self.core.clients.close(ctx.client_id)
        return spb.NotifyClientTerminationResponse(status=status())

    # -- sending -----------------------------------------------------------------------------------

    def _check_type(self, tc: TopicConfig | None, msg: OutgoingMessage) -> None:
        if not self.core.cfg.enable_topic_message_type_check:
            return
        if msg.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or p.TRANSFER_FLAG in msg.properties:
            return
        expected = topic_type(tc)
        if expected == "MIXED":
            return
        actual = pb.MessageType.Name(msg.message_type)  # type: ignore[arg-type]
        if expected != actual:
            raise ProxyError(
                pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"TopicMessageType validate failed, the expected type is {expected}, but actual "
                f"type is {actual}; set the topic attribute with "
                f"'mqadmin updateTopic -t {msg.topic} -a +message.type={actual}'",
            )

    def _queue_id(self, tc: TopicConfig | None, msg: OutgoingMessage, single: bool) -> int:
        if tc is None:
            return -1  # the broker creates the topic (if allowed) and picks a queue
        n = tc.write_queue_nums
        if n <= 0 or not tc.perm & PERM_WRITE:
            raise ProxyError(pb.FORBIDDEN, "no writable queue")
        group = msg.properties.get(p.SHARDING_KEY)
        if group and single:
            return consistent_hash(java_string_hash(group), n)
        return next(self._round_robin) % n

    async def _send_one(
        self, ctx: CallContext, msg: OutgoingMessage, tc: TopicConfig | None, single: bool
    ) -> spb.SendResultEntry:
        uniq = msg.properties[p.UNIQ_KEY]
        header = h.SendMessageRequestHeaderV2(
            producer_group=msg.topic,
            topic=msg.topic,
            default_topic=AUTO_CREATE_TOPIC,
            default_topic_queue_nums=self.core.broker.config.default_topic_queue_nums,
            queue_id=self._queue_id(tc, msg, single),
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp_ms,
            flag=0,
            properties=p.encode_properties(msg.properties),
            reconsume_times=int(msg.properties.get(p.RECONSUME_TIME, "0")),
        )
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), msg.body
        )
        started = self.core.now_ms()
        response = await self.core.invoke(ctx, request)
        code = _STORED.get(response.code)
        if code is None:
            if self.tracer is not None:
                self.tracer.pub(ctx, msg, "", self.core.now_ms() - started, False)
            error = _send_error(response)
            return spb.SendResultEntry(status=status(error.code, error.message), message_id=uniq)
        answer = h.SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        if self.tracer is not None:
            self.tracer.pub(ctx, msg, answer.msg_id, self.core.now_ms() - started, True)
        entry = spb.SendResultEntry(
            status=status(code, None if code == pb.OK else response.remark),
            message_id=uniq,
            offset=answer.queue_offset,
        )
        if msg.message_type == pb.TRANSACTION:
            entry.transaction_id = make_transaction_id(answer.msg_id, answer.queue_offset)
        if answer.recall_handle:
            entry.recall_handle = answer.recall_handle
        return entry

    @rpc(spb.SendMessageResponse)
    async def SendMessage(
        self, request: spb.SendMessageRequest, ctx: CallContext
    ) -> spb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(pb.MESSAGE_CORRUPTED, "no message to send")
        topic = validate_topic(request.messages[0].topic)
        now = self.core.now_ms()
        converted = []
        for message in request.messages:
            if message.topic.name != topic:
                raise ProxyError(pb.MESSAGE_CORRUPTED, "topic in message is not same")
            converted.append(outgoing(message, self.core.cfg, now, ctx.peer))
        tc = self.core.broker.topics.get(topic)
        self._check_type(tc, converted[0])
        single = len(converted) == 1
        entries = [await self._send_one(ctx, m, tc, single) for m in converted]
        return spb.SendMessageResponse(status=overall_status(entries), entries=entries)

    # -- transactions ------------------------------------------------------------------------------

    @rpc(spb.EndTransactionResponse)
    async def EndTransaction(
        self, request: spb.EndTransactionRequest, ctx: CallContext
    ) -> spb.EndTransactionResponse:
        topic = validate_topic(request.topic)
        if not request.transaction_id.strip():
            raise ProxyError(pb.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        commit_log_offset, queue_offset, _ = parse_transaction_id(request.transaction_id)
        kind = {
            pb.COMMIT: TRANSACTION_COMMIT_TYPE,
            pb.ROLLBACK: TRANSACTION_ROLLBACK_TYPE,
        }.get(request.resolution, TRANSACTION_NOT_TYPE)
        header = h.EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=kind,
            msg_id=request.message_id,
            topic=topic,
            from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK,
            transaction_id=request.message_id,
        )
        remark = "from gRPC client" + (
            f" ({request.trace_context})" if request.trace_context else ""
        )
        command = RemotingCommand.request(
            RequestCode.END_TRANSACTION, header.to_ext_fields(), remark=remark
        )
        await self.core.invoke_ok(ctx, command)
        if self.tracer is not None:
            state = {pb.COMMIT: "COMMIT_MESSAGE", pb.ROLLBACK: "ROLLBACK_MESSAGE"}
            self.tracer.end_transaction(
                ctx, topic, request.message_id, request.transaction_id,
                state.get(request.resolution, "UNKNOW"), request.source == pb.SOURCE_SERVER_CHECK,
            )  # fmt: skip
        return spb.EndTransactionResponse(status=status())


def _send_error(response: RemotingCommand) -> ProxyError:
    error = from_remoting(response.code, response.remark)
    if response.code == ResponseCode.MESSAGE_ILLEGAL:
        return ProxyError(pb.INTERNAL_SERVER_ERROR, response.remark or "message illegal")
    return error
