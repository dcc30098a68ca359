"""Lookups: QUERY_MESSAGE and VIEW_MESSAGE_BY_ID (RocketMQ ``QueryMessageProcessor``), the
offset queries GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and
GET_EARLIEST_MSG_STORETIME, and QUERY_CONSUME_QUEUE (raw ConsumeQueue entries; their part of
``AdminBrokerProcessor``).

Key queries walk index files and read records that may not be in memory, so they run in a
worker thread, as does QUERY_CONSUME_QUEUE when a SQL92 filter needs the records; the other
lookups answer inline.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ariane.broker.filters import FilterFactory, PullFilter
from ariane.broker.processors import error, ok
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.queue_bodies import ConsumeQueueData, QueryConsumeQueueResponseBody
from ariane.remoting.server import RemotingServer
from ariane.store.format import CQ_UNIT

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["QueryMessageProcessor"]

#: entries one QUERY_CONSUME_QUEUE answers at most (RocketMQ's tool asks for 10)
_CQ_QUERY_MAX = 1000


class QueryMessageProcessor:
    """Handles message lookups and offset queries.

    Args:
        broker: the broker whose store is queried.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.store = broker.store
        self._filters = FilterFactory(max_cached=64)

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.QUERY_MESSAGE, self.query_message)
        server.register_processor(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id)
        server.register_processor(RequestCode.GET_MAX_OFFSET, self.get_max_offset)
        server.register_processor(RequestCode.GET_MIN_OFFSET, self.get_min_offset)
        server.register_processor(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset)
        server.register_processor(
            RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime
        )
        server.register_processor(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue)

    async def query_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """QUERY_MESSAGE (12): records whose KEYS (or UNIQ_KEY) match, newest first."""
        header = h.QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        max_num = header.max_num
        if header.unique_key_query:
            max_num = self.store.config.default_query_max_num
        result = await asyncio.to_thread(
            self.store.query_message,
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp,
        )  # fmt: skip
        ext = h.QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp_ms,
            index_last_update_phyoffset=result.index_last_update_phy_offset,
        ).to_ext_fields()
        if not result.messages:
            return RemotingCommand.response(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        return ok(ext, b"".join(result.messages))

    def view_message_by_id(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID (33): the record at a commit-log offset."""
        header = h.ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        record = self.store.look_message_by_offset(header.offset) if header.offset >= 0 else None
        if record is None:
            return error(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        return ok(body=record)

    def get_max_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_MAX_OFFSET (30): the offset the next message of the queue will get."""
        header = h.GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.store.get_max_offset_in_queue(header.topic, header.queue_id)
        return ok(h.GetMaxOffsetResponseHeader(offset=offset).to_ext_fields())

    def get_min_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_MIN_OFFSET (31): the smallest offset still stored."""
        header = h.GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.store.get_min_offset_in_queue(header.topic, header.queue_id)
        return ok(h.GetMinOffsetResponseHeader(offset=offset).to_ext_fields())

    def search_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP (29): with ``boundaryType`` "lower" (the default) the
        first offset stored at or after the time, with "upper" the last one at or before it
        (RocketMQ 5; 4.x answered the closest entry)."""
        header = h.SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        boundary = (header.boundary_type or "lower").lower()
        if boundary not in ("lower", "upper"):
            return error(
                ResponseCode.INVALID_PARAMETER,
                f"boundaryType must be lower or upper, not {header.boundary_type!r}",
            )
        offset = self.store.get_offset_in_queue_by_time(
            header.topic, header.queue_id, header.timestamp, upper=boundary == "upper"
        )
        return ok(h.SearchOffsetResponseHeader(offset=offset).to_ext_fields())

    def get_earliest_msg_storetime(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME (32): store time of the oldest message (-1 if none)."""
        header = h.GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields)
        ts = self.store.get_earliest_message_time(header.topic, header.queue_id)
        return ok(h.GetEarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext_fields())

    async def query_consume_queue(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (321): ``count`` raw entries (CommitLog offset, size, tags
        code) of one queue from ``index``, its min and max index and, for a ``consumerGroup``,
        the group's subscription of the topic and whether its filter matches each entry
        (``eval``; a SQL92 filter is applied to the stored record). An index outside the queue
        answers no entry and says why in the remark."""
        header = h.QueryConsumeQueueRequestHeader.from_ext_fields(request.ext_fields)
        topic, queue_id = header.topic, header.queue_id
        cq = self.store.get_consume_queue(topic, queue_id)
        if cq is None:
            return error(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body = QueryConsumeQueueResponseBody(cq.max_offset_in_queue, cq.min_offset_in_queue)
        flt = self._group_filter(header.consumer_group, topic, body)
        index = header.index if header.index is not None else 0
        count = min(max(header.count or 10, 1), _CQ_QUERY_MAX)
        count = min(count, body.max_queue_index - index)
        raw = cq.get_entries(index, count) if count > 0 else None
        if raw is None:
            remark = f"Index {index} of {queue_id}@{topic} is not exist!"
            return ok(body=body.encode(), remark=remark)
        units = [CQ_UNIT.unpack_from(raw, i) for i in range(0, len(raw) - 19, 20)]
        body.queue_data = [ConsumeQueueData(int(o), int(s), int(t)) for o, s, t in units]
        if flt is not None:
            await asyncio.to_thread(self._evaluate, flt, body.queue_data)
        return ok(body=body.encode())

    def _group_filter(
        self, group: str | None, topic: str, body: QueryConsumeQueueResponseBody
    ) -> PullFilter | None:
        """The online ``group``'s subscription of ``topic`` (in ``body``) and its filter."""
        if not group:
            return None
        info = self.broker.clients.consumer_group(group)
        sub = info.subscriptions.get(topic) if info is not None else None
        body.subscription_data = sub
        if sub is None:
            body.filter_data = f"{group}@{topic} is not online!"
            return None
        body.filter_data = f"{sub.expression_type or 'TAG'}: {sub.sub_string}"
        return self._filters.try_build(sub.sub_string, sub.expression_type)

    def _evaluate(self, flt: PullFilter, entries: list[ConsumeQueueData]) -> None:
        """Set ``eval`` of each entry (a thread: SQL92 reads the records)."""
        for one in entries:
            if not flt.is_matched_by_consume_queue(one.tags_code):
                continue
            if not flt.is_sql:
                one.eval = True
                continue
            record = self.store.look_message_by_offset(one.physic_offset, one.physic_size)
            if record is None:
                one.msg = "the message is no longer in the CommitLog"
            else:
                one.eval = flt.is_matched_by_commit_log(record)
