"""The broker's topic table (RocketMQ ``TopicConfigManager``), persisted as ``topics.json``.

How it works: at start the table holds the system topics RocketMQ creates (SELF_TEST_TOPIC,
TBW102 when auto-creation is on, BenchmarkTest, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX, the
transaction topics, the cluster-name and broker-name topics, the reply topic and, optionally,
the trace topic); ``load()`` then overlays what the file holds. Every change bumps the
``DataVersion`` (which NameServers compare to decide whether a registration changed anything)
and calls ``on_change`` so the owner persists the file and re-registers with the NameServers.

A topic missing on send is created from its template topic (``defaultTopic``, normally TBW102)
when the template carries PERM_INHERIT, with ``min(defaultTopicQueueNums, template write
queues)`` queues and the template's permission minus PERM_INHERIT.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ariane.broker.config import BrokerConfig
from ariane.broker.metadata import MetadataFile, over_limit
from ariane.common.clock import Clock
from ariane.common.sysflag import PERM_INHERIT, PERM_READ, PERM_WRITE
from ariane.common.topics import (
    AUTO_CREATE_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper

__all__ = ["TopicConfigManager"]

logger = logging.getLogger(__name__)

_RW = PERM_READ | PERM_WRITE


class TopicConfigManager:
    """Topic configurations of this broker.

    Args:
        config: the broker configuration (system topics depend on it).
        path: ``topics.json``.
        clock: time for DataVersion stamps.
        schedule_queue_nums: queues of SCHEDULE_TOPIC_XXXX (one per delay level).
    """

    def __init__(
        self, config: BrokerConfig, path: str, clock: Clock, schedule_queue_nums: int = 18
    ) -> None:
        self.config = config
        self.clock = clock
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(0, clock.now_ms(), 0)
        self.file = MetadataFile(path, self.encode)
        #: called after every change (persist + re-register); set by the owner.
        self.on_change: Callable[[], None] = self.file.persist_soon
        #: called with each topic created or replaced here (the owner prepares its queues'
        #: ConsumeQueue files ahead); set by the owner.
        self.on_created: Callable[[TopicConfig], None] = lambda tc: None
        self.system_topics: set[str] = set()
        self._init_system_topics(schedule_queue_nums)

    # -- system topics ---------------------------------------------------------------------

    def _system(self, name: str, read: int, write: int, perm: int = _RW) -> None:
        self.table[name] = TopicConfig(name, read, write, perm)
        self.system_topics.add(name)

    def _init_system_topics(self, schedule_queue_nums: int) -> None:
        c = self.config
        self._system(SELF_TEST_TOPIC, 1, 1)
        if c.auto_create_topic_enable:
            n = c.default_topic_queue_nums
            self._system(AUTO_CREATE_TOPIC, n, n, PERM_INHERIT | _RW)
        self._system(BENCHMARK_TOPIC, 1024, 1024)
        self._system(
            c.broker_cluster_name, 16, 16, PERM_INHERIT | (_RW if c.cluster_topic_enable else 0)
        )
        self._system(c.broker_name, 1, 1, PERM_INHERIT | (_RW if c.broker_topic_enable else 0))
        self._system(OFFSET_MOVED_EVENT, 1, 1)
        self._system(SCHEDULE_TOPIC, schedule_queue_nums, schedule_queue_nums)
        if c.trace_topic_enable:
            self._system(c.msg_trace_topic_name, 1, 1)
        self._system(f"{c.broker_cluster_name}_REPLY_TOPIC", 1, 1)
        self._system(TRANS_HALF_TOPIC, 1, 1)
        self._system(TRANS_OP_HALF_TOPIC, 1, 1)

    # -- persistence -----------------------------------------------------------------------

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """The table and its DataVersion (REGISTER_BROKER and GET_ALL_TOPIC_CONFIG)."""
        return TopicConfigSerializeWrapper(dict(self.table), self.data_version)

    def encode(self) -> bytes:
        """``topics.json`` content (RocketMQ's TopicConfigSerializeWrapper form)."""
        return fastjson.dumps(self.wrapper().to_json())

    def load(self) -> None:
        """Overlay the persisted topics on the system topics.

        Raises:
            ConfigError: the file exists but is unreadable (names the file).
        """
        wrapper = self.file.load(
            lambda data: TopicConfigSerializeWrapper.from_json(fastjson.loads(data)), "topic config"
        )
        if wrapper is None:
            return
        for name, tc in wrapper.topic_config_table.items():
            if name == AUTO_CREATE_TOPIC and not self.config.auto_create_topic_enable:
                continue
            self.table[name] = tc
        dv = wrapper.data_version
        self.data_version = DataVersion(dv.state_version, dv.timestamp, dv.counter)

    # -- lookups -----------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        """The configuration of ``topic``."""
        return self.table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        """Whether ``topic`` is ordered."""
        tc = self.table.get(topic)
        return tc is not None and tc.order

    # -- changes -----------------------------------------------------------------------------

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self.clock.now_ms())
        self.on_change()

    def put(self, tc: TopicConfig) -> None:
        """Create or replace a topic (admin)."""
        self.table[tc.topic_name] = tc
        logger.info("topic config updated: %s", tc)
        self._changed()
        self.on_created(tc)

    def delete(self, topic: str) -> bool:
        """Remove a topic; returns whether it existed."""
        old = self.table.pop(topic, None)
        if old is None:
            return False
        logger.info("topic %s deleted", topic)
        self._changed()
        return True

    def create_in_send(
        self, topic: str, default_topic: str, remote: str, queue_nums: int, topic_sys_flag: int
    ) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: the topic, created from ``default_topic`` if it
        does not exist yet and the template allows inheriting; ``None`` otherwise."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        limit = self.config.auto_create_topic_limit
        if len(self.table) >= limit:
            raise over_limit("topic", topic, len(self.table), limit)
        template = self.table.get(default_topic)
        if template is None:
            logger.warning("no template topic %s to create %s for %s", default_topic, topic, remote)
            return None
        perm = template.perm
        if default_topic == AUTO_CREATE_TOPIC and not self.config.auto_create_topic_enable:
            perm = _RW
        if not perm & PERM_INHERIT:
            logger.warning(
                "template topic %s of %s has no inherit permission (%s)",
                default_topic,
                topic,
                remote,
            )
            return None
        n = max(0, min(queue_nums, template.write_queue_nums))
        tc = TopicConfig(
            topic, n, n, perm & ~PERM_INHERIT, template.topic_filter_type, topic_sys_flag
        )
        logger.info("auto-created topic %s from %s for %s: %s", topic, default_topic, remote, tc)
        self.table[topic] = tc
        self._changed()
        self.on_created(tc)
        return tc

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """``createTopicInSendMessageBackMethod``: retry and DLQ topics."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, "SINGLE_TAG", topic_sys_flag)
        logger.info("created topic %s: %s", topic, tc)
        self.table[topic] = tc
        self._changed()
        self.on_created(tc)
        return tc

    def replace_all(self, table: dict[str, TopicConfig], version: DataVersion) -> None:
        """Take a master's whole table and DataVersion (a slave's copy, ``SlaveSynchronize``)."""
        self.table = dict(table)
        self.data_version = DataVersion(version.state_version, version.timestamp, version.counter)
        self.on_change()

    def update_order_topics(self, order_topics: dict[str, str]) -> None:
        """Mark the topics the NameServer lists in ORDER_TOPIC_CONFIG as ordered."""
        changed = False
        for topic in order_topics:
            tc = self.table.get(topic)
            if tc is not None and not tc.order:
                tc.order = True
                changed = True
        if changed:
            self._changed()
