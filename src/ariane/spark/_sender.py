"""Sending a Spark partition's rows: batched, pipelined, and ordered per sharding key.

How it works: each task shares its process's producer (``SyncProducer`` on the SDK's
background loop, one per NameServer and group). Rows become ``Message``s whose ``UNIQ_KEY``
is the row's deterministic id (``ariane.spark.ids``).

* Rows without a sharding key or delay are grouped per topic into batches of ``batch_rows``
  (at most ~1 MiB) and sent with ``send_batch_async``, up to ``max_in_flight`` batches at
  once; each batch is stored atomically on a queue chosen round robin.
* Rows with a sharding key go to the queue ``SelectMessageQueueByHash`` picks for the key
  (the same queue Java's ``send(msg, selector, key)`` picks); they are grouped per queue and
  each queue's batches are sent one after the other, waiting for each, so rows of one key
  are stored in row order.
* Rows with a delay level cannot be batched: sent one by one (sequentially per queue when
  they also have a sharding key).

``finish()`` waits for everything; any failure raises, which fails the Spark task, which
Spark retries; retried rows carry the same ids. With ``idempotent`` (the default) each id is
also the message's ``__ARIANE_DEDUP`` property and batches without a sharding key go to the
queue their first id hashes to (the same broker on a retry), so the broker's idempotence
window stores each row once: exactly-once within the window (docs/spark.md).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections import deque

from ariane.acl.credentials import SessionCredentials
from ariane.client._selector import SelectMessageQueueByHash
from ariane.client.message import Message, MessageQueue, SendResult
from ariane.client.sync import SyncProducer, background_loop
from ariane.common import properties as props
from ariane.errors import InvalidArgumentError
from ariane.spark._arrow import SinkRow
from ariane.spark.options import SinkOptions

__all__ = ["RowSender", "shared_producer"]

_BATCH_BYTES = 1024 * 1024
_producers: dict[tuple[int, str, str, SessionCredentials | None], SyncProducer] = {}
_producers_lock = threading.Lock()


def shared_producer(opts: SinkOptions) -> SyncProducer:
    """The process's started producer for (NameServer, group), created on first use."""
    key = (os.getpid(), opts.nameserver, opts.producer_group, opts.credentials)
    with _producers_lock:
        producer = _producers.get(key)
        if producer is None:
            producer = SyncProducer(
                opts.producer_group,
                namesrv_addr=opts.nameserver,
                send_timeout_ms=opts.send_timeout_ms,
                credentials=opts.credentials,
            )
            producer.start()
            _producers[key] = producer
        return producer


class RowSender:
    """Sends the rows of one task (see the module docstring).

    Args:
        opts: sink options.
        producer: defaults to the process's shared producer.
    """

    def __init__(self, opts: SinkOptions, producer: SyncProducer | None = None) -> None:
        self.opts = opts
        self.producer = producer or shared_producer(opts)
        self._selector = SelectMessageQueueByHash()
        self._queues: dict[str, list[MessageQueue]] = {}
        self._loose: dict[str, tuple[list[Message], int]] = {}
        self._keyed: dict[MessageQueue, tuple[list[Message], int]] = {}
        self._in_flight: deque[concurrent.futures.Future[SendResult]] = deque()
        self.sent = 0

    def message(self, row: SinkRow, msg_id: str) -> Message:
        """The message of a row with ``msg_id`` as its UNIQ_KEY.

        Raises:
            InvalidArgumentError: no topic in the row nor the options, an empty body.
        """
        topic = row.topic or self.opts.topic
        if not topic:
            raise InvalidArgumentError("a row has no topic: set the topic option or column")
        if not row.body:
            raise InvalidArgumentError("a row has an empty body (RocketMQ needs at least a byte)")
        msg = Message(
            topic,
            row.body,
            tags=row.tags,
            keys=row.keys,
            properties=row.properties,
            delay_level=row.delay_level,
        )
        msg.properties[props.UNIQ_KEY] = msg_id
        if self.opts.idempotent:  # the broker stores it once (ariane.store.dedup)
            msg.properties[props.DEDUP] = msg_id
        return msg

    def add(self, msg: Message, sharding_key: str | None) -> None:
        """Queue one message for sending (may block while too many batches are in flight)."""
        delayed = msg.properties.get(props.DELAY) not in (None, "0")
        if sharding_key:
            mq = self._queue_for(msg.topic, sharding_key)
            if delayed:
                self._flush_keyed(mq)
                self.producer.send(msg, queue=mq)
                self.sent += 1
                return
            msgs, size = self._keyed.get(mq, ([], 0))
            msgs.append(msg)
            size += len(msg.body) + 64
            self._keyed[mq] = (msgs, size)
            if len(msgs) >= self.opts.batch_rows or size >= _BATCH_BYTES:
                self._flush_keyed(mq)
            return
        if delayed:
            self._track(self.producer.send_async(msg, sharding_key=self._pin(msg)))
            return
        msgs, size = self._loose.get(msg.topic, ([], 0))
        msgs.append(msg)
        size += len(msg.body) + 64
        self._loose[msg.topic] = (msgs, size)
        if len(msgs) >= self.opts.batch_rows or size >= _BATCH_BYTES:
            self._flush_loose(msg.topic)

    def finish(self) -> int:
        """Send what is buffered and wait for every send; returns the messages sent.

        Raises:
            Whatever a send raised (``SendError``, ``BrokerResponseError``...).
        """
        for topic in list(self._loose):
            self._flush_loose(topic)
        for mq in list(self._keyed):
            self._flush_keyed(mq)
        while self._in_flight:
            self._in_flight.popleft().result()
        return self.sent

    def _queue_for(self, topic: str, key: str) -> MessageQueue:
        queues = self._queues.get(topic)
        if queues is None:
            queues = self.producer.fetch_publish_message_queues(topic)
            if not queues:
                raise InvalidArgumentError(f"topic {topic!r} has no writable queue")
            self._queues[topic] = queues
        return self._selector.select(queues, Message(topic, b"-"), key)

    def _flush_keyed(self, mq: MessageQueue) -> None:
        msgs, _ = self._keyed.pop(mq, ([], 0))
        if msgs:
            self.producer.send_batch(msgs, queue=mq)
            self.sent += len(msgs)

    def _flush_loose(self, topic: str) -> None:
        msgs, _ = self._loose.pop(topic, ([], 0))
        if not msgs:
            return
        inner = self.producer.producer
        key = self._pin(msgs[0])
        future = background_loop().bridge(lambda: inner.send_batch_async(msgs, sharding_key=key))
        self._track(future, len(msgs))

    def _pin(self, msg: Message) -> str | None:
        """Idempotent writes send a batch to the queue its first id hashes to, so that a
        retry reaches the broker (and window) of the first attempt."""
        return msg.properties.get(props.DEDUP) if self.opts.idempotent else None

    def _track(self, future: concurrent.futures.Future[SendResult], count: int = 1) -> None:
        self._in_flight.append(future)
        self.sent += count
        while len(self._in_flight) > self.opts.max_in_flight:
            self._in_flight.popleft().result()
