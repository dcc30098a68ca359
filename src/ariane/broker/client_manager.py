"""Registry of connected producers and consumers (RocketMQ ``ProducerManager``,
``ConsumerManager``, ``ConsumerGroupInfo`` and ``ClientHousekeepingService``).

How it works: heartbeats register the connection (channel) of a client under each producer
and consumer group it reports, with its client id, language and version; consumer groups also
keep the latest subscriptions and the consume type/model. When the set of consumers of a group
changes (a new channel, a subscription to a new topic or one dropped, a channel gone) the
``notify`` callback is called with the group and its remaining channels, and the broker sends
them NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once. A closed connection is removed
from every group; ``scan_expired`` drops connections that sent no heartbeat for
``channelExpiredTimeout`` (120 s) and closes them. Everything runs on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ariane.common.clock import Clock
from ariane.errors import RequestError
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.client_bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import LanguageCode

__all__ = ["ClientChannelInfo", "ClientManager", "ConsumerGroupInfo"]

logger = logging.getLogger(__name__)

#: ``notify(group, channels)``: the consumers of ``group`` changed.
NotifyFunction = Callable[[str, list[Channel]], None]


@dataclass(slots=True)
class ClientChannelInfo:
    """One client connection (``ClientChannelInfo``)."""

    channel: Channel
    client_id: str
    language: LanguageCode
    version: int
    last_update_s: float


@dataclass(slots=True)
class ConsumerGroupInfo:
    """The online consumers of one group (``ConsumerGroupInfo``)."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    channels: dict[int, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_s: float = 0.0

    def client_ids(self) -> list[str]:
        """Client ids in registration order."""
        return [info.client_id for info in self.channels.values()]

    def all_channels(self) -> list[Channel]:
        """The connections of the group."""
        return [info.channel for info in self.channels.values()]

    def update_channel(self, info: ClientChannelInfo) -> bool:
        """Add or refresh a connection; True when it is new (or its client id changed)."""
        old = self.channels.get(info.channel.id)
        self.channels[info.channel.id] = info
        return old is None or old.client_id != info.client_id

    def update_subscriptions(self, subs: list[SubscriptionData]) -> bool:
        """Replace the subscriptions; True when a topic was added or dropped."""
        changed = False
        fresh: dict[str, SubscriptionData] = {}
        for sub in subs:
            old = self.subscriptions.get(sub.topic)
            if old is None:
                changed = True
                fresh[sub.topic] = sub
            elif sub.sub_version > old.sub_version or not sub.same_filter(old):
                fresh[sub.topic] = sub
            else:
                fresh[sub.topic] = old
        if set(self.subscriptions) - set(fresh):
            changed = True
        self.subscriptions = fresh
        return changed


class ClientManager:
    """Producer and consumer connections of this broker.

    Args:
        clock: time source (expiry).
        notify: called when the consumers of a group changed.
        expired_s: connections silent for this long are dropped (``channelExpiredTimeout``).
    """

    def __init__(self, clock: Clock, notify: NotifyFunction, expired_s: float = 120.0) -> None:
        self.clock = clock
        self.notify = notify
        self.expired_s = expired_s
        #: connections one group may have (``maxClientsPerGroup``)
        self.max_per_group = 4096
        #: called with a consumer group whose last connection left
        self.on_group_offline: Callable[[str], None] | None = None
        self.producers: dict[str, dict[int, ClientChannelInfo]] = {}
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self._groups_of_channel: dict[int, tuple[set[str], set[str]]] = {}

    def client_info(
        self, channel: Channel, client_id: str, language: LanguageCode, version: int
    ) -> ClientChannelInfo:
        """A fresh connection record stamped now."""
        return ClientChannelInfo(channel, client_id, language, version, self.clock.monotonic())

    def _index(self, channel: Channel) -> tuple[set[str], set[str]]:
        groups = self._groups_of_channel.get(channel.id)
        if groups is None:
            groups = self._groups_of_channel[channel.id] = (set(), set())
        return groups

    def _check_room(self, kind: str, group: str, count: int) -> None:
        """Refuse one more connection in a group that has ``max_per_group`` (a client or an
        attacker opening connections without end)."""
        if count >= self.max_per_group:
            logger.warning(
                "%s group %s refused a new client: it has %d (maxClientsPerGroup)",
                kind, group, count,
            )  # fmt: skip
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"the {kind} group {group} already has {count} clients (maxClientsPerGroup="
                f"{self.max_per_group}): close unused clients or raise the limit",
            )

    # -- producers ---------------------------------------------------------------------------

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        """Add or refresh a producer connection."""
        table = self.producers.get(group)
        if table is None:
            table = self.producers[group] = {}
        if info.channel.id not in table:
            self._check_room("producer", group, len(table))
            logger.info("new producer of %s: %s %r", group, info.client_id, info.channel)
        table[info.channel.id] = info
        self._index(info.channel)[0].add(group)

    def unregister_producer(self, group: str, channel: Channel) -> None:
        """Remove a producer connection from ``group``."""
        table = self.producers.get(group)
        if table is not None and table.pop(channel.id, None) is not None:
            logger.info("producer of %s unregistered: %r", group, channel)
            if not table:
                del self.producers[group]
        groups = self._groups_of_channel.get(channel.id)
        if groups is not None:
            groups[0].discard(group)

    # -- consumers ---------------------------------------------------------------------------

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: list[SubscriptionData],
        *,
        notify: bool = True,
    ) -> bool:
        """Add or refresh a consumer; True (and a notification) when the group changed."""
        group_info = self.consumers.get(group)
        if group_info is None:
            group_info = self.consumers[group] = ConsumerGroupInfo(group)
        if info.channel.id not in group_info.channels:
            self._check_room("consumer", group, len(group_info.channels))
        group_info.consume_type = consume_type
        group_info.message_model = message_model
        group_info.consume_from_where = consume_from_where
        group_info.last_update_s = info.last_update_s
        new_channel = group_info.update_channel(info)
        new_subs = group_info.update_subscriptions(subscriptions)
        self._index(info.channel)[1].add(group)
        if new_channel:
            logger.info("new consumer of %s: %s %r", group, info.client_id, info.channel)
        changed = new_channel or new_subs
        if changed and notify:
            self.notify(group, group_info.all_channels())
        return changed

    def unregister_consumer(self, group: str, channel: Channel, *, notify: bool = True) -> bool:
        """Remove a consumer connection; True when it was registered."""
        groups = self._groups_of_channel.get(channel.id)
        if groups is not None:
            groups[1].discard(group)
        return self._drop_consumer(group, channel, notify)

    def _drop_consumer(self, group: str, channel: Channel, notify: bool) -> bool:
        group_info = self.consumers.get(group)
        if group_info is None or group_info.channels.pop(channel.id, None) is None:
            return False
        logger.info("consumer of %s gone: %r", group, channel)
        if not group_info.channels:
            del self.consumers[group]
            if self.on_group_offline is not None:
                self.on_group_offline(group)
        elif notify:
            self.notify(group, group_info.all_channels())
        return True

    def on_channel_closed(self, channel: Channel) -> None:
        """Forget a connection everywhere (and tell the remaining consumers)."""
        groups = self._groups_of_channel.pop(channel.id, None)
        if groups is None:
            return
        producer_groups, consumer_groups = groups
        for group in producer_groups:
            table = self.producers.get(group)
            if table is not None:
                table.pop(channel.id, None)
                if not table:
                    del self.producers[group]
        for group in consumer_groups:
            self._drop_consumer(group, channel, True)

    def scan_expired(self) -> list[Channel]:
        """Drop and close connections with no heartbeat for ``expired_s``; returns them."""
        deadline = self.clock.monotonic() - self.expired_s
        expired: dict[int, Channel] = {}
        for table in self.producers.values():
            for info in table.values():
                if info.last_update_s < deadline:
                    expired[info.channel.id] = info.channel
        for group_info in self.consumers.values():
            for info in group_info.channels.values():
                if info.last_update_s < deadline:
                    expired[info.channel.id] = info.channel
        for channel in expired.values():
            logger.warning(
                "client %r sent no heartbeat for %.0f s, closing", channel, self.expired_s
            )
            self.on_channel_closed(channel)
            channel.close()
        return list(expired.values())

    # -- queries -----------------------------------------------------------------------------

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        """The online consumers of ``group``."""
        return self.consumers.get(group)

    def consumer_ids(self, group: str) -> list[str]:
        """Client ids of the group's online consumers."""
        info = self.consumers.get(group)
        return info.client_ids() if info is not None else []

    def find_consumer(self, group: str, client_id: str) -> ClientChannelInfo | None:
        """The connection of one consumer of ``group``."""
        info = self.consumers.get(group)
        if info is None:
            return None
        for ci in info.channels.values():
            if ci.client_id == client_id:
                return ci
        return None

    def groups_subscribing(self, topic: str) -> set[str]:
        """Online groups subscribed to ``topic``."""
        return {g for g, info in self.consumers.items() if topic in info.subscriptions}

    def find_producer_channel(self, group: str) -> Channel | None:
        """A live connection of producer group ``group`` (transaction check-backs)."""
        for info in self.producers.get(group, {}).values():
            if info.channel.is_active:
                return info.channel
        return None
