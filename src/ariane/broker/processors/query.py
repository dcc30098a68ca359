"""Lookups: QUERY_MESSAGE and VIEW_MESSAGE_BY_ID (RocketMQ ``QueryMessageProcessor``) and the
offset queries GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and
GET_EARLIEST_MSG_STORETIME (their part of ``AdminBrokerProcessor``).

Key queries walk index files and read records that may not be in memory, so they run in a
worker thread; the other lookups answer inline.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ariane.broker.processors import error, ok
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["QueryMessageProcessor"]


class QueryMessageProcessor:
    """Handles message lookups and offset queries.

    Args:
        broker: the broker whose store is queried.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.store = broker.store

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
