"""The batch half of sending: SEND_BATCH_MESSAGE, or a V2 send whose header says ``batch``
(part of RocketMQ ``SendMessageProcessor``: ``sendBatchMessage``).

How it works: ``BatchSends`` is mixed into :class:`~ariane.broker.processors.send.SendMessageProcessor`
and tries three paths, fastest first. A batch of the common shape (no dedup ids, or new and
distinct ones) is put straight from its request body (``store.batch_put``, no per-message
object); else decoded once and stamped in bulk (``batch_bulk``); else the per-message loop
decodes each message's properties, drops the ones the idempotence window has seen (their first
copies' offsets go into the answer in batch order), refuses transactional and delayed messages
and stamps ``UNIQ_KEY``, ``CLUSTER``, ``MSG_REGION`` and ``TRACE_ON`` where missing. Retry
topics cannot be sent to in batches. The attributes declared on the class are the
processor's (``SendMessageProcessor`` sets them); the answers are those of
:class:`~ariane.broker.processors.send_answers.SendAnswers`, the base class.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ariane.broker.processors import error
from ariane.broker.processors.batch_bulk import bulk_items
from ariane.broker.processors.send_answers import SendAnswers
from ariane.broker.schedule import delay_level_of
from ariane.common.batch import BatchEntry, decode_batch
from ariane.common.message import HostPort
from ariane.common.msgid import UniqueIdGenerator
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    DELAY,
    MSG_REGION,
    TRACE_SWITCH,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    decode_properties,
)
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import CorruptionError
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import BatchItem, MessageBatchInner, PutResult
from ariane.store.batch_put import scan as scan_batch
from ariane.store.dedup import DedupEntry, dedup_topic

if TYPE_CHECKING:
    from ariane.common.clock import Clock

__all__ = ["BatchSends"]

#: ``MessageStore.append_scanned``
AppendScanned = Callable[..., "tuple[PutResult, Future[PutResult] | None] | None"]


class BatchSends(SendAnswers):
    """The batch paths of ``SendMessageProcessor`` (which sets the attributes below)."""

    _uniq: UniqueIdGenerator
    _store_host: HostPort
    _clock: Clock
    _append_scanned: AppendScanned | None
    _max_props: int
    _refuse_put: Callable[[bool], str | None]

    def _send_batch(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: h.SendMessageRequestHeader,
        queue_id: int,
        sys_flag: int,
        born: HostPort,
    ) -> RemotingCommand | None:
        topic = header.topic
        if topic.startswith(RETRY_PREFIX):
            return error(ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group")
        if self._append_scanned is not None:
            scanned = self._scanned_batch(ctx, header, queue_id, sys_flag, born, request.body)
            if scanned is not None:
                return scanned[0]
        try:
            entries = decode_batch(request.body or b"")
        except CorruptionError as exc:
            return error(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}")
        if not entries:
            return error(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        cluster = self.broker.config.broker_cluster_name
        cluster_text = f"{CLUSTER}\x01{cluster}\x02"
        trace_text = self._stamp_trace({})  # once per batch: the same for every message
        trace_values = self._trace_values
        bulk = self._bulk_batch(topic, entries, cluster, cluster_text + trace_text)
        if bulk is not None:
            return self._put_batch(ctx, topic, queue_id, sys_flag, header, born, *bulk)
        items: list[BatchItem] = []
        ids: list[str | None] = []  # dedup ids of the items (when any has one)
        positions: dict[str, int] = {}  # dedup id -> its item's index in this batch
        dropped: list[tuple[int, DedupEntry]] = []  # (batch position, first copy)
        for entry in entries:
            text = entry.properties
            props = decode_properties(text)
            dedup_id = props.get(DEDUP)
            if dedup_id is not None:
                dedup_id = self._dedup_id(topic, dedup_id, props)
                if dedup_id is not None:
                    first = self._batch_duplicate(topic, dedup_id, positions)
                    if first is not None:
                        dropped.append((len(items) + len(dropped), first))
                        continue
                    if not ids:
                        ids = [None] * len(items)
                    positions[dedup_id] = len(items)
            if ids or dedup_id is not None:
                ids.append(dedup_id)
            if props.get(TRANSACTION_PREPARED) == "true":
                return error(
                    ResponseCode.MESSAGE_ILLEGAL, "transactional messages cannot be batched"
                )
            if DELAY in props and delay_level_of(props) > 0:
                return error(ResponseCode.MESSAGE_ILLEGAL, "delayed messages cannot be batched")
            extra = ""
            if UNIQ_KEY not in props:
                uniq = props[UNIQ_KEY] = self._uniq.next_id()
                extra = f"{UNIQ_KEY}\x01{uniq}\x02"
            if CLUSTER not in props:
                props[CLUSTER] = cluster
                extra += cluster_text
            if MSG_REGION not in props:
                props[MSG_REGION], props[TRACE_SWITCH] = trace_values
                extra += trace_text
            if extra and text and text[-1] != "\x02":
                text += "\x02"
            items.append(BatchItem(entry.body, entry.flag, props, text + extra))
        if not items:  # every message was stored before
            return self._answer_duplicate(ctx, topic, tuple(e for _, e in dropped), None)
        return self._put_batch(ctx, topic, queue_id, sys_flag, header, born, items, ids, dropped)

    def _scanned_batch(
        self,
        ctx: RequestContext,
        header: h.SendMessageRequestHeader,
        queue_id: int,
        sys_flag: int,
        born: HostPort,
        body: bytes | None,
    ) -> tuple[RemotingCommand | None] | None:
        """The answer to a batch of the common shape put straight from its body, without a
        per-message object (``store.batch_put``; the same records, ids and answer as the bulk
        path below); None: the paths below decide (another shape, an id empty, repeated or in
        the window, a refused put: they say why)."""
        topic = header.topic
        cluster = self.broker.config.broker_cluster_name
        stamp = (f"{CLUSTER}\x01{cluster}\x02" + self._stamp_trace({})).encode()
        scanned = scan_batch(body or b"", len(stamp), self._max_props)
        if scanned is None:
            return None
        ids = scanned[1]
        window = self._dedup
        remember: list[str | None] = []
        if window is not None and dedup_topic(topic) and ids.count(None) != len(ids):
            if None in ids or len(set(ids)) != len(ids):
                return None
            if window.any_seen(topic, ids, self._clock.now_ms()):  # type: ignore[arg-type]
                return None
            remember = ids
        if self._refuse_put(True) is not None:
            return None
        batch = MessageBatchInner(
            topic, queue_id, [], sys_flag, header.born_timestamp, born, self._store_host,
            header.reconsume_times or 0,
        )  # fmt: skip
        append = self._append_scanned
        assert append is not None
        appended = append(batch, body or b"", stamp, scanned)
        if appended is None:
            return None
        result, future = appended
        if window is not None and remember:  # checked new and distinct above: one update
            window.remember_put(topic, remember, queue_id, result, fresh=True)
        if future is not None:
            return (self._answer(ctx, future, topic, queue_id, None, True),)
        replicated = self._after_put(result, True)
        if replicated is None:
            return (self.put_response(result, topic, queue_id, None),)
        return (self._answer_replicated(ctx, result, replicated, topic, queue_id, None),)

    def _bulk_batch(
        self, topic: str, entries: list[BatchEntry], cluster: str, stamp_text: str
    ) -> tuple[list[BatchItem], list[str | None], list[tuple[int, DedupEntry]]] | None:
        """The items of a batch of the common shape, stamped in bulk (``batch_bulk``), with
        their dedup ids (empty: none to remember); ``None``: the per-message loop decides
        (another shape, an id empty, repeated or already in the window)."""
        region, trace = self._trace_values
        bulk = bulk_items(entries, {CLUSTER: cluster, MSG_REGION: region, TRACE_SWITCH: trace},
                          stamp_text)  # fmt: skip
        if bulk is None:
            return None
        items, ids = bulk
        if ids.count(None) == len(ids) or self._dedup is None or not dedup_topic(topic):
            return items, [], []
        if None in ids or "" in ids or len(set(ids)) != len(ids):
            return None
        if self._dedup.any_seen(topic, ids, self._clock.now_ms()):  # type: ignore[arg-type]
            return None
        return items, ids, []

    def _put_batch(
        self,
        ctx: RequestContext,
        topic: str,
        queue_id: int,
        sys_flag: int,
        header: h.SendMessageRequestHeader,
        born: HostPort,
        items: list[BatchItem],
        ids: list[str | None],
        dropped: list[tuple[int, DedupEntry]],
    ) -> RemotingCommand | None:
        batch = MessageBatchInner(
            topic, queue_id, items, sys_flag, header.born_timestamp, born, self._store_host,
            header.reconsume_times or 0,
        )  # fmt: skip
        too_few = self._refuse_put(True)
        if too_few is not None:
            return error(ResponseCode.SYSTEM_ERROR, too_few)
        if ids:
            return self._put_batch_remembering(ctx, batch, ids, dropped)
        if self._async_flush:
            result = self.store.put_messages(batch)
            replicated = self._after_put(result, True)
            if replicated is None:
                return self.put_response(result, topic, queue_id, None)
            return self._answer_replicated(ctx, result, replicated, topic, queue_id, None)
        future = self.store.submit_messages(batch)
        return self._answer(ctx, future, topic, queue_id, None, True)

    def _batch_duplicate(
        self, topic: str, dedup_id: str, positions: dict[str, int]
    ) -> DedupEntry | None:
        """The first copy of a batch item: in the window, or earlier in the same batch
        (``positions``: id -> item index; then a placeholder entry, patched in
        :meth:`_put_batch_remembering`). A dict, not a scan of the ids: a batch of n
        deduplicated messages costs O(n), not O(n²)."""
        window = self._dedup
        assert window is not None
        first = window.seen(topic, dedup_id, self._clock.now_ms())
        if first is None:
            position = positions.get(dedup_id)
            if position is not None:
                window.duplicates += 1
                return DedupEntry(-1, position, -1, 0, 0)
        return first

    def _put_batch_remembering(
        self,
        ctx: RequestContext,
        batch: MessageBatchInner,
        ids: list[str | None],
        dropped: list[tuple[int, DedupEntry]],
    ) -> RemotingCommand | None:
        """Store a batch whose items carry dedup ids, remember them, and answer with every
        message's offset (first copies' for the dropped ones) in the batch's order."""
        topic = batch.topic
        queue_id = batch.queue_id
        if self._async_flush:
            result = self.store.put_messages(batch)
            future: Future[PutResult] | None = None
        else:
            result, future = self.store.append_messages(batch)
        self._remember(topic, ids, queue_id, result)
        if dropped and result.msg_num == len(ids):
            stored = result.offsets or (result.wrote_offset,)
            offsets = list(stored)
            for position, first in dropped:
                # a copy earlier in this batch: its stored offset (index into the stored items)
                phys = stored[first.queue_offset] if first.phys_offset < 0 else first.phys_offset
                offsets.insert(position, phys)
            result.offsets = tuple(offsets)
        if future is None:
            replicated = self._after_put(result, True)
            if replicated is None:
                return self.put_response(result, topic, queue_id, None)
            return self._answer_replicated(ctx, result, replicated, topic, queue_id, None)
        return self._answer(ctx, future, topic, queue_id, None, True)
