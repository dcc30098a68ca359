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
from bisect import bisect_left
from collections import deque
from itertools import accumulate, repeat
from operator import add

import pyarrow as pa
import pyarrow.compute as pc

from ariane.acl.credentials import SessionCredentials
from ariane.client._selector import SelectMessageQueueByHash
from ariane.client._send import check_topic
from ariane.client.message import Message, MessageQueue, SendResult
from ariane.client.sync import SyncProducer, background_loop
from ariane.common import properties as props
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import ArianeError, InvalidArgumentError
from ariane.spark._arrow import SinkRow, keys_column
from ariane.spark._entries import sink_entries
from ariane.spark.ids import MessageIdSequence
from ariane.spark.options import SinkOptions

__all__ = ["RowSender", "shared_producer"]

_BATCH_BYTES = 1024 * 1024
#: a row's properties: [TAGS, KEYS] UNIQ_KEY=id [DEDUP=id] (``ariane.spark._entries``)
_UNIQ = f"{props.UNIQ_KEY}\x01".encode()
_DEDUP = f"\x02{props.DEDUP}\x01".encode()
#: columns that make a row need the row-by-row path when they hold a value
_SLOW_COLUMNS = ("properties", "delayLevel", "shardingKey")
_TEXT_TYPES = (pa.string(), pa.large_string())
_BODY_TYPES = (pa.binary(), pa.large_binary(), *_TEXT_TYPES)
_WIDE_TYPES = (pa.large_binary(), pa.large_string())
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
        self._encoded: dict[str, tuple[list[bytes], list[str], int]] = {}
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

    def add_batch(self, batch: pa.RecordBatch, ids: MessageIdSequence) -> bool:
        """Queue the rows of ``batch`` encoded in bulk, taking their ids from ``ids``: the
        fast path for rows with only a body, topic, tags and keys (no properties, delay or
        sharding key). The batch entries are byte for byte those ``send_batch_async`` would
        encode for the rows' messages, without a ``Message`` per row.

        Returns:
            False, having done nothing, when some row needs the row-by-row path (``message``
            and ``add``; it also owns the errors of bad rows).
        """
        n = batch.num_rows
        names = batch.schema.names
        for name in _SLOW_COLUMNS:
            if name in names and batch.column(name).null_count != n:
                return False
        body_col = batch.column("body")
        if body_col.type not in _BODY_TYPES or body_col.null_count:
            return False
        if n == 0:
            return True
        lengths = pc.binary_length(body_col)
        limit = self.producer.producer.settings.max_message_bytes
        if pc.min(lengths).as_py() < 1 or pc.max(lengths).as_py() > limit:
            return False
        topics = self._topics(batch, n)
        if topics is None:
            return False
        tags = batch.column("tags").to_pylist() if "tags" in names else None
        keys = keys_column(batch.column("keys")) if "keys" in names else None
        first = ids.row
        msg_ids = ids.ids(first, n)
        entries = self._entries(body_col, msg_ids, tags, keys)
        if entries is None:
            return False
        body_lens = lengths.to_pylist()
        ids.row = first + n
        if len(set(topics)) == 1:
            self._buffer_run(topics[0], entries, msg_ids, body_lens)
            return True
        for i, topic in enumerate(topics):
            self._buffer_run(topic, entries[i : i + 1], msg_ids[i : i + 1], body_lens[i : i + 1])
        return True

    def _entries(
        self,
        body_col: pa.Array,
        msg_ids: list[str],
        tags: list[str | None] | None,
        keys: list[str | None] | None,
    ) -> list[bytes] | None:
        """Each row's batch entry (``ariane.spark._entries``) with its properties in the
        order ``Message`` and :meth:`message` set them: TAGS, KEYS, UNIQ_KEY, and the id
        again as the idempotence property; None when a row's properties are too long."""
        heads = None
        if tags is not None or keys is not None:
            none: list[str | None] = [None] * len(msg_ids)
            heads = [
                (
                    (f"{props.TAGS}\x01{t}\x02" if t else "")
                    + (f"{props.KEYS}\x01{k}\x02" if k else "")
                ).encode()
                for t, k in zip(tags or none, keys or none, strict=True)
            ]
        dedup = _DEDUP if self.opts.idempotent else None
        _, offsets, data = body_col.buffers()
        wide = body_col.type in _WIDE_TYPES
        n = len(msg_ids)
        return sink_entries(offsets, data, wide, body_col.offset, n, heads, msg_ids, _UNIQ, dedup)

    def _buffer_run(
        self, topic: str, entries: list[bytes], msg_ids: list[str], body_lens: list[int]
    ) -> None:
        """Buffer encoded rows of ``topic``, sending a batch each time it reaches
        ``batchRows`` rows or 1 MiB (a row counts its body + 64 bytes), as row by row."""
        limit = self.opts.batch_rows
        reach = list(accumulate(map(add, body_lens, repeat(64))))  # bytes of rows [0, k]
        i, n = 0, len(entries)
        while i < n:
            buffered, buffered_ids, size = self._encoded.get(topic, ([], [], 0))
            j = min(n, i + limit - len(buffered_ids))
            before = reach[i - 1] if i else 0
            # the first row whose addition reaches 1 MiB ends this run
            k = bisect_left(reach, _BATCH_BYTES - size + before, i, j)
            if k < j:
                j = k + 1
            buffered += entries[i:j]
            buffered_ids += msg_ids[i:j]
            size += reach[j - 1] - before
            self._encoded[topic] = (buffered, buffered_ids, size)
            if len(buffered_ids) >= limit or size >= _BATCH_BYTES:
                self._flush_encoded(topic)
            i = j

    def _topics(self, batch: pa.RecordBatch, n: int) -> list[str] | None:
        """Every row's topic (its column, else the option), each one checked; ``None`` when
        a row has no topic or a topic a batch cannot go to."""
        default = self.opts.topic
        if "topic" in batch.schema.names:
            column = batch.column("topic").to_pylist()
            topics = [t or default for t in column]
        else:
            topics = [default] * n
        for topic in set(topics):
            if not topic or topic.startswith(RETRY_PREFIX):
                return None
            try:
                check_topic(topic)
            except ArianeError:
                return None
        return topics  # type: ignore[return-value]

    def _flush_encoded(self, topic: str) -> None:
        entries, msg_ids, _ = self._encoded.pop(topic, ([], [], 0))
        if not msg_ids:
            return
        inner = self.producer.producer
        body = b"".join(entries)
        future = background_loop().bridge(
            lambda: inner.send_encoded_batch_async(topic, body, msg_ids)
        )
        self._track(future, len(msg_ids))

    def finish(self) -> int:
        """Send what is buffered and wait for every send; returns the messages sent.

        Raises:
            Whatever a send raised (``SendError``, ``BrokerResponseError``...).
        """
        for topic in list(self._encoded):
            self._flush_encoded(topic)
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
