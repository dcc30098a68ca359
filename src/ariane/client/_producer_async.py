"""The producer's asynchronous and one-way sends (part of RocketMQ's
``DefaultMQProducerImpl``: ``send(msg, callback)`` and ``sendOneway``).

How it works: ``AsyncSends`` is mixed into ``Producer`` and holds the sends that return at
once. ``send_async`` and the batch variants prepare the request parts once; without a custom
queue, selector or sharding key they hand them to an ``AsyncSend`` (``_async_send``), which
chains its attempts by response callbacks and creates no task when the route is cached. A
custom target goes through the producer's ``_send_prepared`` in a task. ``send_oneway`` makes
one attempt and waits for no answer. The attributes and methods declared below are the
producer's own (``Producer`` defines them).
"""

from __future__ import annotations

import asyncio
import threading
from asyncio import BaseEventLoop
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ariane.client._async_send import TRANSPORT_ERRORS, AsyncSend
from ariane.client._fault import MQFaultStrategy
from ariane.client._instance import ClientInstance
from ariane.client._route import TopicPublishInfo
from ariane.client._selector import SelectorLike, SendTarget
from ariane.client._send import (
    PreparedSend,
    SendSettings,
    build_request,
    check_topic,
    prepare_batches,
    prepare_single,
)
from ariane.client._trace_hooks import SendTracer
from ariane.client.errors import ClientStateError
from ariane.client.message import MessageQueue, SendResult
from ariane.common.message import Message
from ariane.common.msgid import UniqueIdGenerator
from ariane.common.properties import SHARDING_KEY
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import ArianeError, InvalidArgumentError

__all__ = ["AsyncSends"]

_get_ident = threading.get_ident
_Future = asyncio.Future
#: what ``loop.create_future()`` runs on asyncio's own loops: ``Future(loop=loop)``
_BASE_CREATE_FUTURE = BaseEventLoop.create_future


class AsyncSends:
    """``send_async``, ``send_batch_async``, ``send_encoded_batch_async`` and
    ``send_oneway`` of ``Producer``."""

    settings: SendSettings
    send_timeout_ms: int
    retry_times_async: int
    fault: MQFaultStrategy
    _header_base: dict[str, str]
    _send_prefix: bytes | None
    _publish: dict[str, TopicPublishInfo]
    _tracer: SendTracer | None
    _ids: UniqueIdGenerator
    _loop: asyncio.AbstractEventLoop | None
    _instance: ClientInstance | None
    _closed: bool
    _loop_thread: int

    @property
    def instance(self) -> ClientInstance:
        raise NotImplementedError  # Producer's

    #: the client config's clock's ``monotonic`` (``Producer``'s)
    _monotonic: Callable[[], float]

    def now_ms(self) -> int:
        raise NotImplementedError  # Producer's

    def _store_host(self, broker_name: str) -> str:
        raise NotImplementedError  # Producer's

    async def find_publish_info(self, topic: str) -> TopicPublishInfo:
        raise NotImplementedError  # Producer's

    async def _broker_addr(self, broker_name: str, topic: str) -> str:
        raise NotImplementedError  # Producer's

    async def _send_prepared(
        self,
        prepared: PreparedSend,
        source: Message,
        timeout_ms: int | None,
        target: SendTarget | None,
    ) -> SendResult:
        raise NotImplementedError  # Producer's

    async def _chosen_queue(
        self, prepared: PreparedSend, source: Message, target: SendTarget
    ) -> MessageQueue:
        raise NotImplementedError  # Producer's

    def send_async(
        self,
        msg: Message,
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start sending one message; the future completes with its ``SendResult``.

        Must be called from the producer's event loop. Transport failures and timeouts are
        retried ``retry_times_async`` times on another broker within ``timeout_ms``; broker
        refusals fail the future at once. Keep the number of futures in flight bounded (a
        few hundred keeps one connection busy).

        Raises:
            InvalidArgumentError: bad topic, empty or oversized body (raised at once).
            ClientStateError: the producer is not started.
        """
        prepared = prepare_single(msg, self.settings, self._ids)
        if (
            queue is not None
            or selector is not None
            or sharding_key is not None
            or self._tracer is not None
            or msg.properties.get(SHARDING_KEY)
        ):
            return self._send_prepared_async(
                prepared,
                msg,
                timeout_ms,
                SendTarget.for_message(msg, queue, selector, arg, sharding_key),
                len(msg.body),
            )
        # the common send (round robin, untraced): ``_send_prepared_async`` with no target,
        # inline (one Python frame per send fewer, no ``create_future`` frame)
        instance = self._instance
        if instance is None or self._closed:
            instance = self.instance  # raises ClientStateError
        loop = self._loop
        if loop is None or _get_ident() != self._loop_thread:
            raise ClientStateError("send_async must be called on the producer's event loop")
        future: asyncio.Future[SendResult] = (
            _Future(loop=loop)
            if type(loop).create_future is _BASE_CREATE_FUTURE
            else loop.create_future()
        )
        now = int(self._monotonic() * 1000)
        send = AsyncSend(
            self,
            prepared,
            future,
            now + (timeout_ms or self.send_timeout_ms),
            self.retry_times_async,
        )
        info = self._publish.get(prepared.topic)
        if info is not None and info.message_queues:
            send.attempt(info, None, now)
        else:
            instance.spawn(send.attempt_after_route())
        return future

    def send_batch_async(
        self,
        msgs: Iterable[Message],
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start sending a batch that fits in one request (``max_message_bytes``).

        Raises:
            InvalidArgumentError: the batch breaks a batch rule or needs more than one
                request (use ``send_batch`` to split).
        """
        messages = list(msgs)
        batches = prepare_batches(messages, self.settings, self._ids)
        if len(batches) != 1:
            raise InvalidArgumentError(
                f"the batch needs {len(batches)} requests; send_batch splits it"
            )
        return self._send_prepared_async(
            batches[0],
            messages,
            timeout_ms,
            SendTarget.of(queue, selector, arg, sharding_key),
            len(batches[0].body),
        )

    def send_encoded_batch_async(
        self, topic: str, body: bytes, msg_ids: Collection[str], *, timeout_ms: int | None = None
    ) -> asyncio.Future[SendResult]:
        """Start sending a batch body encoded by the caller (``ariane.common.batch`` layout,
        each entry already carrying its ``UNIQ_KEY`` property, ``msg_ids`` in entry order),
        as ``send_batch_async`` would send the same messages: for bulk writers that never
        build ``Message`` objects. Not recorded by message trace.

        Must be called from the producer's event loop.

        Raises:
            InvalidArgumentError: bad or retry topic, no ids, a body over ``max_message_bytes``,
                a producer that traces its sends.
        """
        check_topic(topic)
        if topic.startswith(RETRY_PREFIX):
            raise InvalidArgumentError("batches cannot be sent to retry topics")
        if not msg_ids:
            raise InvalidArgumentError("a batch needs at least one message")
        if len(body) > self.settings.max_message_bytes:
            raise InvalidArgumentError(
                f"the batch is {len(body)} bytes, the limit is {self.settings.max_message_bytes}"
            )
        if self._tracer is not None:
            raise InvalidArgumentError("a traced producer sends batches with send_batch_async")
        prepared = PreparedSend(topic, body, 0, 0, "", ",".join(msg_ids), True, count=len(msg_ids))
        return self._send_prepared_async(prepared, [], timeout_ms, None, len(body))

    def _send_prepared_async(
        self,
        prepared: PreparedSend,
        source: Message | list[Message],
        timeout_ms: int | None,
        target: SendTarget | None,
        body_length: int,
    ) -> asyncio.Future[SendResult]:
        instance = self.instance
        loop = self._loop
        if loop is None or threading.get_ident() != self._loop_thread:
            # asyncio.get_running_loop() would cost a getpid() system call per send
            raise ClientStateError("send_async must be called on the producer's event loop")
        timeout = timeout_ms or self.send_timeout_ms
        tracer = self._tracer
        if target is not None:
            first = source[0] if isinstance(source, list) else source
            sending = self._send_prepared(prepared, first, timeout, target)
            if tracer is not None:
                sending = tracer.around(sending, source, body_length, self._store_host)
            return loop.create_task(sending)
        info = self._publish.get(prepared.topic)
        future: asyncio.Future[SendResult] = loop.create_future()
        now = self.now_ms()
        send = AsyncSend(self, prepared, future, now + timeout, self.retry_times_async)
        if tracer is not None:
            send.trace = (source, tracer.now_ms(), body_length)
        if info is not None and info.ok:
            send.attempt(info, None, now)
        else:
            instance.spawn(send.attempt_after_route())
        return future

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> None:
        """Send one message without waiting for (or getting) an answer; no retries.

        Raises:
            InvalidArgumentError: bad topic, empty or oversized body.
            ConnectError: the broker cannot be reached.
        """
        prepared = prepare_single(msg, self.settings, self._ids)
        target = SendTarget.for_message(msg, queue, selector, arg, sharding_key)
        if target is None:
            info = await self.find_publish_info(prepared.topic)
            mq = self.fault.select_one_message_queue(info, None)
        else:
            mq = await self._chosen_queue(prepared, msg, target)
        addr = await self._broker_addr(mq.broker_name, mq.topic)
        begin = self.now_ms()
        try:
            await self.instance.api.invoke_oneway(
                addr, build_request(prepared, mq, self._header_base)
            )
        except ArianeError as exc:
            self.fault.update_fault_item(mq.broker_name, self.now_ms() - begin, True)
            if isinstance(exc, TRANSPORT_ERRORS):
                self.instance.refresh_route_soon(mq.topic)
            raise
        self.fault.update_fault_item(mq.broker_name, self.now_ms() - begin, False)
