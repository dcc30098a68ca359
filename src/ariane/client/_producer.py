"""The producer (RocketMQ ``DefaultMQProducer`` / ``DefaultMQProducerImpl``).

How it works: ``start`` joins the process's shared ``ClientInstance`` as a producer group.
A send first finds the topic's publish info (cached; else fetched from the NameServer; if the
NameServer has no route, the auto-create template TBW102's route is used and the broker
creates the topic on the first message, book §3.6). ``prepare_single``/``prepare_batches``
(``_send``) turn the message into request parts once; each attempt then picks a queue with
the ``MQFaultStrategy`` (round robin, avoiding the broker of the previous failed attempt, and
with ``send_latency_fault_enable`` the brokers that were slow or failed recently) and sends.

* ``send`` (sync result): up to ``1 + retry_times`` attempts sharing one ``timeout_ms``
  budget; transport errors and the retriable response codes (``retry_response_codes``)
  move to another broker (a lost connection, or a refusal saying the broker is no longer
  the master, also fetches the route again at once, rate-limited, so the next attempt finds
  a new master; a route left without a master is looked at again after a short wait, also
  when the send starts that way, until the budget is spent); with
  ``retry_another_broker_when_not_store_ok`` so do stored-but-not-OK statuses. A custom queue, selector or sharding key gets exactly one attempt.
* ``send_async``: returns a future at once; no task is created when the route is cached and
  the connection is open (the response callback finishes the future). Transport failures and
  timeouts are retried ``retry_times_async`` times on another broker; broker error answers
  are not (RocketMQ 4.7+ semantics).
* ``send_oneway``: one attempt, no answer.
* ``send_batch``: one topic, split into requests of at most ``max_message_bytes``.

Each attempt's latency feeds the fault strategy (isolation on any exception).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Collection, Iterable
from typing import Any

from ariane.acl.credentials import SessionCredentials
from ariane.client._api import parse_send_response
from ariane.client._async_send import TRANSPORT_ERRORS
from ariane.client._fault import MQFaultStrategy
from ariane.client._instance import ClientInstance
from ariane.client._producer_async import AsyncSends
from ariane.client._route import TopicPublishInfo
from ariane.client._selector import SelectorLike, SendTarget, apply_selector
from ariane.client._send import (
    PreparedSend,
    SendSettings,
    build_request,
    header_base,
    prepare_batches,
    prepare_single,
)
from ariane.client._send_head import send_head_prefix
from ariane.client._trace_dispatch import AsyncTraceDispatcher
from ariane.client._trace_hooks import SendTracer, batch_sources
from ariane.client.config import DEFAULT_INSTANCE_NAME, ClientConfig
from ariane.client.errors import (
    AccessDeniedError,
    BrokerNotFoundError,
    ClientStateError,
    NoRouteError,
    SendError,
    TopicNotWritableError,
)
from ariane.client.message import MessageExt, MessageQueue, SendResult, SendStatus
from ariane.common.clock import SystemClock
from ariane.common.message import Message
from ariane.common.msgid import UniqueIdGenerator, host_to_bytes
from ariane.common.topics import AUTO_CREATE_TOPIC, validate_group
from ariane.errors import (
    ArianeError,
    BrokerResponseError,
    InvalidArgumentError,
    RequestTimeoutError,
)
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import ResponseCode

__all__ = [
    "DEFAULT_PRODUCER_GROUP",
    "DEFAULT_RETRY_RESPONSE_CODES",
    "Producer",
    "new_producer",
    "trace_dispatcher",
    "trace_sender",
]

logger = logging.getLogger(__name__)

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
#: ``DefaultMQProducer.retryResponseCodes``: broker answers that make a sync send try again.
DEFAULT_RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
#: Answers after which the route is fetched again at once: the broker is no longer the master
#: (a slave's refusal, a DLedger leader that lost its term).
_ROUTE_STALE_CODES = frozenset({ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR})
#: How long a send whose route has no master left waits before looking again (ms), and how
#: many times (the send's time budget comes first).
_NO_MASTER_WAIT_MS = 200
_NO_MASTER_WAITS = 15


def new_producer(group: str, config: ClientConfig) -> Producer:
    """A producer of ``group`` with ``config`` (what ``ClientInstance.inner_producer`` makes)."""
    return Producer(group, client_config=config)


class Producer(AsyncSends):
    """Sends messages to a RocketMQ-compatible cluster (asyncio).

    Use as ``async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:``
    or call ``await start()`` and ``await close()``. One object serves any number of topics
    and concurrent sends; it is not thread-safe (see ``ariane.client.sync`` for threads).

    Args:
        group: the producer group (brokers call a group's producers back for transactions).
        namesrv_addr: NameServer addresses, ``"host:port;host:port"``.
        instance_name: client instance name; ``"DEFAULT"`` becomes the process id.
        client_ip: the address put in the client id and message ids (default: detected).
        send_timeout_ms: time budget of one send, retries included (``sendMsgTimeout``).
        retry_times: extra attempts of a failed ``send`` (``retryTimesWhenSendFailed``).
        retry_times_async: extra attempts of a failed ``send_async``.
        retry_another_broker_when_not_store_ok: retry sends stored with a non-OK status.
        retry_response_codes: broker answers after which ``send`` retries.
        send_latency_fault_enable: avoid slow or failed brokers across sends.
        compress_over_bytes: zlib-compress single bodies at least this long.
        compress_level: zlib level (RocketMQ's default 5).
        max_message_bytes: largest body, and largest batch request body (4 MiB).
        create_topic_key: the auto-create template topic (``TBW102``).
        default_topic_queue_nums: queues per broker of auto-created topics.
        client_config: full client settings (overrides the NameServer/instance arguments).
        credentials: ACL account that signs every request (``SessionCredentials``).
        enable_trace: record a Pub trace of every answered send (``enableMsgTrace``; see
            docs/trace.md).
        trace_topic: the trace topic (``customizedTraceTopic``; default
            ``RMQ_SYS_TRACE_TOPIC``).

    Raises:
        InvalidArgumentError: an illegal group name or setting.
    """

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        *,
        namesrv_addr: str | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        client_ip: str | None = None,
        send_timeout_ms: int = 3000,
        retry_times: int = 2,
        retry_times_async: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        retry_response_codes: Collection[int] = DEFAULT_RETRY_RESPONSE_CODES,
        send_latency_fault_enable: bool = False,
        compress_over_bytes: int = 4096,
        compress_level: int = 5,
        max_message_bytes: int = 4 * 1024 * 1024,
        create_topic_key: str = AUTO_CREATE_TOPIC,
        default_topic_queue_nums: int = 4,
        client_config: ClientConfig | None = None,
        credentials: SessionCredentials | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        validate_group(group)
        if client_config is None:
            if namesrv_addr is None:
                raise InvalidArgumentError("namesrv_addr is required")
            client_config = ClientConfig(
                namesrv_addr=namesrv_addr,
                instance_name=instance_name,
                client_ip=client_ip,
                credentials=credentials,
            )
        if send_timeout_ms <= 0 or retry_times < 0 or retry_times_async < 0:
            raise InvalidArgumentError("timeouts must be positive and retry counts >= 0")
        if not 0 <= compress_level <= 9 or max_message_bytes <= 0 or default_topic_queue_nums <= 0:
            raise InvalidArgumentError("compress_level is 0..9; sizes and counts must be > 0")
        self._group = group
        self.client_config = client_config
        clock = client_config.clock
        # the system clock's reading without its method's frame (read once per send)
        self._monotonic = time.monotonic if type(clock) is SystemClock else clock.monotonic
        self.send_timeout_ms = send_timeout_ms
        self.retry_times = retry_times
        self.retry_times_async = retry_times_async
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.retry_response_codes = frozenset(retry_response_codes)
        self.settings = SendSettings(
            group=group,
            create_topic_key=create_topic_key,
            default_topic_queue_nums=default_topic_queue_nums,
            compress_over_bytes=compress_over_bytes,
            compress_level=compress_level,
            max_message_bytes=max_message_bytes,
        )
        self._header_base = header_base(self.settings)
        self._send_prefix = send_head_prefix(self._header_base)
        self.fault = MQFaultStrategy(enabled=send_latency_fault_enable, now_ms=self.now_ms)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._route_fetches: dict[str, asyncio.Event] = {}  # topic -> a fetch on its way
        self._instance: ClientInstance | None = None
        self._ids = UniqueIdGenerator()
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        # message trace (issue 15): None unless enable_trace; the send paths test only that
        self._tracer: SendTracer | None = None
        if enable_trace:
            dispatcher = trace_dispatcher(client_config, group, "PRODUCE", trace_topic)
            self._tracer = SendTracer(dispatcher, group)

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        """The producer group."""
        return self._group

    @property
    def trace_dispatcher(self) -> AsyncTraceDispatcher | None:
        """The trace dispatcher (``enable_trace=True``), e.g. for its ``stats``."""
        return self._tracer.dispatcher if self._tracer is not None else None

    @property
    def instance(self) -> ClientInstance:
        """The shared client instance.

        Raises:
            ClientStateError: the producer is not started or is closed.
        """
        if self._instance is None or self._closed:
            raise ClientStateError(f"producer {self._group!r} is not started")
        return self._instance

    async def start(self) -> None:
        """Join the client instance and start its services (idempotent).

        Raises:
            ClientStateError: closed, or the group already has a producer in this instance.
        """
        if self._closed:
            raise ClientStateError(f"producer {self._group!r} is closed")
        if self._instance is not None:
            return
        instance = ClientInstance.acquire(self.client_config)
        try:
            instance.register_producer(self)
            await instance.start()
        except BaseException:
            await instance.release()
            raise
        self._instance = instance
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if self._tracer is not None:
            await self._tracer.dispatcher.start()
        ip = instance.client_id.split("@", 1)[0]
        try:
            self._ids = UniqueIdGenerator(host_to_bytes(ip))
        except InvalidArgumentError:
            pass
        # RocketMQ's producer has its createTopicKey (TBW102) in its publish table from the
        # start, so the route service fetches that route: the NameServer connection is open
        # and the heartbeat has connected the brokers before the first send (~2 ms less)
        key = self.settings.create_topic_key
        if key not in self._publish:
            self._publish[key] = TopicPublishInfo(key)
            instance.spawn(_fetch_route(instance, key), f"route-{key}")

    async def close(self) -> None:
        """Leave the client instance (the last client closes its connections)."""
        if self._closed:
            return
        self._closed = True
        instance, self._instance = self._instance, None
        if self._tracer is not None:
            await self._tracer.dispatcher.close()
        if instance is not None:
            await instance.unregister_producer(self._group)
            await instance.release()

    async def shutdown(self) -> None:
        """``close`` under Java's name (``DefaultMQProducer.shutdown()``)."""
        await self.close()

    def now_ms(self) -> int:
        """Monotonic milliseconds from the client config's clock (``monotonic_ms``)."""
        return int(self._monotonic() * 1000)

    def detach(self) -> None:
        """Mark closed without talking to anyone (its client instance is closing)."""
        self._closed = True
        self._instance = None

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- ProducerMember -------------------------------------------------------------------------

    def publish_topics(self) -> Collection[str]:
        """Topics sent to so far."""
        return list(self._publish)

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """Install a new route (keeping the round-robin position)."""
        old = self._publish.get(topic)
        if old is not None:
            info.counter = old.counter
        self._publish[topic] = info

    def is_publish_topic_need_update(self, topic: str) -> bool:
        """Whether the topic is used but has no queue yet."""
        info = self._publish.get(topic)
        return info is not None and not info.ok

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: h.CheckTransactionStateRequestHeader
    ) -> None:
        """A plain producer has no transaction checker; the request is ignored."""
        logger.warning("producer group %s got a transaction check but has no checker", self._group)

    # -- routes ---------------------------------------------------------------------------------

    async def find_publish_info(self, topic: str) -> TopicPublishInfo:
        """``tryToFindTopicPublishInfo``: the cached publish info, fetched if needed.

        Raises:
            NoRouteError: neither the topic nor the auto-create template has a route.
            ConnectError: no NameServer is reachable.
        """
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        # sends that find no route while one is fetched wait for that fetch: a fresh
        # producer's first sends (the harness's, two a millisecond) each fetched in turn, one
        # NameServer round trip after the other; after a failed fetch each tries again itself
        fetching = self._route_fetches.get(topic)
        while fetching is not None:
            await fetching.wait()
            info = self._publish.get(topic)
            if info is not None and info.ok:
                return info
            fetching = self._route_fetches.get(topic)
        fetching = self._route_fetches[topic] = asyncio.Event()
        try:
            return await self._fetch_publish_info(topic)
        finally:
            del self._route_fetches[topic]
            fetching.set()

    async def _fetch_publish_info(self, topic: str) -> TopicPublishInfo:
        instance = self.instance
        self._publish.setdefault(topic, TopicPublishInfo(topic))
        await instance.update_topic_route(topic)
        info = self._publish[topic]
        if info.have_route or info.ok:
            if not info.ok:
                raise TopicNotWritableError(topic, info.route)
            return info
        await instance.update_topic_route(
            topic,
            template=self.settings.create_topic_key,
            default_queue_nums=self.settings.default_topic_queue_nums,
        )
        info = self._publish[topic]
        if not info.ok:
            if info.route is not None and info.route.queue_datas:
                # no route of its own, and the auto-create template is read-only
                raise TopicNotWritableError(topic, info.route, self.settings.create_topic_key)
            raise NoRouteError(topic)
        return info

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (``fetchPublishMessageQueues``)."""
        return list((await self.find_publish_info(topic)).message_queues)

    async def _broker_addr(self, broker_name: str, topic: str) -> str:
        instance = self.instance
        addr = instance.find_broker_addr_in_publish(broker_name)
        if addr is None:
            await self.find_publish_info(topic)
            addr = instance.find_broker_addr_in_publish(broker_name)
            if addr is None:
                raise BrokerNotFoundError(broker_name)
        return addr

    # -- sync sends -----------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> SendResult:
        """Send one message and wait until the broker stored it.

        Args:
            msg: the message; its ``UNIQ_KEY`` is set if missing.
            timeout_ms: time budget including retries (default ``send_timeout_ms``).
            queue: send to exactly this queue (no retries).
            selector: pick the queue with ``selector(queues, msg, arg)`` (no retries).
            arg: passed to ``selector``.
            sharding_key: ordered send: messages with equal keys go to the same queue
                (``SelectMessageQueueByHash``, no retries).

        Returns:
            The ``SendResult``; its status may be a "stored, but" status such as
            ``FLUSH_DISK_TIMEOUT``.

        Raises:
            InvalidArgumentError: bad topic, empty or oversized body.
            NoRouteError: the topic has no route and cannot be auto-created.
            ConnectError: no NameServer is reachable (first send to a topic).
            RequestTimeoutError: the budget ran out before a queue was chosen (ordered sends).
            BrokerResponseError: the broker refused it with a non-retriable code (subclass
                per code, see ``ariane.client.errors``).
            SendError: every attempt failed (the last failure is ``__cause__``).
            ClientStateError: the producer is not started.
        """
        prepared = prepare_single(msg, self.settings, self._ids)
        sending = self._send_prepared(
            prepared, msg, timeout_ms,
            SendTarget.for_message(msg, queue, selector, arg, sharding_key),
        )  # fmt: skip
        if self._tracer is None:
            return await sending
        return await self._tracer.around(sending, msg, len(msg.body), self._store_host)

    async def send_batch(
        self,
        msgs: Iterable[Message],
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> list[SendResult]:
        """Send messages of one topic in as few requests as the size limit allows.

        The list is split into requests of at most ``max_message_bytes``; each request is
        stored atomically in one queue. Batches are not compressed.

        Returns:
            One ``SendResult`` per request (``msg_id`` lists that request's ids).

        Raises:
            InvalidArgumentError: mixed topics, delay levels, a retry topic, bad bodies.
            Everything ``send`` raises, for the failing request (earlier ones were stored).
        """
        messages = list(msgs)
        batches = prepare_batches(messages, self.settings, self._ids)
        results = []
        for prepared, chunk in zip(batches, batch_sources(messages, batches), strict=True):
            sending = self._send_prepared(
                prepared, messages[0], timeout_ms, SendTarget.of(queue, selector, arg, sharding_key)
            )
            if self._tracer is not None:
                sending = self._tracer.around(sending, chunk, len(prepared.body), self._store_host)
            results.append(await sending)
        return results

    def _store_host(self, broker_name: str) -> str:
        instance = self._instance
        addr = instance.find_broker_addr_in_publish(broker_name) if instance else None
        return addr or ""

    async def _send_prepared(
        self,
        prepared: PreparedSend,
        source: Message,
        timeout_ms: int | None,
        target: SendTarget | None,
    ) -> SendResult:
        timeout = timeout_ms or self.send_timeout_ms
        if target is None:
            return await self._send_with_retries(prepared, timeout)
        started = self.now_ms()
        mq = await self._chosen_queue(prepared, source, target)
        left = timeout - (self.now_ms() - started)
        if left <= 0:
            raise RequestTimeoutError(f"send timed out after {timeout} ms choosing a queue")
        return await self._attempt(prepared, mq, left)

    async def _chosen_queue(
        self,
        prepared: PreparedSend,
        source: Message,
        target: SendTarget,
    ) -> MessageQueue:
        if target.queue is not None:
            if target.queue.topic != prepared.topic:
                raise InvalidArgumentError(
                    f"queue topic {target.queue.topic!r} is not the message topic "
                    f"{prepared.topic!r}"
                )
            return target.queue
        info = await self.find_publish_info(prepared.topic)
        assert target.selector is not None
        return apply_selector(target.selector, info.message_queues, source, target.arg)

    async def _send_with_retries(self, prepared: PreparedSend, timeout_ms: int) -> SendResult:
        started = self.now_ms()
        try:
            info = await self.find_publish_info(prepared.topic)
        except TopicNotWritableError:
            # a route whose master is gone for a moment: wait for one below, within the
            # budget, rather than fail at once (callers retrying at once would ask the
            # NameServer as fast as they can while the group elects)
            waiting = self._publish.get(prepared.topic)
            if waiting is None or not waiting.awaiting_master:
                raise
            info = waiting
        attempts = 1 + self.retry_times
        last_broker: str | None = None
        last_error: BaseException | None = None
        result: SendResult | None = None
        timed_out = False
        made = 0
        waits = 0
        while made < attempts:
            info = self._publish.get(prepared.topic) or info
            if not info.ok:
                waits += 1
                if (
                    (not made and not info.awaiting_master)
                    or waits > _NO_MASTER_WAITS
                    or not await self._wait_for_route(prepared.topic, started, timeout_ms)
                ):
                    break
                continue
            mq = self.fault.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            left = timeout_ms - (self.now_ms() - started)
            if left <= 0:
                timed_out = True
                break
            made += 1
            begin = self.now_ms()
            try:
                result = await self._attempt(prepared, mq, left)
            except BrokerResponseError as exc:
                self.fault.update_fault_item(mq.broker_name, self.now_ms() - begin, True)
                if exc.code not in self.retry_response_codes or isinstance(exc, AccessDeniedError):
                    if result is not None:
                        return result
                    raise
                last_error = exc
                logger.info("send to %s failed (%s), retrying", mq, exc)
                if exc.code in _ROUTE_STALE_CODES:  # e.g. a slave refused: a new master?
                    await self.instance.refresh_route_after_failure(prepared.topic)
                continue
            except TRANSPORT_ERRORS as exc:
                self.fault.update_fault_item(mq.broker_name, self.now_ms() - begin, True)
                last_error = exc
                logger.info("send to %s failed (%s), retrying", mq, exc)
                await self.instance.refresh_route_after_failure(prepared.topic)
                continue
            self.fault.update_fault_item(mq.broker_name, self.now_ms() - begin, False)
            if (
                result.status is not SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
            ):
                continue
            return result
        if result is not None:
            return result
        if made == 0 and not timed_out:
            if info.awaiting_master:
                raise TopicNotWritableError(prepared.topic, info.route)
            raise NoRouteError(prepared.topic)
        detail = "send timed out" if timed_out else f"send {made} times, still failed"
        raise SendError(
            f"{detail} (topic {prepared.topic}, {timeout_ms} ms budget): {last_error}",
            attempts=made,
            timed_out=timed_out,
        ) from last_error

    async def _wait_for_route(self, topic: str, started: int, timeout_ms: int) -> bool:
        """The route lost its last master during this send (a DLedger group electing, a
        master restarting): wait a moment for a new one within the send's time budget.
        Returns False when the budget is spent."""
        left = timeout_ms - (self.now_ms() - started)
        if left <= 0:
            return False
        await asyncio.sleep(min(left, _NO_MASTER_WAIT_MS) / 1000)
        await self.instance.refresh_route_after_failure(topic)
        return True

    async def _attempt(
        self, prepared: PreparedSend, mq: MessageQueue, timeout_ms: int
    ) -> SendResult:
        addr = await self._broker_addr(mq.broker_name, mq.topic)
        request = build_request(prepared, mq, self._header_base)
        response = await self.instance.api.invoke_future(addr, request, timeout_ms)
        return parse_send_response(response, mq, prepared.msg_id)


def trace_sender(config: ClientConfig, group: str) -> Producer:
    """The producer a trace dispatcher sends trace messages with (Java: 5 s timeout). Trace
    bodies are not compressed: zlib would cost the traced client more CPU per record than
    writing them does."""
    return Producer(group, client_config=config, send_timeout_ms=5000, compress_over_bytes=1 << 30)


def trace_dispatcher(
    config: ClientConfig, group: str, kind: str, trace_topic: str | None
) -> AsyncTraceDispatcher:
    """The trace dispatcher of a client of ``group`` (``kind``: PRODUCE or CONSUME), sending
    with ``trace_sender`` producers.

    Raises:
        InvalidArgumentError: ``trace_topic`` is not a legal topic name.
    """
    return AsyncTraceDispatcher(
        trace_topic=trace_topic,
        host_config=config,
        host_group=group,
        kind=kind,
        sender_factory=trace_sender,
    )


async def _fetch_route(instance: ClientInstance, topic: str) -> None:
    """A route fetched ahead of any send (a missing route or NameServer only logged)."""
    try:
        await instance.update_topic_route(topic)
    except ArianeError as exc:
        logger.debug("route of %s not fetched at start: %s", topic, exc)
