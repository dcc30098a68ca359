"""``send_async`` without a task (part of ``DefaultMQProducerImpl.sendDefaultImpl``'s async
branch in RocketMQ).

How it works: an ``AsyncSend`` holds one asynchronous send: its prepared request parts, the
caller's future and the deadline. ``attempt`` picks a queue with the producer's fault strategy
and hands the request to the connection with ``on_response`` as its callback, so a send whose
route is cached creates no task at all. A single, untraced, non-retry send on a connection
whose requests go out unsigned and unhooked skips the command object (the frame path of
``attempt``):
``send_head`` (``_send_head``, compiled in ``_speedups_client.h``) writes its frame's head
from the prepared fields and the send registers itself as the request's waiter
(``Channel.invoke_frame``), so the answer comes straight to ``complete``; anything else builds
the command (``build_request``) and goes through ``invoke_callback``, the bytes on the wire
being the same. A transport failure or timeout asks for the route again and re-attempts on another broker while retries and time are left; a broker's refusal fails
the future at once (RocketMQ 4.7+). With trace on, the answer also records the Pub trace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

import ariane.client._send as _send
from ariane.client._api import parse_send_response
from ariane.client._fault import MQFaultStrategy
from ariane.client._instance import ClientInstance
from ariane.client._route import _INT_MAX, TopicPublishInfo
from ariane.client._send import PreparedSend, build_request
from ariane.client._send_head import SEND_MIDDLE, SEND_SUFFIX, send_head, send_result
from ariane.client._trace_hooks import SendTracer
from ariane.client.errors import BrokerNotFoundError
from ariane.client.message import MessageQueue, SendResult, SendStatus
from ariane.common.message import Message
from ariane.errors import ConnectionError_, RequestTimeoutError
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["TRANSPORT_ERRORS", "AsyncSend", "AsyncSendOwner"]

logger = logging.getLogger(__name__)

_SEND_OK = SendStatus.SEND_OK
_time_ns = time.time_ns
#: failures after which a send moves to another broker (and asks for the route again)
TRANSPORT_ERRORS = (ConnectionError_, RequestTimeoutError, BrokerNotFoundError)


class AsyncSendOwner(Protocol):
    """What an asynchronous send reads of its producer (``Producer`` is the one owner)."""

    fault: MQFaultStrategy
    _header_base: dict[str, str]
    _send_prefix: bytes | None
    _publish: dict[str, TopicPublishInfo]
    _tracer: SendTracer | None

    @property
    def instance(self) -> ClientInstance: ...

    def now_ms(self) -> int: ...

    def _store_host(self, broker_name: str) -> str: ...

    async def find_publish_info(self, topic: str) -> TopicPublishInfo: ...


class AsyncSend:
    """One ``send_async``: attempts chained by response callbacks, no task in the fast path."""

    __slots__ = (
        "begin_ms",
        "deadline",
        "deadline_ms",
        "future",
        "mq",
        "prepared",
        "producer",
        "retries",
        "timeout_ms",
        "trace",
    )

    def __init__(
        self,
        producer: AsyncSendOwner,
        prepared: PreparedSend,
        future: asyncio.Future[SendResult],
        deadline_ms: int,
        retries: int,
    ) -> None:
        self.producer = producer
        self.prepared = prepared
        self.future = future
        self.deadline_ms = deadline_ms
        self.retries = retries
        self.mq: MessageQueue | None = None
        self.begin_ms = 0
        #: the connection's loop time and timeout of the attempt waiting on it (``Waiter``)
        self.deadline = 0.0
        self.timeout_ms = 0
        #: (source, start wall ms, body length) when the producer traces sends
        self.trace: tuple[Message | list[Message], int, int] | None = None

    async def attempt_after_route(self) -> None:
        try:
            info = await self.producer.find_publish_info(self.prepared.topic)
        except asyncio.CancelledError:
            self.future.cancel()  # the client instance is closing
            raise
        except Exception as exc:
            if not self.future.done():
                self.future.set_exception(exc)
            return
        self.attempt(info, None)

    def attempt(
        self, info: TopicPublishInfo, last_broker: str | None, now_ms: int | None = None
    ) -> None:
        """Send to a queue chosen for this attempt; ``now_ms`` is the producer's ``now_ms()``
        when the caller just read it (one clock read per send instead of three)."""
        producer = self.producer
        future = self.future
        if future.done():
            return
        now = producer.now_ms() if now_ms is None else now_ms
        left = self.deadline_ms - now
        if left <= 0:
            future.set_exception(RequestTimeoutError("send_async ran out of its timeout"))
            return
        try:
            fault = producer.fault
            queues = info.message_queues
            if last_broker is None and not fault.enabled and queues:
                # ``fault.select_one_message_queue(info, None)`` without its two frames:
                # round robin on ``info.next_index()``
                index = info.counter
                info.counter = 0 if index >= _INT_MAX else index + 1
                mq = queues[index % len(queues)]
            else:
                mq = fault.select_one_message_queue(info, last_broker)
            self.mq = mq
            instance = producer.instance
            addr = instance.find_broker_addr_in_publish(mq.broker_name)
            if addr is None:
                raise BrokerNotFoundError(mq.broker_name)
            self.begin_ms = now
            prepared = self.prepared
            if (
                not prepared.batch
                and not prepared.reconsume_times
                and prepared.max_reconsume_times is None
                and producer._tracer is None
                and (prefix := producer._send_prefix) is not None
                and (channel := instance.api.plain_channel(addr)) is not None
            ):
                # the encoded-frame path: the head in one call, this send as the waiter;
                # the born timestamp is ``born_timestamp()``'s, without its frame
                # (its cache, ``_send._born``, shared: one text per millisecond for both paths)
                wall_ms = _time_ns() // 1_000_000
                born = _send._born
                if born[0] != wall_ms:
                    born = _send._born = (wall_ms, str(wall_ms))
                opaque = channel.new_opaque()
                body = prepared.body
                head = send_head(
                    prefix,
                    prepared.topic,
                    mq.queue_id,
                    prepared.sys_flag,
                    born[1],
                    prepared.flag,
                    prepared.properties,
                    SEND_MIDDLE,
                    opaque,
                    SEND_SUFFIX,
                    len(body),
                    channel.max_frame_bytes,
                )
                if head is not None:
                    self.timeout_ms = left
                    channel.invoke_frame(opaque, head, body or None, self)
                    return
                # not taken (the generic path encodes or refuses it)
            request = build_request(prepared, mq, producer._header_base)
            instance.api.invoke_callback(addr, request, left, self.on_response)
        except TRANSPORT_ERRORS as exc:
            self._failed(exc)
        except Exception as exc:
            future.set_exception(exc)

    def on_response(self, response: RemotingCommand | None, exc: BaseException | None) -> None:
        if response is None:
            self.fail(exc or RuntimeError("no response and no error"))
        else:
            self.complete(response)

    def fail(self, exc: BaseException) -> None:
        """The attempt got no answer (``Waiter``): retry on a transport error, else fail."""
        future = self.future
        if future.done():
            return
        if isinstance(exc, TRANSPORT_ERRORS):
            self._failed(exc)
        elif isinstance(exc, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(exc)

    def complete(self, response: RemotingCommand) -> None:
        """The attempt's answer (``Waiter``): the future's result or the broker's refusal."""
        future = self.future
        mq = self.mq
        assert mq is not None
        if future.done():
            return
        producer = self.producer
        try:
            result = None
            if send_result is not None:  # the compiled build: the common answer in one call
                result = send_result(
                    SendResult,
                    _SEND_OK,
                    response.code,
                    response.ext_fields,
                    mq,
                    mq.queue_id,
                    self.prepared.msg_id,
                )
            if result is None:
                result = parse_send_response(response, mq, self.prepared.msg_id)
        except Exception as error:
            producer.fault.update_fault_item(
                mq.broker_name, producer.now_ms() - self.begin_ms, True
            )
            future.set_exception(error)
            return
        if producer.fault.enabled:
            producer.fault.update_fault_item(
                mq.broker_name, producer.now_ms() - self.begin_ms, False
            )
        if self.trace is not None and producer._tracer is not None:
            source, begin, length = self.trace
            store = producer._store_host(mq.broker_name)
            producer._tracer.pub(source, result, begin, store, length)
        future.set_result(result)

    def _failed(self, exc: BaseException) -> None:
        producer = self.producer
        last = self.mq.broker_name if self.mq is not None else None
        if last is not None:
            producer.fault.update_fault_item(last, producer.now_ms() - self.begin_ms, True)
        producer.instance.refresh_route_soon(self.prepared.topic)
        info = producer._publish.get(self.prepared.topic)
        if (
            self.retries > 0
            and info is not None
            and info.ok
            and producer.now_ms() < self.deadline_ms
        ):
            self.retries -= 1
            logger.info("async send to %s failed (%s), retrying", self.mq, exc)
            self.attempt(info, last)
            return
        if not self.future.done():
            self.future.set_exception(exc)
