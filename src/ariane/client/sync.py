"""Blocking wrappers: the SDK from plain threads, without touching an event loop.

How it works: one daemon thread per process runs an event loop (uvloop when available),
started on first use (and again in a forked child). Every blocking wrapper owns the asyncio
object it wraps, lives on that loop, and turns each call into
``asyncio.run_coroutine_threadsafe(...).result()``; any number of threads may call at once
(the loop thread serialises the work). ``send_async`` hands back a
``concurrent.futures.Future`` completed from the loop. Calling a blocking method *from* the
loop thread (for example inside a transaction checker written as ``async def``) would wait on
itself, so it raises ``ClientStateError`` instead.

The consumer wrappers of issue 5 reuse ``BackgroundLoop`` the same way: ``run(coro)`` for
calls, ``call_soon(fn)`` for fire-and-forget, and user callbacks run in worker threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

from ariane.acl.credentials import SessionCredentials
from ariane.acl.plain import AclConfig, PlainAccessConfig
from ariane.client._acl_api import AclVersionInfo
from ariane.client._producer import DEFAULT_PRODUCER_GROUP, Producer
from ariane.client._selector import SelectorLike
from ariane.client._transaction import (
    LocalTransaction,
    TransactionChecker,
    TransactionProducer,
    as_state,
)
from ariane.client.admin import Admin
from ariane.client.config import DEFAULT_INSTANCE_NAME, ClientConfig, ProducerOptions
from ariane.client.errors import ClientStateError
from ariane.client.message import (
    LocalTransactionState,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from ariane.client.trace import MessageTrace
from ariane.common.message import Message
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.remoting.eventloop import loop_factory
from ariane.remoting.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumeStats,
    ProducerConnection,
    SubscriptionGroupConfig,
    TopicStatsTable,
)
from ariane.remoting.protocol.bodies import ClusterInfo, TopicConfig
from ariane.remoting.protocol.route import TopicRouteData

__all__ = [
    "BackgroundLoop",
    "SyncAdmin",
    "SyncProducer",
    "SyncTransactionProducer",
    "background_loop",
    "copy_outcome",
]

T = TypeVar("T")


def copy_outcome(out: concurrent.futures.Future[T], done: asyncio.Future[T]) -> None:
    """Copy a finished asyncio future's outcome (result, exception or cancellation) to the
    thread-safe future ``out``: a done-callback on the loop thread."""
    if done.cancelled():
        out.cancel()
    elif (exc := done.exception()) is not None:
        out.set_exception(exc)
    else:
        out.set_result(done.result())


class BackgroundLoop:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = loop_factory()()
        self.pid = os.getpid()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="ariane-client-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def _check_thread(self) -> None:
        if threading.current_thread() is self.thread:
            raise ClientStateError(
                "a blocking client call from the client's own event loop thread would deadlock; "
                "use the asyncio API there"
            )

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (re-raising its exception).

        Raises:
            ClientStateError: called from the loop thread itself.
            TimeoutError: ``timeout_s`` passed (the coroutine is cancelled).
        """
        try:
            self._check_thread()
        except ClientStateError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result within {timeout_s} s") from None

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the loop thread soon (thread-safe)."""
        self.loop.call_soon_threadsafe(fn)

    def bridge(self, start: Callable[[], asyncio.Future[T]]) -> concurrent.futures.Future[T]:
        """Call ``start()`` on the loop; its asyncio future's outcome completes the returned
        thread-safe future (no task is created)."""
        out: concurrent.futures.Future[T] = concurrent.futures.Future()

        def begin() -> None:
            try:
                future = start()
            except BaseException as exc:
                out.set_exception(exc)
                return
            future.add_done_callback(functools.partial(copy_outcome, out))

        self.call_soon(begin)
        return out


_background: BackgroundLoop | None = None
_background_lock = threading.Lock()


def background_loop() -> BackgroundLoop:
    """The process's background loop, started on first use (and anew after ``fork``)."""
    global _background
    loop = _background
    if loop is not None and loop.pid == os.getpid():
        return loop
    with _background_lock:
        if _background is None or _background.pid != os.getpid():
            _background = BackgroundLoop()
        return _background


class _Blocking:
    """Start/close/context-manager plumbing shared by the wrappers."""

    _bg: BackgroundLoop

    def _start_coro(self) -> Awaitable[None]:
        raise NotImplementedError

    def _close_coro(self) -> Awaitable[None]:
        raise NotImplementedError

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._bg.run(coro)

    def start(self) -> None:
        """Start (idempotent)."""

        async def go() -> None:
            await self._start_coro()

        self._run(go())

    def close(self) -> None:
        """Close; waits for the asyncio object to finish closing."""

        async def go() -> None:
            await self._close_coro()

        self._run(go())

    def shutdown(self) -> None:
        """``close`` under Java's name."""
        self.close()

    def __enter__(self: Any) -> Any:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SyncProducer(_Blocking):
    """A blocking ``Producer``: same arguments, methods block until done.

    ``with SyncProducer("group", namesrv_addr="127.0.0.1:9876") as p: p.send(msg)``.
    Thread-safe: any number of threads may send at once.
    """

    def __init__(
        self, group: str = DEFAULT_PRODUCER_GROUP, **kwargs: Unpack[ProducerOptions]
    ) -> None:
        self._bg = background_loop()
        self.producer = Producer(group, **kwargs)

    def _start_coro(self) -> Awaitable[None]:
        return self.producer.start()

    def _close_coro(self) -> Awaitable[None]:
        return self.producer.close()

    def send(
        self,
        msg: Message,
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> SendResult:
        """``Producer.send``, blocking."""
        return self._run(
            self.producer.send(
                msg,
                timeout_ms=timeout_ms,
                queue=queue,
                selector=selector,
                arg=arg,
                sharding_key=sharding_key,
            )
        )

    def send_async(
        self,
        msg: Message,
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """``Producer.send_async`` from any thread: a ``concurrent.futures.Future``
        (``add_done_callback`` callbacks run on the client's loop thread: keep them short)."""
        return self._bg.bridge(
            lambda: self.producer.send_async(
                msg,
                timeout_ms=timeout_ms,
                queue=queue,
                selector=selector,
                arg=arg,
                sharding_key=sharding_key,
            )
        )

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> None:
        """``Producer.send_oneway``, blocking until written."""
        self._run(
            self.producer.send_oneway(
                msg, queue=queue, selector=selector, arg=arg, sharding_key=sharding_key
            )
        )

    def send_batch(
        self,
        msgs: Iterable[Message],
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> list[SendResult]:
        """``Producer.send_batch``, blocking."""
        return self._run(
            self.producer.send_batch(
                list(msgs),
                timeout_ms=timeout_ms,
                queue=queue,
                selector=selector,
                arg=arg,
                sharding_key=sharding_key,
            )
        )

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """``Producer.fetch_publish_message_queues``, blocking."""
        return self._run(self.producer.fetch_publish_message_queues(topic))


class SyncTransactionProducer(SyncProducer):
    """A blocking ``TransactionProducer``.

    The local transaction runs in the calling thread (as in Java); a plain-function checker
    runs in a worker thread, an ``async def`` checker on the client's loop.

    Args:
        group: the producer group.
        checker: ``checker(msg) -> LocalTransactionState`` (see ``TransactionProducer``).
        **kwargs: ``Producer`` options.
    """

    producer: TransactionProducer

    def __init__(
        self, group: str, *, checker: TransactionChecker, **kwargs: Unpack[ProducerOptions]
    ) -> None:
        self._bg = background_loop()
        self.producer = TransactionProducer(group, checker=checker, **kwargs)

    def send_in_transaction(
        self,
        msg: Message,
        local_transaction: LocalTransaction,
        arg: Any = None,
        *,
        timeout_ms: int | None = None,
    ) -> TransactionSendResult:
        """``TransactionProducer.send_in_transaction`` with ``local_transaction(msg, arg)``
        called in this thread (it must return a state, not an awaitable)."""
        result = self._run(self.producer.send_half(msg, timeout_ms=timeout_ms))
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = as_state(local_transaction(msg, arg))
            except Exception as exc:
                state, error = LocalTransactionState.UNKNOW, exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        self._run(self.producer.end_transaction(result, state, error))
        return TransactionSendResult.of(result, state)


class SyncAdmin(_Blocking):
    """A blocking ``Admin``: same arguments and methods (see ``ariane.client.admin``)."""

    def __init__(
        self,
        *,
        namesrv_addr: str | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        timeout_ms: int = 5000,
        client_config: ClientConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self._bg = background_loop()
        self.admin = Admin(
            namesrv_addr=namesrv_addr,
            instance_name=instance_name,
            timeout_ms=timeout_ms,
            client_config=client_config,
            credentials=credentials,
        )

    def _start_coro(self) -> Awaitable[None]:
        return self.admin.start()

    def _close_coro(self) -> Awaitable[None]:
        return self.admin.close()

    def cluster_info(self) -> ClusterInfo:
        """``Admin.cluster_info``."""
        return self._run(self.admin.cluster_info())

    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """``Admin.broker_runtime_info``."""
        return self._run(self.admin.broker_runtime_info(broker_addr))

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        """``Admin.broker_config``."""
        return self._run(self.admin.broker_config(broker_addr))

    def acl_version(self, broker_addr: str) -> AclVersionInfo:
        """See ``Admin.acl_version``."""
        return self._run(self.admin.acl_version(broker_addr))

    def acl_config(self, broker_addr: str) -> AclConfig:
        """See ``Admin.acl_config``."""
        return self._run(self.admin.acl_config(broker_addr))

    def update_acl_account(self, broker_addr: str, config: PlainAccessConfig) -> None:
        """See ``Admin.update_acl_account``."""
        self._run(self.admin.update_acl_account(broker_addr, config))

    def delete_acl_account(self, broker_addr: str, access_key: str) -> None:
        """See ``Admin.delete_acl_account``."""
        self._run(self.admin.delete_acl_account(broker_addr, access_key))

    def update_global_white_addrs(
        self, broker_addr: str, addrs: Sequence[str], acl_file_full_path: str | None = None
    ) -> None:
        """See ``Admin.update_global_white_addrs``."""
        self._run(self.admin.update_global_white_addrs(broker_addr, addrs, acl_file_full_path))

    def update_broker_config(self, broker_addr: str, properties: Mapping[str, str]) -> list[str]:
        """``Admin.update_broker_config``."""
        return self._run(self.admin.update_broker_config(broker_addr, properties))

    def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        attributes: Mapping[str, str] | None = None,
    ) -> list[str]:
        """``Admin.create_topic``."""
        return self._run(
            self.admin.create_topic(
                topic,
                cluster=cluster,
                broker_addr=broker_addr,
                read_queue_nums=read_queue_nums,
                write_queue_nums=write_queue_nums,
                perm=perm,
                order=order,
                attributes=attributes,
            )
        )

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """``Admin.delete_topic``."""
        self._run(self.admin.delete_topic(topic, cluster=cluster))

    def topic_list(self) -> list[str]:
        """``Admin.topic_list``."""
        return self._run(self.admin.topic_list())

    def topic_route(self, topic: str) -> TopicRouteData:
        """``Admin.topic_route``."""
        return self._run(self.admin.topic_route(topic))

    def topic_config(self, topic: str, broker_addr: str | None = None) -> TopicConfig:
        """``Admin.topic_config``."""
        return self._run(self.admin.topic_config(topic, broker_addr))

    def topic_stats(self, topic: str) -> TopicStatsTable:
        """``Admin.topic_stats``."""
        return self._run(self.admin.topic_stats(topic))

    def topic_consumed_by(self, topic: str) -> list[str]:
        """``Admin.topic_consumed_by``."""
        return self._run(self.admin.topic_consumed_by(topic))

    def create_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        retry_max_times: int = 16,
        retry_queue_nums: int = 1,
        consume_orderly: bool = False,
        consume_broadcast_enable: bool = True,
        consume_enable: bool = True,
    ) -> list[str]:
        """``Admin.create_group``."""
        return self._run(
            self.admin.create_group(
                group,
                cluster=cluster,
                broker_addr=broker_addr,
                retry_max_times=retry_max_times,
                retry_queue_nums=retry_queue_nums,
                consume_orderly=consume_orderly,
                consume_broadcast_enable=consume_broadcast_enable,
                consume_enable=consume_enable,
            )
        )

    def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        clean_offset: bool = True,
    ) -> list[str]:
        """``Admin.delete_group``."""
        return self._run(
            self.admin.delete_group(
                group, cluster=cluster, broker_addr=broker_addr, clean_offset=clean_offset
            )
        )

    def group_config(self, group: str, broker_addr: str) -> SubscriptionGroupConfig:
        """``Admin.group_config``."""
        return self._run(self.admin.group_config(group, broker_addr))

    def consumer_connections(self, group: str) -> ConsumerConnection:
        """``Admin.consumer_connections``."""
        return self._run(self.admin.consumer_connections(group))

    def producer_connections(self, group: str, topic: str) -> ProducerConnection:
        """``Admin.producer_connections``."""
        return self._run(self.admin.producer_connections(group, topic))

    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """``Admin.consume_stats``."""
        return self._run(self.admin.consume_stats(group, topic))

    def consumer_running_info(self, group: str, client_id: str) -> Any:
        """``Admin.consumer_running_info``."""
        return self._run(self.admin.consumer_running_info(group, client_id))

    def max_offset(self, mq: MessageQueue) -> int:
        """``Admin.max_offset``."""
        return self._run(self.admin.max_offset(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        """``Admin.min_offset``."""
        return self._run(self.admin.min_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """``Admin.search_offset``."""
        return self._run(self.admin.search_offset(mq, timestamp_ms))

    def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """``Admin.earliest_msg_store_time``."""
        return self._run(self.admin.earliest_msg_store_time(mq))

    def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """``Admin.reset_offset_by_time``."""
        return self._run(self.admin.reset_offset_by_time(group, topic, timestamp_ms, force=force))

    def view_message(self, offset_msg_id: str) -> MessageExt:
        """``Admin.view_message``."""
        return self._run(self.admin.view_message(offset_msg_id))

    def query_message(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageExt]:
        """``Admin.query_message``."""
        return self._run(
            self.admin.query_message(topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms)
        )

    def query_message_by_id(self, topic: str, msg_id: str) -> MessageExt:
        """``Admin.query_message_by_id``."""
        return self._run(self.admin.query_message_by_id(topic, msg_id))

    def query_message_by_offset(self, mq: MessageQueue, offset: int) -> MessageExt | None:
        """``Admin.query_message_by_offset``."""
        return self._run(self.admin.query_message_by_offset(mq, offset))

    def query_message_trace(
        self,
        msg_id: str,
        trace_topic: str | None = None,
        *,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> MessageTrace:
        """``Admin.query_message_trace``."""
        return self._run(
            self.admin.query_message_trace(
                msg_id, trace_topic, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms
            )
        )

    # -- operations (``AdminOps``) ------------------------------------------------------------

    def master_addrs(self, cluster: str | None = None) -> list[str]:
        """``Admin.master_addrs``."""
        return self._run(self.admin.master_addrs(cluster))

    def topic_clusters(self, topic: str) -> list[str]:
        """``Admin.topic_clusters``."""
        return self._run(self.admin.topic_clusters(topic))

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """``Admin.wipe_write_perm``."""
        return self._run(self.admin.wipe_write_perm(broker_name))

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """``Admin.add_write_perm``."""
        return self._run(self.admin.add_write_perm(broker_name))

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        """``Admin.namesrv_config``."""
        return self._run(self.admin.namesrv_config())

    def update_namesrv_config(self, properties: Mapping[str, str]) -> list[str]:
        """``Admin.update_namesrv_config``."""
        return self._run(self.admin.update_namesrv_config(properties))

    def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """``Admin.put_kv_config``."""
        return self._run(self.admin.put_kv_config(namespace, key, value))

    def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        """``Admin.delete_kv_config``."""
        return self._run(self.admin.delete_kv_config(namespace, key))

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """``Admin.get_kv_config``."""
        return self._run(self.admin.get_kv_config(namespace, key))

    def broker_stats(self, broker_addr: str, stats_name: str, stats_key: str) -> Any:
        """``Admin.broker_stats`` (a ``BrokerStatsData`` or ``None``)."""
        return self._run(self.admin.broker_stats(broker_addr, stats_name, stats_key))

    def broker_consume_stats(self, broker_addr: str, *, is_order: bool = False) -> Any:
        """``Admin.broker_consume_stats`` (a ``ConsumeStatsList``)."""
        return self._run(self.admin.broker_consume_stats(broker_addr, is_order=is_order))

    def clean_expired_consume_queue(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """``Admin.clean_expired_consume_queue``."""
        return self._run(
            self.admin.clean_expired_consume_queue(cluster=cluster, broker_addr=broker_addr)
        )

    def delete_expired_commit_log(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """``Admin.delete_expired_commit_log``."""
        return self._run(
            self.admin.delete_expired_commit_log(cluster=cluster, broker_addr=broker_addr)
        )

    def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, *, offline: bool = False
    ) -> list[str]:
        """``Admin.clone_group_offset``."""
        return self._run(
            self.admin.clone_group_offset(src_group, dest_group, topic, offline=offline)
        )

    def reset_offset_by_time_offline(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """``Admin.reset_offset_by_time_offline``."""
        return self._run(
            self.admin.reset_offset_by_time_offline(group, topic, timestamp_ms, force=force)
        )
