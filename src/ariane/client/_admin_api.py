"""The administrative requests of ``ClientAPI`` (RocketMQ ``MQClientAPIImpl``'s admin half,
used by ``MQAdminImpl`` / ``DefaultMQAdminExt``).

One async method per request; each decodes its body with the classes of
``ariane.remoting.protocol`` and raises ``error_for(code)`` on failure codes. ``Admin`` composes
these into cluster-wide operations (every broker of a topic, every master of a cluster).
"""

from __future__ import annotations

from typing import Any

from ariane.client._rpc import RpcBase
from ariane.common.javaprops import format_properties, parse_properties
from ariane.common.topics import AUTO_CREATE_TOPIC
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    GroupList,
    ProducerConnection,
    ProducerTableInfo,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicStatsTable,
)
from ariane.remoting.protocol.bodies import (
    ClusterInfo,
    KVTable,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.queue_bodies import QueryConsumeQueueResponseBody
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, ConsumeStatsList
from ariane.remoting.protocol.summary_bodies import GroupSummaryTable, TopicSummaryTable

__all__ = ["AdminRequests"]

#: How a broker's answer to UPDATE_BROKER_CONFIG names the keys that apply after a restart.
_RESTART_REMARK = "saved, applies after a restart: "


def _body(response: RemotingCommand, what: str) -> bytes:
    if not response.body:
        raise RemoteProtocolError(f"{what}: the answer has no body")
    return response.body


def _json(response: RemotingCommand, what: str) -> Any:
    return fastjson.loads(_body(response, what))


class AdminRequests(RpcBase):
    """Administrative requests; ``ClientAPI`` adds the data path."""

    # -- NameServer ----------------------------------------------------------------------------

    async def get_cluster_info(self, timeout_ms: int | None = None) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker group and cluster."""
        response = await self.call_namesrv(
            RequestCode.GET_BROKER_CLUSTER_INFO, timeout_ms=timeout_ms
        )
        return ClusterInfo.decode(_body(response, "ClusterInfo"))

    async def get_all_topic_list(self, timeout_ms: int | None = None) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        response = await self.call_namesrv(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, timeout_ms=timeout_ms
        )
        return TopicList.decode(_body(response, "TopicList")).topic_list

    async def get_topics_by_cluster(self, cluster: str, timeout_ms: int | None = None) -> list[str]:
        """GET_TOPICS_BY_CLUSTER."""
        response = await self.call_namesrv(
            RequestCode.GET_TOPICS_BY_CLUSTER,
            h.GetTopicsByClusterRequestHeader(cluster=cluster),
            timeout_ms=timeout_ms,
        )
        return TopicList.decode(_body(response, "TopicList")).topic_list

    async def delete_topic_in_namesrv(
        self, topic: str, *, cluster: str | None = None, timeout_ms: int | None = None
    ) -> None:
        """DELETE_TOPIC_IN_NAMESRV (on the NameServer this client talks to)."""
        header = h.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster)
        await self.call_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, header, timeout_ms=timeout_ms)

    async def get_kv_config(
        self, namespace: str, key: str, timeout_ms: int | None = None
    ) -> str | None:
        """GET_KV_CONFIG; ``None`` when absent."""
        response = await self.call_namesrv(
            RequestCode.GET_KV_CONFIG,
            h.GetKVConfigRequestHeader(namespace=namespace, key=key),
            timeout_ms=timeout_ms,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return h.GetKVConfigResponseHeader.from_ext_fields(response.ext_fields).value

    async def put_kv_config(
        self, namespace: str, key: str, value: str, timeout_ms: int | None = None
    ) -> None:
        """PUT_KV_CONFIG."""
        header = h.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
        await self.call_namesrv(RequestCode.PUT_KV_CONFIG, header, timeout_ms=timeout_ms)

    async def delete_kv_config(
        self, namespace: str, key: str, timeout_ms: int | None = None
    ) -> None:
        """DELETE_KV_CONFIG."""
        header = h.DeleteKVConfigRequestHeader(namespace=namespace, key=key)
        await self.call_namesrv(RequestCode.DELETE_KV_CONFIG, header, timeout_ms=timeout_ms)

    async def wipe_write_perm_of_broker(
        self, namesrv_addr: str, broker_name: str, timeout_ms: int | None = None
    ) -> int:
        """WIPE_WRITE_PERM_OF_BROKER on one NameServer: how many topics lost write permission."""
        response = await self.call(
            namesrv_addr,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER,
            h.WipeWritePermOfBrokerRequestHeader(broker_name=broker_name),
            timeout_ms=timeout_ms,
        )
        header = h.WipeWritePermOfBrokerResponseHeader.from_ext_fields(response.ext_fields)
        return header.wipe_topic_count

    async def add_write_perm_of_broker(
        self, namesrv_addr: str, broker_name: str, timeout_ms: int | None = None
    ) -> int:
        """ADD_WRITE_PERM_OF_BROKER on one NameServer: how many topics got write permission."""
        response = await self.call(
            namesrv_addr,
            RequestCode.ADD_WRITE_PERM_OF_BROKER,
            h.AddWritePermOfBrokerRequestHeader(broker_name=broker_name),
            timeout_ms=timeout_ms,
        )
        header = h.AddWritePermOfBrokerResponseHeader.from_ext_fields(response.ext_fields)
        return header.add_topic_count

    async def get_namesrv_config(
        self, namesrv_addr: str, timeout_ms: int | None = None
    ) -> dict[str, str]:
        """GET_NAMESRV_CONFIG on one NameServer: every setting as a string."""
        response = await self.call(
            namesrv_addr, RequestCode.GET_NAMESRV_CONFIG, timeout_ms=timeout_ms
        )
        return parse_properties((response.body or b"").decode("utf-8", "replace"))

    async def update_namesrv_config(
        self, namesrv_addr: str, properties: dict[str, str], timeout_ms: int | None = None
    ) -> None:
        """UPDATE_NAMESRV_CONFIG on one NameServer (applied and persisted by it)."""
        body = format_properties(properties).encode()
        await self.call(
            namesrv_addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, body, timeout_ms=timeout_ms
        )

    async def put_kv_config_at(
        self,
        namesrv_addr: str,
        namespace: str,
        key: str,
        value: str,
        timeout_ms: int | None = None,
    ) -> None:
        """PUT_KV_CONFIG on one given NameServer."""
        header = h.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
        await self.call(namesrv_addr, RequestCode.PUT_KV_CONFIG, header, timeout_ms=timeout_ms)

    async def delete_kv_config_at(
        self, namesrv_addr: str, namespace: str, key: str, timeout_ms: int | None = None
    ) -> None:
        """DELETE_KV_CONFIG on one given NameServer."""
        header = h.DeleteKVConfigRequestHeader(namespace=namespace, key=key)
        await self.call(namesrv_addr, RequestCode.DELETE_KV_CONFIG, header, timeout_ms=timeout_ms)

    # -- topics ---------------------------------------------------------------------------------

    async def create_topic(
        self, addr: str, config: TopicConfig, timeout_ms: int | None = None
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC on one broker."""
        attributes = ",".join(f"+{k}={v}" for k, v in config.attributes.items()) or None
        header = h.CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic=AUTO_CREATE_TOPIC,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
            attributes=attributes,
        )
        await self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header, timeout_ms=timeout_ms)

    async def delete_topic_in_broker(
        self, addr: str, topic: str, timeout_ms: int | None = None
    ) -> None:
        """DELETE_TOPIC_IN_BROKER."""
        header = h.DeleteTopicRequestHeader(topic=topic)
        await self.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, header, timeout_ms=timeout_ms)

    async def get_all_topic_config(
        self, addr: str, timeout_ms: int | None = None
    ) -> TopicConfigSerializeWrapper:
        """GET_ALL_TOPIC_CONFIG: a broker's whole topic table."""
        response = await self.call(addr, RequestCode.GET_ALL_TOPIC_CONFIG, timeout_ms=timeout_ms)
        return TopicConfigSerializeWrapper.from_json(_json(response, "TopicConfigWrapper"))

    async def get_topic_config(
        self, addr: str, topic: str, timeout_ms: int | None = None
    ) -> TopicConfig:
        """GET_TOPIC_CONFIG."""
        response = await self.call(
            addr,
            RequestCode.GET_TOPIC_CONFIG,
            h.GetTopicConfigRequestHeader(topic=topic),
            timeout_ms=timeout_ms,
        )
        obj = _json(response, "TopicConfigAndQueueMapping")
        inner = obj.get("topicConfig") if isinstance(obj, dict) else None
        return TopicConfig.from_json(inner if isinstance(inner, dict) else obj, topic)

    async def get_topic_stats(
        self, addr: str, topic: str, timeout_ms: int | None = None
    ) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO: min/max offsets of a topic's queues on one broker."""
        response = await self.call(
            addr,
            RequestCode.GET_TOPIC_STATS_INFO,
            h.GetTopicStatsInfoRequestHeader(topic=topic),
            timeout_ms=timeout_ms,
        )
        return TopicStatsTable.decode(_body(response, "TopicStatsTable"))

    async def query_topic_consume_by_who(
        self, addr: str, topic: str, timeout_ms: int | None = None
    ) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups consuming a topic on one broker."""
        response = await self.call(
            addr,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
            h.QueryTopicConsumeByWhoRequestHeader(topic=topic),
            timeout_ms=timeout_ms,
        )
        return GroupList.decode(_body(response, "GroupList")).group_list

    async def query_topics_by_consumer(
        self, addr: str, group: str, timeout_ms: int | None = None
    ) -> list[str]:
        """QUERY_TOPICS_BY_CONSUMER: the topics a group has offsets for on one broker."""
        response = await self.call(
            addr,
            RequestCode.QUERY_TOPICS_BY_CONSUMER,
            h.QueryTopicsByConsumerRequestHeader(group=group),
            timeout_ms=timeout_ms,
        )
        return TopicList.decode(_body(response, "TopicList")).topic_list

    # -- groups ---------------------------------------------------------------------------------

    async def create_subscription_group(
        self, addr: str, config: SubscriptionGroupConfig, timeout_ms: int | None = None
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker."""
        await self.call(
            addr,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            None,
            config.encode(),
            timeout_ms=timeout_ms,
        )

    async def delete_subscription_group(
        self, addr: str, group: str, *, clean_offset: bool = False, timeout_ms: int | None = None
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP on one broker."""
        header = h.DeleteSubscriptionGroupRequestHeader(group_name=group, clean_offset=clean_offset)
        await self.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header, timeout_ms=timeout_ms)

    async def get_all_subscription_group(
        self, addr: str, timeout_ms: int | None = None
    ) -> SubscriptionGroupWrapper:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG."""
        response = await self.call(
            addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, timeout_ms=timeout_ms
        )
        return SubscriptionGroupWrapper.decode(_body(response, "SubscriptionGroupWrapper"))

    async def get_subscription_group_config(
        self, addr: str, group: str, timeout_ms: int | None = None
    ) -> SubscriptionGroupConfig:
        """GET_SUBSCRIPTIONGROUP_CONFIG."""
        response = await self.call(
            addr,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
            h.GetSubscriptionGroupConfigRequestHeader(group=group),
            timeout_ms=timeout_ms,
        )
        return SubscriptionGroupConfig.decode(_body(response, "SubscriptionGroupConfig"))

    async def get_consumer_connection_list(
        self, addr: str, group: str, timeout_ms: int | None = None
    ) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST (CONSUMER_NOT_ONLINE raises)."""
        response = await self.call(
            addr,
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            h.GetConsumerConnectionListRequestHeader(consumer_group=group),
            timeout_ms=timeout_ms,
        )
        return ConsumerConnection.decode(_body(response, "ConsumerConnection"))

    async def get_producer_connection_list(
        self, addr: str, group: str, timeout_ms: int | None = None
    ) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST."""
        response = await self.call(
            addr,
            RequestCode.GET_PRODUCER_CONNECTION_LIST,
            h.GetProducerConnectionListRequestHeader(producer_group=group),
            timeout_ms=timeout_ms,
        )
        return ProducerConnection.decode(_body(response, "ProducerConnection"))

    async def get_consume_stats(
        self, addr: str, group: str, topic: str | None = None, timeout_ms: int | None = None
    ) -> ConsumeStats:
        """GET_CONSUME_STATS: broker, consumer and pull offsets of a group on one broker."""
        response = await self.call(
            addr,
            RequestCode.GET_CONSUME_STATS,
            h.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic),
            timeout_ms=timeout_ms,
        )
        return ConsumeStats.decode(_body(response, "ConsumeStats"))

    async def get_all_consumer_offset(
        self, addr: str, timeout_ms: int | None = None
    ) -> ConsumerOffsetSerializeWrapper:
        """GET_ALL_CONSUMER_OFFSET: every committed offset on one broker."""
        response = await self.call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, timeout_ms=timeout_ms)
        return ConsumerOffsetSerializeWrapper.decode(_body(response, "ConsumerOffsets"))

    async def reset_offset(
        self,
        addr: str,
        group: str,
        topic: str,
        timestamp_ms: int,
        *,
        force: bool = True,
        queue_id: int = -1,
        offset: int | None = None,
        timeout_ms: int | None = None,
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: the broker moves the group's offsets of ``topic`` to
        ``timestamp_ms`` (or ``offset``); returns the new offsets when the broker reports them.
        """
        header = h.ResetOffsetRequestHeader(
            group=group,
            topic=topic,
            timestamp=timestamp_ms,
            is_force=force,
            queue_id=queue_id,
            offset=offset,
        )
        response = await self.call(
            addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, timeout_ms=timeout_ms
        )
        if not response.body:
            return {}
        return ResetOffsetBody.decode(response.body).offset_table

    async def clone_group_offset(
        self,
        addr: str,
        src_group: str,
        dest_group: str,
        *,
        topic: str | None = None,
        offline: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """CLONE_GROUP_OFFSET on one broker."""
        header = h.CloneGroupOffsetRequestHeader(
            src_group=src_group, dest_group=dest_group, topic=topic, offline=offline
        )
        await self.call(addr, RequestCode.CLONE_GROUP_OFFSET, header, timeout_ms=timeout_ms)

    async def get_consumer_running_info(
        self,
        addr: str,
        group: str,
        client_id: str,
        *,
        jstack: bool = False,
        timeout_ms: int | None = None,
    ) -> Any:
        """GET_CONSUMER_RUNNING_INFO, relayed by the broker to the client: its JSON."""
        header = h.GetConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=client_id, jstack_enable=jstack
        )
        response = await self.call(
            addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header, timeout_ms=timeout_ms
        )
        return _json(response, "ConsumerRunningInfo")

    async def consume_message_directly(
        self,
        addr: str,
        group: str,
        client_id: str,
        msg_id: str,
        *,
        topic: str | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """CONSUME_MESSAGE_DIRECTLY, relayed to the client: its ConsumeMessageDirectlyResult."""
        header = h.ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=msg_id, topic=topic
        )
        response = await self.call(
            addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, timeout_ms=timeout_ms
        )
        return _json(response, "ConsumeMessageDirectlyResult")

    # -- broker ---------------------------------------------------------------------------------

    async def get_broker_runtime_info(
        self, addr: str, timeout_ms: int | None = None
    ) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's statistics table."""
        response = await self.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_ms=timeout_ms)
        return KVTable.decode(_body(response, "KVTable")).table

    async def get_broker_ha_status(
        self, addr: str, timeout_ms: int | None = None
    ) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS: the ``HARuntimeInfo`` JSON of a master or a slave."""
        response = await self.call(addr, RequestCode.GET_BROKER_HA_STATUS, timeout_ms=timeout_ms)
        status = fastjson.loads(_body(response, "HARuntimeInfo"))
        if not isinstance(status, dict):
            raise RemoteProtocolError("HARuntimeInfo is not a JSON object")
        return status

    async def transfer_leadership(
        self, addr: str, transferee_id: str, timeout_ms: int | None = None
    ) -> str:
        """ARIANE_DLEDGER_TRANSFER_LEADERSHIP: ask the DLedger leader at ``addr`` to hand over
        to node ``transferee_id``; the broker's remark."""
        header = h.TransferLeadershipRequestHeader(transferee_id=transferee_id)
        response = await self.call(
            addr, RequestCode.ARIANE_DLEDGER_TRANSFER_LEADERSHIP, header, timeout_ms=timeout_ms
        )
        return response.remark or ""

    async def get_broker_config(self, addr: str, timeout_ms: int | None = None) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting as a string."""
        response = await self.call(addr, RequestCode.GET_BROKER_CONFIG, timeout_ms=timeout_ms)
        return parse_properties(_body(response, "broker config").decode("utf-8", "replace"))

    async def update_broker_config(
        self, addr: str, properties: dict[str, str], timeout_ms: int | None = None
    ) -> list[str]:
        """UPDATE_BROKER_CONFIG: change settings at run time.

        Returns:
            The keys the broker saved but applies only after a restart (named in its answer).
        """
        body = format_properties(properties).encode()
        response = await self.call(
            addr, RequestCode.UPDATE_BROKER_CONFIG, None, body, timeout_ms=timeout_ms
        )
        remark = response.remark or ""
        if not remark.startswith(_RESTART_REMARK):
            return []
        return [k.strip() for k in remark[len(_RESTART_REMARK) :].split(",") if k.strip()]

    async def view_broker_stats_data(
        self, addr: str, stats_name: str, stats_key: str, timeout_ms: int | None = None
    ) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA: minute/hour/day windows of one statistics item
        (an unknown item raises ``BrokerResponseError`` SYSTEM_ERROR, as RocketMQ answers)."""
        header = h.ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key)
        response = await self.call(
            addr, RequestCode.VIEW_BROKER_STATS_DATA, header, timeout_ms=timeout_ms
        )
        return BrokerStatsData.decode(_body(response, "BrokerStatsData"))

    async def query_consume_queue(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        index: int,
        count: int,
        group: str | None = None,
        timeout_ms: int | None = None,
    ) -> tuple[QueryConsumeQueueResponseBody, str | None]:
        """QUERY_CONSUME_QUEUE: ``count`` raw entries of one ConsumeQueue from ``index``
        (with ``group``: its subscription and whether its filter matches each entry), and
        the broker's remark (why no entry came)."""
        header = h.QueryConsumeQueueRequestHeader(
            topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=group
        )
        response = await self.call(
            addr, RequestCode.QUERY_CONSUME_QUEUE, header, timeout_ms=timeout_ms
        )
        body = QueryConsumeQueueResponseBody.decode(_body(response, "QueryConsumeQueue"))
        return body, response.remark

    async def get_broker_consume_stats(
        self, addr: str, *, is_order: bool = False, timeout_ms: int | None = None
    ) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS: the consume stats of every group on one broker."""
        response = await self.call(
            addr,
            RequestCode.GET_BROKER_CONSUME_STATS,
            h.GetConsumeStatsInBrokerHeader(is_order=is_order),
            timeout_ms=timeout_ms,
        )
        return ConsumeStatsList.decode(_body(response, "ConsumeStatsList"))

    async def clean_expired_consume_queue(self, addr: str, timeout_ms: int | None = None) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE: drop queues wholly below the CommitLog's minimum."""
        await self.call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, timeout_ms=timeout_ms)

    async def trigger_delete_files(self, addr: str, timeout_ms: int | None = None) -> None:
        """TRIGGER_DELETE_FILES: let the broker's cleaner delete expired CommitLog files now."""
        await self.call(addr, RequestCode.TRIGGER_DELETE_FILES, timeout_ms=timeout_ms)

    # -- bulk requests (issue 17: the dashboard at 1,000 topics / 10,000 groups) -----------------

    async def create_topic_list(
        self, addr: str, configs: list[TopicConfig], timeout_ms: int | None = None
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC_LIST: many topics in one request to one broker."""
        body = fastjson.dumps({"topicConfigList": [c.to_json() for c in configs]})
        await self.call(
            addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, body, timeout_ms=timeout_ms
        )

    async def create_subscription_group_list(
        self, addr: str, configs: list[SubscriptionGroupConfig], timeout_ms: int | None = None
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: many groups in one request to one broker."""
        body = fastjson.dumps({"groupConfigList": [c.to_json() for c in configs]})
        await self.call(
            addr,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
            None,
            body,
            timeout_ms=timeout_ms,
        )

    async def get_all_producer_info(
        self, addr: str, timeout_ms: int | None = None
    ) -> ProducerTableInfo:
        """GET_ALL_PRODUCER_INFO: every online producer of one broker, by group."""
        response = await self.call(addr, RequestCode.GET_ALL_PRODUCER_INFO, timeout_ms=timeout_ms)
        return ProducerTableInfo.decode(_body(response, "ProducerTableInfo"))

    async def get_topic_summary(
        self, addr: str, timeout_ms: int | None = None
    ) -> TopicSummaryTable:
        """ARIANE_GET_TOPIC_SUMMARY (an Ariane extension): every topic of one broker."""
        response = await self.call(
            addr, RequestCode.ARIANE_GET_TOPIC_SUMMARY, timeout_ms=timeout_ms
        )
        return TopicSummaryTable.decode(_body(response, "TopicSummaryTable"))

    async def get_group_summary(
        self, addr: str, timeout_ms: int | None = None
    ) -> GroupSummaryTable:
        """ARIANE_GET_GROUP_SUMMARY (an Ariane extension): every group of one broker."""
        response = await self.call(
            addr, RequestCode.ARIANE_GET_GROUP_SUMMARY, timeout_ms=timeout_ms
        )
        return GroupSummaryTable.decode(_body(response, "GroupSummaryTable"))
