"""Blocking consumers: ``SyncPushConsumer``, ``SyncPullConsumer`` and ``SyncSimpleConsumer``
(see ``ariane.client.sync`` for how the background loop works).

``SyncPushConsumer`` runs a plain-function listener in the consumer's worker threads
(``consume_thread_nums`` of them), never on the loop, so the listener may block; any thread
may call the methods. ``SyncPullConsumer.poll`` blocks the calling thread only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from ariane.client._lite_pull import PullConsumer
from ariane.client._push import PushConsumer
from ariane.client._simple import SimpleConsumer
from ariane.client.consumer_types import ConcurrentListener, MessageSelector, OrderlyListener
from ariane.client.message import MessageExt, MessageQueue
from ariane.client.sync import _Blocking, background_loop

__all__ = ["SyncPullConsumer", "SyncPushConsumer", "SyncSimpleConsumer"]


class _SyncConsumer(_Blocking):
    """Lifecycle and subscriptions shared by the blocking consumers."""

    consumer: PushConsumer | PullConsumer | SimpleConsumer

    def _start_coro(self) -> Awaitable[None]:
        return self.consumer.start()

    def _close_coro(self) -> Awaitable[None]:
        return self.consumer.close()

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """``subscribe`` of the asyncio consumer."""
        self._bg.run(_call(self.consumer.subscribe, topic, expression))

    def unsubscribe(self, topic: str) -> None:
        """``unsubscribe`` of the asyncio consumer."""
        self._bg.run(_call(self.consumer.unsubscribe, topic))


class SyncPushConsumer(_SyncConsumer):
    """A blocking ``PushConsumer``: same arguments; listeners run in worker threads.

    ``with SyncPushConsumer("group", namesrv_addr=...) as c:`` after ``subscribe`` and
    ``register_message_listener``, or call ``start()``/``shutdown()``.
    """

    consumer: PushConsumer

    def __init__(self, group: str, **kwargs: Any) -> None:
        self._bg = background_loop()
        self.consumer = PushConsumer(group, **kwargs)

    def __enter__(self) -> SyncPushConsumer:
        self.start()
        return self

    def register_message_listener(
        self, listener: ConcurrentListener | OrderlyListener, *, orderly: bool = False
    ) -> None:
        """``PushConsumer.register_message_listener`` (plain functions run in threads)."""
        self.consumer.register_message_listener(listener, orderly=orderly)

    def suspend(self) -> None:
        """Pause pulling."""
        self._bg.run(_call(self.consumer.suspend))

    def resume(self) -> None:
        """Resume pulling."""
        self._bg.run(_call(self.consumer.resume))

    def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """``PushConsumer.fetch_subscribe_message_queues``."""
        return self._bg.run(self.consumer.fetch_subscribe_message_queues(topic))

    def send_message_back(
        self, msg: MessageExt, delay_level: int = 0, broker_name: str | None = None
    ) -> bool:
        """``PushConsumer.send_message_back``."""
        return self._bg.run(self.consumer.send_message_back(msg, delay_level, broker_name))


class SyncPullConsumer(_SyncConsumer):
    """A blocking ``PullConsumer`` (lite pull): same arguments, methods block."""

    consumer: PullConsumer

    def __init__(self, group: str, **kwargs: Any) -> None:
        self._bg = background_loop()
        self.consumer = PullConsumer(group, **kwargs)

    def __enter__(self) -> SyncPullConsumer:
        self.start()
        return self

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """``PullConsumer.assign``."""
        self._bg.run(_call(self.consumer.assign, list(queues)))

    def assignment(self) -> set[MessageQueue]:
        """``PullConsumer.assignment``."""
        return self._bg.run(_call(self.consumer.assignment))

    def poll(self, timeout_ms: int = 5000) -> list[MessageExt]:
        """``PullConsumer.poll``: blocks this thread up to ``timeout_ms``."""
        return self._bg.run(self.consumer.poll(timeout_ms))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """``PullConsumer.seek``."""
        self._bg.run(self.consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        """``PullConsumer.seek_to_begin``."""
        self._bg.run(self.consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        """``PullConsumer.seek_to_end``."""
        self._bg.run(self.consumer.seek_to_end(mq))

    def commit(
        self, offsets: Mapping[MessageQueue, int] | None = None, *, persist: bool = True
    ) -> None:
        """``PullConsumer.commit``."""
        self._bg.run(self.consumer.commit(offsets, persist=persist))

    def committed(self, mq: MessageQueue) -> int:
        """``PullConsumer.committed``."""
        return self._bg.run(self.consumer.committed(mq))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """``PullConsumer.pause``."""
        self._bg.run(_call(self.consumer.pause, list(queues)))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """``PullConsumer.resume``."""
        self._bg.run(_call(self.consumer.resume, list(queues)))

    def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """``PullConsumer.fetch_message_queues``."""
        return self._bg.run(self.consumer.fetch_message_queues(topic))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """``PullConsumer.offset_for_timestamp``."""
        return self._bg.run(self.consumer.offset_for_timestamp(mq, timestamp_ms))


class SyncSimpleConsumer(_SyncConsumer):
    """A blocking ``SimpleConsumer`` (RocketMQ 5 style): same arguments, methods block.

    ``with SyncSimpleConsumer("group", {"Topic": "*"}, namesrv_addr=...) as c:`` then
    ``for m in c.receive(16): ...; c.ack(m)``.
    """

    consumer: SimpleConsumer

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str | MessageSelector] | None = None,
        **kwargs: Any,
    ) -> None:
        self._bg = background_loop()
        self.consumer = SimpleConsumer(group, subscriptions, **kwargs)

    def __enter__(self) -> SyncSimpleConsumer:
        self.start()
        return self

    def receive(
        self, max_message_num: int = 16, invisible_duration_ms: int | None = None
    ) -> list[MessageExt]:
        """``SimpleConsumer.receive``: blocks up to the await duration when empty."""
        return self._bg.run(self.consumer.receive(max_message_num, invisible_duration_ms))

    def ack(self, message: MessageExt) -> None:
        """``SimpleConsumer.ack``."""
        self._bg.run(self.consumer.ack(message))

    def change_invisible_duration(self, message: MessageExt, invisible_duration_ms: int) -> None:
        """``SimpleConsumer.change_invisible_duration`` (updates the message's handle)."""
        self._bg.run(self.consumer.change_invisible_duration(message, invisible_duration_ms))


async def _call(fn: Any, *args: Any) -> Any:
    """Run a plain method on the loop thread (consumer state belongs to that thread)."""
    return fn(*args)
