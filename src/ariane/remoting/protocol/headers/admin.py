"""Custom headers of the broker's administration requests (``AdminBrokerProcessor``)."""

from __future__ import annotations

from ariane.remoting.protocol.headers._base import I32, I64, CommandHeader, header

__all__ = [
    "CloneGroupOffsetRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "GetAllSubscriptionGroupRequestHeader",
    "GetAllSubscriptionGroupResponseHeader",
    "GetAllTopicConfigRequestHeader",
    "GetAllTopicConfigResponseHeader",
    "GetBrokerConfigResponseHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetSubscriptionGroupConfigRequestHeader",
    "GetTopicConfigRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryConsumeQueueRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "QueryCorrectionOffsetHeader",
    "QuerySubscriptionByConsumerRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "QueryTopicsByConsumerRequestHeader",
    "ResumeCheckHalfMessageRequestHeader",
    "TransferLeadershipRequestHeader",
    "UpdateGroupForbiddenRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
]


@header()
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17); ``attributes`` is "+k=v,+k2=v2,-k3"."""

    topic: str
    default_topic: str
    read_queue_nums: I32
    write_queue_nums: I32
    perm: I32
    topic_filter_type: str
    topic_sys_flag: I32 | None = None
    order: bool = False
    attributes: str | None = None
    force: bool = False


@header()
class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@header()
class GetAllTopicConfigRequestHeader(CommandHeader):
    """GET_ALL_TOPIC_CONFIG (21); all absent means everything at once."""

    topic_seq: I32 | None = None
    data_version: str | None = None
    max_topic_num: I32 | None = None


@header()
class GetAllTopicConfigResponseHeader(CommandHeader):
    """Answer to GET_ALL_TOPIC_CONFIG."""

    total_topic_num: I32 | None = None


@header()
class GetTopicConfigRequestHeader(CommandHeader):
    """GET_TOPIC_CONFIG (351)."""

    topic: str


@header()
class GetTopicStatsInfoRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@header()
class GetConsumeStatsRequestHeader(CommandHeader):
    """GET_CONSUME_STATS (208); ``topic_list`` is comma separated."""

    consumer_group: str
    topic: str | None = None
    topic_list: str | None = None


@header()
class GetConsumerConnectionListRequestHeader(CommandHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@header()
class GetProducerConnectionListRequestHeader(CommandHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@header()
class GetBrokerConfigResponseHeader(CommandHeader):
    """Answer to GET_BROKER_CONFIG: the config DataVersion as JSON text."""

    version: str


@header()
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str
    clean_offset: bool = False


@header()
class GetAllSubscriptionGroupRequestHeader(CommandHeader):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), optional paging."""

    group_seq: I32 | None = None
    data_version: str | None = None
    max_group_num: I32 | None = None


@header()
class GetAllSubscriptionGroupResponseHeader(CommandHeader):
    """Answer to GET_ALL_SUBSCRIPTIONGROUP_CONFIG."""

    total_group_num: I32 | None = None


@header()
class GetSubscriptionGroupConfigRequestHeader(CommandHeader):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""

    group: str


@header()
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@header()
class QueryTopicsByConsumerRequestHeader(CommandHeader):
    """QUERY_TOPICS_BY_CONSUMER (343)."""

    group: str


@header()
class QuerySubscriptionByConsumerRequestHeader(CommandHeader):
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345)."""

    group: str
    topic: str | None = None


@header()
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str
    group: str


@header()
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314)."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@header()
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315)."""

    stats_name: str
    stats_key: str


@header()
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317)."""

    is_order: bool


@header()
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE (321)."""

    topic: str
    queue_id: I32
    index: I64 | None = None
    count: I32 | None = None
    consumer_group: str | None = None


@header()
class QueryCorrectionOffsetHeader(CommandHeader):
    """QUERY_CORRECTION_OFFSET (308)."""

    compare_group: str
    topic: str
    filter_groups: str | None = None


@header()
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    """RESUME_CHECK_HALF_MESSAGE (323)."""

    topic: str | None = None
    msg_id: str | None = None


@header()
class UpdateGroupForbiddenRequestHeader(CommandHeader):
    """UPDATE_AND_GET_GROUP_FORBIDDEN (353)."""

    group: str
    topic: str
    readable: bool | None = None


@header()
class TransferLeadershipRequestHeader(CommandHeader):
    """ARIANE_DLEDGER_TRANSFER_LEADERSHIP (90011, an Ariane extension): hand the DLedger
    group's leadership to node ``transferee_id`` (``n1``...)."""

    transferee_id: str
