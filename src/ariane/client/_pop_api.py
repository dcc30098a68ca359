"""The POP requests of ``ClientAPI`` (RocketMQ 5 ``MQClientAPIImpl.popMessageAsync``,
``ackMessageAsync``, ``batchAckMessageAsync``, ``changeInvisibleTimeAsync``, peek and
notification).

How it works: a POP answer carries the stored records and, in its header, where they came
from; :func:`decode_pop_response` gives every message its receipt handle in the ``POP_CK``
property the way the Java client does (messages the broker relabelled from a retry topic bring
their own), and FIFO messages their delivery count as ``reconsume_times``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from ariane.client._rpc import RpcBase
from ariane.client.errors import error_for
from ariane.common.message import MessageExt
from ariane.common.pop import (
    ReceiptHandle,
    order_count_key,
    parse_offset_counts,
    parse_offset_lists,
    parse_start_offsets,
    queue_key,
    retry_flag_of,
)
from ariane.common.properties import FIRST_POP_TIME, POP_CK
from ariane.common.record import decode_records
from ariane.errors import HeaderFieldError, InvalidArgumentError, RemoteProtocolError
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.headers import pop as hp
from ariane.remoting.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody

__all__ = ["PopRequests", "PopResult", "PopStatus", "decode_pop_response"]


class PopStatus(Enum):
    """How a POP ended (RocketMQ ``PopStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


_STATUS: dict[int, PopStatus] = {
    ResponseCode.SUCCESS: PopStatus.FOUND,
    ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
    ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
}


@dataclass(slots=True)
class PopResult:
    """The broker's answer to POP_MESSAGE (or PEEK_MESSAGE).

    Each message has its receipt handle in ``properties["POP_CK"]``.
    """

    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0


def receipt_handle_of(msg: MessageExt) -> ReceiptHandle:
    """The receipt handle of a popped message.

    Raises:
        InvalidArgumentError: the message has no (valid) handle.
    """
    text = msg.properties.get(POP_CK)
    if not text:
        raise InvalidArgumentError(
            f"this message of {msg.topic} has no receipt handle: it was not received by a simple consumer"
        )
    return ReceiptHandle.decode(text)


def decode_pop_response(
    response: RemotingCommand, broker_name: str, order: bool = False
) -> PopResult:
    """``processPopResponse``: decode the records and give each message its handle.

    Raises:
        BrokerResponseError: any code but SUCCESS, POLLING_FULL, POLLING_TIMEOUT, 19.
        RemoteProtocolError: the header is missing or malformed.
        CorruptionError: the body does not decode.
    """
    status = _STATUS.get(response.code)
    if status is None:
        raise error_for(response.code, response.remark)
    try:
        header = hp.PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        starts = parse_start_offsets(header.start_offset_info)
        offsets = parse_offset_lists(header.msg_offset_info)
        counts = parse_offset_counts(header.order_count_info)
    except (InvalidArgumentError, HeaderFieldError) as exc:
        raise RemoteProtocolError(f"POP response header: {exc}") from exc
    if status is not PopStatus.FOUND:
        return PopResult(status, rest_num=header.rest_num)
    messages = decode_records(response.body or b"", decompress=True)
    seen: Counter[str] = Counter()
    for msg in messages:
        props = msg.properties
        if FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(header.pop_time)
        if POP_CK in props:
            continue
        flag = retry_flag_of(msg.topic)
        key = queue_key(flag, msg.queue_id)
        index = seen[key]
        seen[key] += 1
        listed = offsets.get(key)
        offset = listed[index] if listed is not None and index < len(listed) else msg.queue_offset
        start = starts.get(key, msg.queue_offset)
        props[POP_CK] = ReceiptHandle(
            start, header.pop_time, header.invisible_time, header.revive_qid, flag, broker_name,
            msg.queue_id, offset,
        ).encode()  # fmt: skip
        if order:
            count = counts.get(order_count_key(flag, msg.queue_id, offset))
            if count is None:
                count = counts.get(key)
            if count:
                msg.reconsume_times = count
    return PopResult(status, messages, header.pop_time, header.invisible_time, header.rest_num)


class PopRequests(RpcBase):
    """POP, ACK, BATCH_ACK, CHANGE_MESSAGE_INVISIBLETIME, PEEK and NOTIFICATION."""

    async def pop_message(
        self,
        addr: str,
        broker_name: str,
        header: hp.PopMessageRequestHeader,
        timeout_ms: int,
    ) -> PopResult:
        """POP_MESSAGE; ``timeout_ms`` must exceed ``header.poll_time``.

        Raises:
            BrokerResponseError: the broker refused (not FOUND / nothing found / full).
        """
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        response = await self.invoke(addr, request, timeout_ms)
        return decode_pop_response(response, broker_name, header.order)

    async def peek_message(
        self, addr: str, broker_name: str, header: hp.PeekMessageRequestHeader, timeout_ms: int
    ) -> PopResult:
        """PEEK_MESSAGE: messages past the group's position, not leased (no handles)."""
        request = RemotingCommand.request(RequestCode.PEEK_MESSAGE, header.to_ext_fields())
        response = await self.invoke(addr, request, timeout_ms)
        status = _STATUS.get(response.code)
        if status is None:
            raise error_for(response.code, response.remark)
        if status is not PopStatus.FOUND:
            return PopResult(status)
        return PopResult(status, decode_records(response.body or b"", decompress=True))

    async def ack_message(
        self, addr: str, header: hp.AckMessageRequestHeader, timeout_ms: int | None = None
    ) -> None:
        """ACK_MESSAGE (``header.topic``: the topic the message was read from)."""
        await self.call(addr, RequestCode.ACK_MESSAGE, header, timeout_ms=timeout_ms)

    async def batch_ack_message(
        self,
        addr: str,
        broker_name: str,
        acks: list[BatchAck],
        timeout_ms: int | None = None,
    ) -> None:
        """BATCH_ACK_MESSAGE."""
        body = BatchAckMessageRequestBody(broker_name, acks).encode()
        await self.call(addr, RequestCode.BATCH_ACK_MESSAGE, None, body, timeout_ms=timeout_ms)

    async def change_invisible_time(
        self,
        addr: str,
        header: hp.ChangeInvisibleTimeRequestHeader,
        timeout_ms: int | None = None,
    ) -> hp.ChangeInvisibleTimeResponseHeader:
        """CHANGE_MESSAGE_INVISIBLETIME: the new lease."""
        response = await self.call(
            addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header, timeout_ms=timeout_ms
        )
        try:
            return hp.ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        except HeaderFieldError as exc:
            raise RemoteProtocolError(f"change invisible time answer: {exc}") from exc

    async def notification(
        self, addr: str, header: hp.NotificationRequestHeader, timeout_ms: int
    ) -> bool:
        """NOTIFICATION: whether the group has something to pop (waits ``poll_time``)."""
        response = await self.call(addr, RequestCode.NOTIFICATION, header, timeout_ms=timeout_ms)
        try:
            return hp.NotificationResponseHeader.from_ext_fields(response.ext_fields).has_msg
        except HeaderFieldError as exc:
            raise RemoteProtocolError(f"notification answer: {exc}") from exc
