"""Custom headers of the broker data path and of broker -> client calls (``protocol/header/*``).

``SendMessageRequestHeaderV2`` is the short-key twin (``a``..``n``) of
``SendMessageRequestHeader`` used by SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
SEND_REPLY_MESSAGE_V2 (325). It subclasses the V1 header with the same attributes, so a broker
parses either form with ``header_cls.from_ext_fields`` and then handles one type.
"""

from __future__ import annotations

from typing import Annotated

from ariane.remoting.protocol.headers._base import I32, I64, CommandHeader, Key, header

__all__ = [
    "CheckTransactionStateRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "RecallMessageRequestHeader",
    "RecallMessageResponseHeader",
    "ReplyMessageRequestHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
]


@header()
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) / SEND_REPLY_MESSAGE (324). ``batch`` decides batch vs single."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: I32
    queue_id: I32
    sys_flag: I32
    born_timestamp: I64
    flag: I32
    properties: str | None = None
    reconsume_times: I32 | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: I32 | None = None
    broker_name: Annotated[str | None, Key("bname")] = None

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """The same header in its short-key form."""
        return SendMessageRequestHeaderV2(
            producer_group=self.producer_group,
            topic=self.topic,
            default_topic=self.default_topic,
            default_topic_queue_nums=self.default_topic_queue_nums,
            queue_id=self.queue_id,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            flag=self.flag,
            properties=self.properties,
            reconsume_times=self.reconsume_times,
            unit_mode=self.unit_mode,
            batch=self.batch,
            max_reconsume_times=self.max_reconsume_times,
            broker_name=self.broker_name,
        )


@header()
class SendMessageRequestHeaderV2(SendMessageRequestHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): the V1 fields under keys a..n."""

    producer_group: Annotated[str, Key("a")]
    topic: Annotated[str, Key("b")]
    default_topic: Annotated[str, Key("c")]
    default_topic_queue_nums: Annotated[I32, Key("d")]
    queue_id: Annotated[I32, Key("e")]
    sys_flag: Annotated[I32, Key("f")]
    born_timestamp: Annotated[I64, Key("g")]
    flag: Annotated[I32, Key("h")]
    properties: Annotated[str | None, Key("i")] = None
    reconsume_times: Annotated[I32 | None, Key("j")] = None
    unit_mode: Annotated[bool | None, Key("k")] = None
    max_reconsume_times: Annotated[I32 | None, Key("l")] = None
    batch: Annotated[bool | None, Key("m")] = None
    broker_name: Annotated[str | None, Key("n")] = None


@header()
class SendMessageResponseHeader(CommandHeader):
    """Answer to the send codes. ``msg_id`` is the offsetMsgId (comma-joined for a batch)."""

    msg_id: str
    queue_id: I32
    queue_offset: I64
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None
    msg_region: Annotated[str | None, Key("MSG_REGION")] = None
    trace_on: Annotated[str | None, Key("TRACE_ON")] = None


@header()
class PullMessageRequestHeader(CommandHeader):
    """PULL_MESSAGE (11) / LITE_PULL_MESSAGE (361)."""

    consumer_group: str
    topic: str
    queue_id: I32
    queue_offset: I64
    max_msg_nums: I32
    sys_flag: I32
    commit_offset: I64
    suspend_timeout_millis: I64
    sub_version: I64
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: I32 | None = None
    request_source: I32 | None = None
    proxy_froward_client_id: str | None = None
    broker_name: Annotated[str | None, Key("bname")] = None


@header()
class PullMessageResponseHeader(CommandHeader):
    """Answer to PULL_MESSAGE; the four offsets are present on every non-error response."""

    suggest_which_broker_id: I64
    next_begin_offset: I64
    min_offset: I64
    max_offset: I64
    offset_delta: I64 | None = None
    topic_sys_flag: I32 | None = None
    group_sys_flag: I32 | None = None
    forbidden_type: I32 | None = None


@header()
class QueryMessageRequestHeader(CommandHeader):
    """QUERY_MESSAGE (12); ``_UNIQUE_KEY_QUERY=true`` means ``key`` is a UNIQ_KEY."""

    topic: str
    key: str
    max_num: I32
    begin_timestamp: I64
    end_timestamp: I64
    unique_key_query: Annotated[bool | None, Key("_UNIQUE_KEY_QUERY")] = None


@header()
class QueryMessageResponseHeader(CommandHeader):
    """Answer to QUERY_MESSAGE."""

    index_last_update_timestamp: I64
    index_last_update_phyoffset: I64


@header()
class ViewMessageRequestHeader(CommandHeader):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the commit-log offset from an offsetMsgId."""

    offset: I64
    topic: str | None = None


@header()
class UnregisterClientRequestHeader(CommandHeader):
    """UNREGISTER_CLIENT (35)."""

    client_id: Annotated[str, Key("clientID")]
    producer_group: str | None = None
    consumer_group: str | None = None


@header()
class GetConsumerListByGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str


@header()
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    """CONSUMER_SEND_MSG_BACK (36): ``offset`` is the commit-log offset of the message."""

    offset: I64
    group: str
    delay_level: I32
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: I32 | None = None


@header()
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37); ``commit_or_rollback`` is 0, 8 (commit) or 12 (rollback)."""

    producer_group: str
    tran_state_table_offset: I64
    commit_log_offset: I64
    commit_or_rollback: I32
    msg_id: str
    topic: str | None = None
    from_transaction_check: bool = False
    transaction_id: str | None = None


@header()
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, one-way."""

    tran_state_table_offset: I64
    commit_log_offset: I64
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    broker_name: Annotated[str | None, Key("bname")] = None


@header()
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker -> consumer, one-way."""

    consumer_group: str


@header()
class QueryConsumerOffsetRequestHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str
    topic: str
    queue_id: I32
    set_zero_if_not_found: bool | None = None


@header()
class QueryConsumerOffsetResponseHeader(CommandHeader):
    """Answer to QUERY_CONSUMER_OFFSET."""

    offset: I64


@header()
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: str
    topic: str
    queue_id: I32
    commit_offset: I64


@header()
class GetMaxOffsetRequestHeader(CommandHeader):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: I32
    committed: bool = True


@header()
class GetMaxOffsetResponseHeader(CommandHeader):
    """Answer to GET_MAX_OFFSET."""

    offset: I64


@header()
class GetMinOffsetRequestHeader(CommandHeader):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: I32


@header()
class GetMinOffsetResponseHeader(CommandHeader):
    """Answer to GET_MIN_OFFSET."""

    offset: I64


@header()
class SearchOffsetRequestHeader(CommandHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29); ``boundary_type`` is "lower" (default) or "upper"."""

    topic: str
    queue_id: I32
    timestamp: I64
    boundary_type: str | None = None


@header()
class SearchOffsetResponseHeader(CommandHeader):
    """Answer to SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: I64


@header()
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: I32


@header()
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    """Answer to GET_EARLIEST_MSG_STORETIME."""

    timestamp: I64


@header()
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    group: str
    topic: str
    timestamp: I64
    is_force: bool
    queue_id: I32 = -1
    offset: I64 | None = None


@header()
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) / GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str
    group: str
    client_addr: str | None = None


@header()
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307)."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header()
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: I32 | None = None
    group_sys_flag: I32 | None = None


@header()
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: I32
    queue_id: I32
    sys_flag: I32
    born_timestamp: I64
    flag: I32
    born_host: str
    store_host: str
    store_timestamp: I64
    properties: str | None = None
    reconsume_times: I32 | None = None
    unit_mode: bool = False


@header()
class RecallMessageRequestHeader(CommandHeader):
    """RECALL_MESSAGE (370)."""

    topic: str
    recall_handle: str
    producer_group: str | None = None


@header()
class RecallMessageResponseHeader(CommandHeader):
    """Answer to RECALL_MESSAGE."""

    msg_id: str
