"""Administration of topics and of the broker itself (the topic/config/runtime part of RocketMQ
``AdminBrokerProcessor``): UPDATE_AND_CREATE_TOPIC(_LIST), DELETE_TOPIC_IN_BROKER,
GET_ALL_TOPIC_CONFIG, GET_TOPIC_CONFIG, GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
GET_TOPIC_STATS_INFO, UPDATE_BROKER_CONFIG, GET_BROKER_CONFIG, GET_BROKER_RUNTIME_INFO,
TRIGGER_DELETE_FILES and CLEAN_EXPIRED_CONSUMEQUEUE.

Changes are on disk before they are answered (the metadata file is written in a worker
thread); topic changes are announced to the NameServers right after.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ariane.broker.processors import error, ok
from ariane.broker.runtime_config import RESTART_REMARK, check_wire_update, is_wire_key
from ariane.common.javaprops import format_properties, parse_properties
from ariane.common.topic_attributes import alter_attributes
from ariane.common.topics import is_system_topic, validate_topic
from ariane.errors import ConfigError, InvalidArgumentError
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol._jsonfields import get_list, parse_object
from ariane.remoting.protocol.admin_bodies import TopicOffset, TopicStatsTable
from ariane.remoting.protocol.bodies import DataVersion, KVTable, TopicConfig, TopicList
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["AdminBrokerProcessor", "parse_attributes"]

logger = logging.getLogger(__name__)

_MAX_QUEUE_NUMS = 65535
_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def parse_attributes(
    text: str | None, current: dict[str, str], *, create: bool = False, enable_mixed: bool = False
) -> dict[str, str]:
    """Apply ``"+k=v,+k2=v2,-k3"`` to ``current`` (``AttributeUtil.alterCurrentAttributes``;
    see :mod:`ariane.common.topic_attributes`).

    Raises:
        InvalidArgumentError: a malformed entry, an unknown attribute or a refused value.
    """
    return alter_attributes(current, text, create=create, enable_mixed=enable_mixed)


class AdminBrokerProcessor:
    """Handles topic and broker administration.

    Args:
        broker: the broker administered.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.config_version = DataVersion(0, broker.clock.now_ms(), 0)

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        table: dict[int, Any] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST: self.update_and_create_topic_list,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.TRIGGER_DELETE_FILES: self.trigger_delete_files,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
        }
        for code, handler in table.items():
            server.register_processor(code, handler)

    # -- topics ------------------------------------------------------------------------------

    def _is_reserved(self, topic: str) -> bool:
        config = self.broker.config
        return (
            is_system_topic(topic)
            or topic in self.broker.topics.system_topics
            or topic in (config.broker_cluster_name, config.broker_name)
        )

    def _check_topic_config(self, tc: TopicConfig) -> RemotingCommand | None:
        try:
            validate_topic(tc.topic_name)
        except InvalidArgumentError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        if self._is_reserved(tc.topic_name):
            return error(
                ResponseCode.INVALID_PARAMETER,
                f"The topic[{tc.topic_name}] is conflict with system topic.",
            )
        for name, value in (
            ("readQueueNums", tc.read_queue_nums),
            ("writeQueueNums", tc.write_queue_nums),
        ):
            if not 0 <= value <= _MAX_QUEUE_NUMS:
                return error(ResponseCode.INVALID_PARAMETER, f"{name} must be 0..{_MAX_QUEUE_NUMS}")
        if not 0 <= tc.perm <= 15:
            return error(
                ResponseCode.INVALID_PARAMETER, f"perm must be PermName bits, got {tc.perm}"
            )
        if tc.topic_filter_type not in _FILTER_TYPES:
            return error(
                ResponseCode.INVALID_PARAMETER, f"bad topicFilterType {tc.topic_filter_type!r}"
            )
        return None

    async def update_and_create_topic(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC (17)."""
        header = h.CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        existing = self.broker.topics.get(header.topic)
        try:
            attributes = parse_attributes(
                header.attributes,
                existing.attributes if existing is not None else {},
                create=existing is None,
                enable_mixed=self.broker.config.enable_mixed_message_type,
            )
        except InvalidArgumentError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        tc = TopicConfig(
            header.topic, header.read_queue_nums, header.write_queue_nums, header.perm,
            header.topic_filter_type or "SINGLE_TAG", header.topic_sys_flag or 0, header.order,
            attributes,
        )  # fmt: skip
        refused = self._check_topic_config(tc)
        if refused is not None:
            return refused
        self.broker.topics.put(tc)
        await self.broker.topics.file.persist()
        return ok()

    async def update_and_create_topic_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC_LIST (18): body ``{"topicConfigList": [...]}``."""
        obj = parse_object(request.body or b"{}", "CreateTopicListRequestBody")
        configs = [
            TopicConfig.from_json(tc)
            for tc in get_list(obj, "topicConfigList", "CreateTopicListRequestBody")
        ]
        for tc in configs:
            refused = self._check_topic_config(tc)
            if refused is not None:
                return refused
            try:  # the body carries whole attribute maps: check them as a creation
                modification = ",".join(f"+{k}={v}" for k, v in tc.attributes.items())
                alter_attributes(
                    {}, modification, create=True,
                    enable_mixed=self.broker.config.enable_mixed_message_type,
                )  # fmt: skip
            except InvalidArgumentError as exc:
                return error(ResponseCode.INVALID_PARAMETER, f"{tc.topic_name}: {exc}")
        for tc in configs:
            self.broker.topics.put(tc)
        await self.broker.topics.file.persist()
        return ok()

    async def delete_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER (215): the config, its offsets and its queues."""
        header = h.DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        topic = header.topic
        try:
            validate_topic(topic)
        except InvalidArgumentError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        if self._is_reserved(topic):
            return error(
                ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic."
            )
        broker = self.broker
        broker.topics.delete(topic)
        broker.offsets.remove_topic(topic)
        await asyncio.to_thread(broker.store.delete_topics, [topic])
        await broker.topics.file.persist()
        await broker.offsets.persist()
        return ok()

    def get_all_topic_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_TOPIC_CONFIG (21): every topic with the DataVersion."""
        wrapper = self.broker.topics.wrapper()
        ext = h.GetAllTopicConfigResponseHeader(
            total_topic_num=len(wrapper.topic_config_table)
        ).to_ext_fields()
        return ok(ext, fastjson.dumps(wrapper.to_json()))

    def get_topic_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (351)."""
        header = h.GetTopicConfigRequestHeader.from_ext_fields(request.ext_fields)
        tc = self.broker.topics.get(header.topic)
        if tc is None:
            return error(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}"
            )
        return ok(body=fastjson.dumps(tc.to_json()))

    def get_system_topic_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)."""
        topics = sorted(self.broker.topics.system_topics)
        return ok(body=TopicList(topics, self.broker.broker_addr).encode())

    def get_topic_stats_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO (202): min/max offset and last store time per queue."""
        header = h.GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        topic = header.topic
        tc = broker.topics.get(topic)
        if tc is None:
            return error(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = broker.store
        table = TopicStatsTable(topic_put_tps=broker.stats.topic_put_tps(topic))
        for queue_id in range(tc.write_queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            last = 0
            if max_offset > 0:
                last = max(0, store.get_message_store_timestamp(topic, queue_id, max_offset - 1))
            mq = MessageQueue(topic, broker.config.broker_name, queue_id)
            table.offset_table[mq] = TopicOffset(
                store.get_min_offset_in_queue(topic, queue_id), max_offset, last
            )
        return ok(body=table.encode())

    # -- broker config -------------------------------------------------------------------------

    async def update_broker_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG (25): properties text; black-listed keys are refused."""
        try:
            props = parse_properties((request.body or b"").decode("utf-8"))
        except UnicodeDecodeError:
            return error(ResponseCode.INVALID_PARAMETER, "config body is not UTF-8")
        black = self.broker.config.black_listed()
        refused = sorted(k for k in props if k in black or not is_wire_key(k))
        if refused:
            logger.warning(
                "UPDATE_BROKER_CONFIG from %s refused for %s", ctx.remote_addr, ", ".join(refused)
            )
            return error(
                ResponseCode.NO_PERMISSION,
                f"Can not update config over the wire: {', '.join(refused)} (store geometry, "
                "paths, identity, network, role and security settings are read from broker.conf "
                "at start: edit it and restart)",
            )
        try:
            plan = check_wire_update(props)
            await self.broker.update_config(props)
        except ConfigError as exc:
            return error(ResponseCode.INVALID_PARAMETER, f"bad config value: {exc}")
        except OSError as exc:
            return error(ResponseCode.SYSTEM_ERROR, f"cannot save the config: {exc}")
        self.config_version = self.config_version.next_version(self.broker.clock.now_ms())
        logger.info(
            "UPDATE_BROKER_CONFIG from %s: %s", ctx.remote_addr, dict(sorted(props.items()))
        )
        remark = RESTART_REMARK + ", ".join(plan.after_restart) if plan.after_restart else None
        return ok(remark=remark)

    def get_broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONFIG (26): every setting as properties text."""
        text = format_properties(dict(sorted(self.broker.all_properties().items())))
        ext = h.GetBrokerConfigResponseHeader(
            version=self.config_version.encode().decode()
        ).to_ext_fields()
        return ok(ext, text.encode("utf-8"))

    def get_broker_runtime_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO (28)."""
        return ok(body=KVTable(self.broker.runtime_info()).encode())

    def trigger_delete_files(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """TRIGGER_DELETE_FILES (27): let the cleaner delete expired files now."""
        self.broker.store.execute_delete_files_manually()
        return ok()

    async def clean_expired_consume_queue(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306)."""
        await asyncio.to_thread(self.broker.store.clean_expired_consume_queue)
        return ok()
