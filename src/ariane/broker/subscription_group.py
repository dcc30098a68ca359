"""Consumer group configurations (RocketMQ ``SubscriptionGroupManager``), persisted as
``subscriptionGroup.json``.

How it works: RocketMQ's system groups exist from the start; ``load()`` overlays the file.
``find(group)`` auto-creates a default configuration for an unknown group when
``autoCreateSubscriptionGroup`` is on (as the pull, heartbeat and send-back paths need). Every
change bumps the DataVersion and calls ``on_change`` (persist).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ariane.broker.metadata import MetadataFile, over_limit
from ariane.common.clock import Clock
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from ariane.remoting.protocol.bodies import DataVersion

__all__ = ["SYSTEM_GROUPS", "SubscriptionGroupManager"]

logger = logging.getLogger(__name__)

#: Groups RocketMQ brokers always know.
SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_SYS_RMQ_TRANS",
)


class SubscriptionGroupManager:
    """Subscription group configurations of this broker.

    Args:
        path: ``subscriptionGroup.json``.
        clock: time for DataVersion stamps.
        auto_create: create unknown groups on first use (``autoCreateSubscriptionGroup``).
    """

    def __init__(self, path: str, clock: Clock, auto_create: bool = True) -> None:
        self.clock = clock
        self.auto_create = auto_create
        #: auto-creation stops once this many groups exist (``autoCreateSubscriptionGroupLimit``)
        self.auto_create_limit = 10_000
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.forbidden_table: dict[str, dict[str, int]] = {}
        self.data_version = DataVersion(0, clock.now_ms(), 0)
        self.file = MetadataFile(path, self.encode)
        self.on_change: Callable[[], None] = self.file.persist_soon
        for group in SYSTEM_GROUPS:
            self.table[group] = SubscriptionGroupConfig(
                group, consume_broadcast_enable=group != "TOOLS_CONSUMER"
            )

    def wrapper(self) -> SubscriptionGroupWrapper:
        """The whole table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
        return SubscriptionGroupWrapper(dict(self.table), self.forbidden_table, self.data_version)

    def encode(self) -> bytes:
        """``subscriptionGroup.json`` content."""
        return self.wrapper().encode()

    def load(self) -> None:
        """Overlay the persisted groups.

        Raises:
            ConfigError: the file exists but is unreadable (names the file).
        """
        wrapper = self.file.load(SubscriptionGroupWrapper.decode, "subscription group")
        if wrapper is None:
            return
        self.table.update(wrapper.subscription_group_table)
        self.forbidden_table.update(wrapper.forbidden_table)
        self.data_version = wrapper.data_version

    def replace_all(self, wrapper: SubscriptionGroupWrapper) -> None:
        """Take a master's whole table and DataVersion (a slave's copy, ``SlaveSynchronize``)."""
        self.table = dict(wrapper.subscription_group_table)
        self.forbidden_table = dict(wrapper.forbidden_table)
        self.data_version = wrapper.data_version
        self.on_change()

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self.clock.now_ms())
        self.on_change()

    def find(self, group: str, *, create: bool | None = None) -> SubscriptionGroupConfig | None:
        """The group's configuration, created with defaults when absent and auto-creation is
        on (``create`` overrides the setting)."""
        cfg = self.table.get(group)
        if cfg is not None:
            return cfg
        if not (self.auto_create if create is None else create):
            return None
        if len(self.table) >= self.auto_create_limit:
            raise over_limit("subscription group", group, len(self.table), self.auto_create_limit)
        cfg = SubscriptionGroupConfig(group)
        self.table[group] = cfg
        logger.info("auto-created subscription group %s", group)
        self._changed()
        return cfg

    def put(self, cfg: SubscriptionGroupConfig) -> None:
        """Create or replace a group (admin)."""
        self.table[cfg.group_name] = cfg
        logger.info("subscription group updated: %s", cfg.group_name)
        self._changed()

    def delete(self, group: str) -> bool:
        """Remove a group; returns whether it existed."""
        if self.table.pop(group, None) is None:
            return False
        self.forbidden_table.pop(group, None)
        logger.info("subscription group %s deleted", group)
        self._changed()
        return True
