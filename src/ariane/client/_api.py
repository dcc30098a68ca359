"""Every request the client sends, one async method each (RocketMQ ``MQClientAPIImpl``).

How it works: ``ClientAPI`` wraps one ``RemotingClient`` (one reused connection per address)
and the NameServer address list (the plumbing is ``_rpc.RpcBase``). NameServer requests go to
one chosen NameServer and move on to the next when it cannot be reached (``invoke_namesrv``);
broker requests go to the address given. Each method builds the typed header (``ariane.remoting.protocol.headers``), sends, and
turns the answer into a value: expected outcomes are values (``None`` for "not found" where
RocketMQ's callers treat it so, ``PullResult`` statuses), every other non-success code raises
the ``BrokerResponseError`` subclass of ``ariane.client.errors.error_for``. Transport failures
raise ``ConnectError`` / ``ConnectionClosedError`` / ``RequestTimeoutError``.

Producers, consumers and ``Admin`` all use this one object (``ClientInstance.api``); the
administrative requests live in the ``AdminRequests`` mixin (``_admin_api``). Hot paths
(pipelined sends) use ``invoke_future``, which costs no task when the connection is open.
"""

from __future__ import annotations

import logging

from ariane.client._acl_api import AclRequests
from ariane.client._admin_api import AdminRequests
from ariane.client._pop_api import PopRequests
from ariane.client.errors import error_for
from ariane.client.message import MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from ariane.common.message import MessageExt
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.record import decode_record, decode_records
from ariane.common.sysflag import PULL_LITE
from ariane.errors import CorruptionError, RemoteProtocolError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import (
    CheckClientRequestBody,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.route import TopicRouteData

__all__ = ["SEND_STATUS_BY_CODE", "ClientAPI", "parse_send_response"]

logger = logging.getLogger(__name__)

#: Response codes of a send that mean "stored" (RocketMQ ``processSendResponse``).
SEND_STATUS_BY_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


def parse_send_response(response: RemotingCommand, mq: MessageQueue, msg_id: str) -> SendResult:
    """Turn a send's response into a ``SendResult``.

    Args:
        response: the broker's answer.
        mq: the queue the request named (the broker may pick another: its queue id wins).
        msg_id: the UNIQ_KEY(s) the client assigned (comma-joined for a batch).

    Raises:
        BrokerResponseError: the code is not one of the "stored" codes (subclass per code).
        RemoteProtocolError: a stored answer lacks ``queueId``/``queueOffset``.
    """
    status = SEND_STATUS_BY_CODE.get(response.code)
    if status is None:
        raise error_for(response.code, response.remark)
    ext = response.ext_fields
    try:
        queue_id = int(ext["queueId"])
        queue_offset = int(ext["queueOffset"])
    except (KeyError, ValueError):
        raise RemoteProtocolError(f"send response without a queue id/offset: {ext}") from None
    if queue_id != mq.queue_id:
        mq = MessageQueue(mq.topic, mq.broker_name, queue_id)
    trace = ext.get("TRACE_ON")
    return SendResult(
        status,
        msg_id,
        ext.get("msgId", ""),
        mq,
        queue_offset,
        ext.get("transactionId"),
        ext.get("MSG_REGION") or "DefaultRegion",
        trace != "false",
    )


class ClientAPI(AclRequests, AdminRequests, PopRequests):
    """The request layer shared by everything in one ``ClientInstance``: the plumbing of
    ``RpcBase``, the administrative requests of ``AdminRequests`` and the data path below.
    """

    # -- NameServer ----------------------------------------------------------------------------

    async def get_topic_route(
        self, topic: str, timeout_ms: int | None = None
    ) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC; ``None`` when the NameServer knows no such topic.

        Raises:
            RemoteProtocolError: the route body does not decode.
        """
        response = await self.call_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            h.GetRouteInfoRequestHeader(topic=topic),
            timeout_ms=timeout_ms,
            ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return TopicRouteData.decode(response.body)

    # -- data path -------------------------------------------------------------------------------

    async def send_heartbeat(
        self, addr: str, data: HeartbeatData, timeout_ms: int | None = None
    ) -> None:
        """HEART_BEAT: register this client's producer and consumer groups with a broker."""
        await self.call(addr, RequestCode.HEART_BEAT, None, data.encode(), timeout_ms=timeout_ms)

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        *,
        producer_group: str | None = None,
        consumer_group: str | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """UNREGISTER_CLIENT: drop one group of this client from a broker."""
        header = h.UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        await self.call(addr, RequestCode.UNREGISTER_CLIENT, header, timeout_ms=timeout_ms)

    async def check_client_config(
        self,
        addr: str,
        group: str,
        client_id: str,
        subscription: SubscriptionData,
        timeout_ms: int | None = None,
    ) -> None:
        """CHECK_CLIENT_CONFIG: ask a broker whether it can serve ``subscription`` (a SQL92
        filter needs ``enablePropertyFilter`` and an expression that compiles).

        Raises:
            BrokerResponseError: the broker refused it (SUBSCRIPTION_PARSE_FAILED,
                SYSTEM_ERROR...), its remark says why.
        """
        body = CheckClientRequestBody(client_id, group, subscription)
        await self.call(
            addr, RequestCode.CHECK_CLIENT_CONFIG, None, body.encode(), timeout_ms=timeout_ms
        )

    async def get_consumer_id_list(
        self, addr: str, group: str, timeout_ms: int | None = None
    ) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of a group's consumers on one broker."""
        header = h.GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = await self.call(
            addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header, timeout_ms=timeout_ms
        )
        return ConsumerListBody.decode(response.body).consumer_id_list if response.body else []

    async def pull_message(
        self, addr: str, header: h.PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        """PULL_MESSAGE (or LITE_PULL_MESSAGE when ``header.sys_flag`` has the lite bit).

        ``timeout_ms`` must exceed ``header.suspend_timeout_millis`` for long polling.
        Messages are decoded and decompressed; filtering by tag is the caller's business.

        Raises:
            BrokerResponseError: any code but SUCCESS/19/20/21.
            CorruptionError: the body does not decode.
        """
        # the response future itself when the connection is open (no coroutine of
        # ``RemotingClient.invoke`` around it: a pull of a push consumer resumes fewer frames)
        response = await self.invoke_future(addr, _pull_request(header), timeout_ms)
        return decode_pull_response(response)

    async def pull_message_raw(
        self, addr: str, header: h.PullMessageRequestHeader, timeout_ms: int, bulk: bool = False
    ) -> tuple[PullResult, bytes]:
        """``pull_message`` without decoding: the result (``messages`` empty) and the stored
        records as the broker sent them (``b""`` unless FOUND), for bulk decoders. ``bulk``
        sends ARIANE_BULK_PULL_MESSAGE (never held; the broker's bulk limits instead of the
        per-pull ones; RocketMQ brokers answer REQUEST_CODE_NOT_SUPPORTED).

        Raises:
            BrokerResponseError: any code but SUCCESS/19/20/21.
        """
        request = (
            RemotingCommand.request(RequestCode.ARIANE_BULK_PULL_MESSAGE, header.to_ext_fields())
            if bulk
            else _pull_request(header)
        )
        response = await self.invoke(addr, request, timeout_ms)
        result = decode_pull_response(response, decode_body=False)
        body = (response.body or b"") if result.status is PullStatus.FOUND else b""
        return result, body

    async def query_consumer_offset(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        *,
        set_zero_if_not_found: bool | None = None,
        timeout_ms: int | None = None,
    ) -> int | None:
        """QUERY_CONSUMER_OFFSET; ``None`` when the broker has no offset (QUERY_NOT_FOUND)."""
        header = h.QueryConsumerOffsetRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            set_zero_if_not_found=set_zero_if_not_found,
        )
        response = await self.call(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            header,
            timeout_ms=timeout_ms,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return h.QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def update_consumer_offset(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        oneway: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """UPDATE_CONSUMER_OFFSET (one-way from the periodic persist task, as Java does)."""
        header = h.UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
        )
        if oneway:
            request = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()
            )
            await self.invoke_oneway(addr, request)
            return
        await self.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header, timeout_ms=timeout_ms)

    async def consumer_send_message_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        *,
        max_reconsume_times: int | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: hand a failed message back for a later retry (or DLQ when
        ``delay_level`` < 0)."""
        header = h.ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        await self.call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header, timeout_ms=timeout_ms)

    async def lock_batch_mq(
        self, addr: str, body: LockBatchRequestBody, timeout_ms: int | None = None
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: lock queues for orderly consumption; returns those now held."""
        response = await self.call(
            addr, RequestCode.LOCK_BATCH_MQ, None, body.encode(), timeout_ms=timeout_ms
        )
        if not response.body:
            return set()
        return set(LockBatchResponseBody.decode(response.body).lock_ok_mq_set)

    async def unlock_batch_mq(
        self,
        addr: str,
        body: UnlockBatchRequestBody | LockBatchRequestBody,
        *,
        oneway: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """UNLOCK_BATCH_MQ: release queue locks."""
        if oneway:
            request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body.encode())
            await self.invoke_oneway(addr, request)
            return
        await self.call(
            addr, RequestCode.UNLOCK_BATCH_MQ, None, body.encode(), timeout_ms=timeout_ms
        )

    async def end_transaction_oneway(
        self, addr: str, header: h.EndTransactionRequestHeader, remark: str | None = None
    ) -> None:
        """END_TRANSACTION, one-way as RocketMQ's clients send it."""
        request = RemotingCommand.request(
            RequestCode.END_TRANSACTION, header.to_ext_fields(), remark=remark
        )
        await self.invoke_oneway(addr, request)

    # -- offsets and messages ------------------------------------------------------------------

    async def get_max_offset(
        self, addr: str, topic: str, queue_id: int, timeout_ms: int | None = None
    ) -> int:
        """GET_MAX_OFFSET: the offset the next message of the queue will get."""
        header = h.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id)
        response = await self.call(addr, RequestCode.GET_MAX_OFFSET, header, timeout_ms=timeout_ms)
        return h.GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_min_offset(
        self, addr: str, topic: str, queue_id: int, timeout_ms: int | None = None
    ) -> int:
        """GET_MIN_OFFSET: the smallest offset still stored."""
        header = h.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id)
        response = await self.call(addr, RequestCode.GET_MIN_OFFSET, header, timeout_ms=timeout_ms)
        return h.GetMinOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def search_offset(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        timestamp_ms: int,
        *,
        boundary: str = "lower",
        timeout_ms: int | None = None,
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: ``lower`` = first offset stored at or after the time."""
        header = h.SearchOffsetRequestHeader(
            topic=topic, queue_id=queue_id, timestamp=timestamp_ms, boundary_type=boundary
        )
        response = await self.call(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header, timeout_ms=timeout_ms
        )
        return h.SearchOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_earliest_msg_store_time(
        self, addr: str, topic: str, queue_id: int, timeout_ms: int | None = None
    ) -> int:
        """GET_EARLIEST_MSG_STORETIME: store time (ms) of the queue's oldest message."""
        header = h.GetEarliestMsgStoretimeRequestHeader(topic=topic, queue_id=queue_id)
        response = await self.call(
            addr, RequestCode.GET_EARLIEST_MSG_STORETIME, header, timeout_ms=timeout_ms
        )
        return h.GetEarliestMsgStoretimeResponseHeader.from_ext_fields(
            response.ext_fields
        ).timestamp

    async def view_message(self, offset_msg_id: str, timeout_ms: int | None = None) -> MessageExt:
        """VIEW_MESSAGE_BY_ID at the broker the offsetMsgId names.

        Raises:
            InvalidArgumentError: not an offsetMsgId.
            BrokerResponseError: the broker has no message there.
            CorruptionError: the body does not decode.
        """
        decoded = decode_offset_msg_id(offset_msg_id)
        host = f"[{decoded.host}]" if ":" in decoded.host else decoded.host
        header = h.ViewMessageRequestHeader(offset=decoded.phys_offset)
        response = await self.call(
            f"{host}:{decoded.port}",
            RequestCode.VIEW_MESSAGE_BY_ID,
            header,
            timeout_ms=timeout_ms,
        )
        if not response.body:
            raise CorruptionError("VIEW_MESSAGE_BY_ID answered without a body")
        return decode_record(response.body, decompress=True)[0]

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        *,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        unique_key: bool = False,
        timeout_ms: int | None = None,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE on one broker: messages indexed under ``key`` (or the UNIQ_KEY)."""
        header = h.QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp=begin_ms,
            end_timestamp=end_ms,
            unique_key_query=True if unique_key else None,
        )
        response = await self.call(
            addr,
            RequestCode.QUERY_MESSAGE,
            header,
            timeout_ms=timeout_ms,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS or not response.body:
            return []
        return decode_records(response.body, decompress=True)


_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def decode_pull_response(response: RemotingCommand, *, decode_body: bool = True) -> PullResult:
    """A ``PullResult`` from a PULL_MESSAGE answer (``processPullResponse``).

    Raises:
        BrokerResponseError: any code but SUCCESS, 19, 20, 21.
        RemoteProtocolError: the offsets header is missing or malformed.
        CorruptionError: the body does not decode.
    """
    status = _PULL_STATUS.get(response.code)
    if status is None:
        raise error_for(response.code, response.remark)
    try:
        header = h.PullMessageResponseHeader.from_ext_fields(response.ext_fields)
    except Exception as exc:
        raise RemoteProtocolError(f"pull response header: {exc}") from exc
    messages: list[MessageExt] = []
    if decode_body and status is PullStatus.FOUND and response.body:
        messages = decode_records(response.body, decompress=True)
    return PullResult(
        status,
        header.next_begin_offset,
        header.min_offset,
        header.max_offset,
        messages,
        header.suggest_which_broker_id,
    )


def _pull_request(header: h.PullMessageRequestHeader) -> RemotingCommand:
    """PULL_MESSAGE, or LITE_PULL_MESSAGE when the header's sysFlag says lite pull."""
    lite = header.sys_flag & PULL_LITE
    code = RequestCode.LITE_PULL_MESSAGE if lite else RequestCode.PULL_MESSAGE
    return RemotingCommand.request(code, header.to_ext_fields())
