"""The broker: wiring and lifecycle (RocketMQ ``BrokerController``).

How it works: ``start()`` loads the metadata files (topics, subscription groups, consumer
offsets) from ``<storePathRootDir>/config``, loads the message store (recovery happens here),
then what depends on its content (the delay progress ``delayOffset.json``, the transaction
outcomes from the op queue), starts the store, the remoting server and its processors, the
pull hold service, the delay delivery thread, the transaction check and the housekeeping tasks
(offset persistence every ``flushConsumerOffsetInterval``, expired client scan every 10 s,
the statistics tick every second), the ``/metrics`` endpoint when configured
(``metricsPromExporterPort``), then registers with every NameServer before returning, so clients can route
to it as soon as it says it is ready. The store's dispatch thread reports new messages to the
hold service (and schedule entries to the delay thread); SYNC_FLUSH completions hop back to
the event loop.

``shutdown()`` reverses it: unregister from the NameServers (clients stop routing here), stop
holding pulls, stop the server (in-progress requests finish), stop the transaction check and
the delay thread (which writes its progress), persist the metadata files and shut the store
down (final flush, checkpoint, abort file removed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ariane.acl.credentials import SessionCredentials, request_signer
from ariane.broker.acl import BrokerAcl
from ariane.broker.client_manager import ClientManager
from ariane.broker.config import BrokerConfig, load_properties
from ariane.broker.consumer_offset import ConsumerOffsetManager
from ariane.broker.dledger import DLedgerReplication, new_dledger_store
from ariane.broker.long_polling import PullRequestHoldService
from ariane.broker.message_type import MessageTypeInterceptor
from ariane.broker.metrics_hook import BrokerRpcMetrics
from ariane.broker.pop import PopConsumption
from ariane.broker.processors.acl import AclAdminProcessor
from ariane.broker.processors.admin import AdminBrokerProcessor
from ariane.broker.processors.admin_consumer import AdminConsumerProcessor
from ariane.broker.processors.client_manage import ClientManageProcessor
from ariane.broker.processors.consumer_manage import ConsumerManageProcessor
from ariane.broker.processors.dledger import DLedgerProcessor
from ariane.broker.processors.end_transaction import EndTransactionProcessor
from ariane.broker.processors.ha import HAStatusProcessor
from ariane.broker.processors.pop import PopMessageProcessor
from ariane.broker.processors.pull import PullMessageProcessor
from ariane.broker.processors.query import QueryMessageProcessor
from ariane.broker.processors.send import SendMessageProcessor
from ariane.broker.processors.send_back import SendBackProcessor
from ariane.broker.processors.stats import StatsProcessor
from ariane.broker.processors.timer import TimerProcessor
from ariane.broker.rebalance_lock import RebalanceLockManager
from ariane.broker.registration import BrokerRegistration
from ariane.broker.replication import BrokerReplication
from ariane.broker.runtime_config import check_wire_update
from ariane.broker.runtime_info import runtime_info
from ariane.broker.schedule import DELAY_OFFSET_FILE, ScheduleMessageService
from ariane.broker.stats import BrokerStats, StoreCounters
from ariane.broker.subscription_group import SubscriptionGroupManager
from ariane.broker.timer import TimerFeature
from ariane.broker.topic_config import TopicConfigManager
from ariane.broker.transaction import TransactionalMessageService
from ariane.broker.transaction_check import TransactionalMessageCheckService
from ariane.common.clock import Clock, SystemClock
from ariane.common.fileio import write_file_atomically
from ariane.common.javaprops import format_properties, parse_properties
from ariane.common.message import HostPort
from ariane.common.netaddr import is_loopback
from ariane.common.roles import BrokerRole
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import SCHEDULE_TOPIC, TIMER_TOPIC
from ariane.dledger import DLedgerMessageStore
from ariane.errors import ConfigError, ConnectionClosedError, LocalProtocolError, StoreError
from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient
from ariane.remoting.config import RemotingServerConfig
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer
from ariane.store import MessageStore, StoreConfig

if TYPE_CHECKING:
    from ariane.observability.exporter import MetricsServer

__all__ = ["OVERRIDES_FILE", "BrokerController", "config_dir"]

logger = logging.getLogger(__name__)

#: Runtime config changes (UPDATE_BROKER_CONFIG), under ``<storePathRootDir>/config``.
OVERRIDES_FILE = "broker.properties"
#: BrokerConfig fields UPDATE_BROKER_CONFIG saves but that apply only after a restart.
RESTART_ONLY_FIELDS = (
    "broker_cluster_name",
    "broker_name",
    "broker_id",
    "namesrv_addr",
    "listen_port",
    "bind_address",
    "broker_ip1",
    "server_socket_backlog",
    "server_channel_max_idle_time_seconds",
    "broker_role",
    "ha_listen_port",
    "ha_master_address",
)
_CLIENT_SCAN_S = 10.0
_STATS_TICK_S = 1.0
_RPC_PRUNE_S = 10.0


def config_dir(store: StoreConfig) -> str:
    """``<storePathRootDir>/config``: where the metadata files live."""
    return os.path.join(store.store_path_root_dir, "config")


def _signer(config: BrokerConfig) -> Callable[[RemotingCommand], None] | None:
    """Signs the broker's requests to NameServers when it has an account (``accessKey``)."""
    if not config.access_key:
        return None
    return request_signer(SessionCredentials(config.access_key, config.secret_key))


def _resolve(host: str) -> str:
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        return socket.gethostbyname(host)


class BrokerController:
    """A RocketMQ-compatible broker.

    Args:
        config: the broker configuration.
        store_config: the message store configuration.
        clock: time source (tests pass a ``ManualClock``).
    """

    def __init__(
        self, config: BrokerConfig, store_config: StoreConfig, *, clock: Clock | None = None
    ) -> None:
        if config.enable_dleger_commit_log:  # DLedger (issue 14): a slave until elected
            config = dataclasses.replace(
                config, broker_role="SLAVE", broker_id=config.dledger().broker_id
            )
        self.config = config
        self.store_config = store_config
        self.clock: Clock = clock or SystemClock()
        cdir = config_dir(store_config)
        self.topics = TopicConfigManager(
            config, os.path.join(cdir, "topics.json"), self.clock,
            len(store_config.delay_levels_ms),
        )  # fmt: skip
        self.groups = SubscriptionGroupManager(
            os.path.join(cdir, "subscriptionGroup.json"), self.clock,
            config.auto_create_subscription_group,
        )  # fmt: skip
        self.offsets = ConsumerOffsetManager(os.path.join(cdir, "consumerOffset.json"), self.clock)
        self.overrides_path = os.path.join(cdir, OVERRIDES_FILE)
        self.clients = ClientManager(
            self.clock, self.notify_consumers_changed, config.channel_expired_timeout_ms / 1000
        )
        # issue 20: a group with no consumer online has nothing in flight
        self.clients.on_group_offline = self.offsets.forget_pull_positions
        self.locks = RebalanceLockManager(self.clock, config.rebalance_lock_max_live_time_ms)
        self.stats = BrokerStats(
            self.clock,
            config.broker_cluster_name,
            max_keys=config.max_stats_keys,
            idle_minutes=config.max_stats_idle_time_minutes,
            store_counters=self._store_counters,
        )
        self.stats.live_topics = lambda: self.topics.table
        self.hold = PullRequestHoldService(
            self._pull_again,
            self._max_offset,
            long_polling=config.long_polling_enable,
            short_polling_ms=config.short_polling_time_ms,
        )
        self.store = (
            new_dledger_store(config, store_config, clock, self._arriving)
            if config.enable_dleger_commit_log
            else MessageStore(store_config, clock=clock, arriving_listener=self._arriving)
        )
        self.schedule = ScheduleMessageService(
            self.store, store_config.delay_levels_ms, os.path.join(cdir, DELAY_OFFSET_FILE),
            self.clock, lambda: self.config.flush_delay_offset_interval_ms,
        )  # fmt: skip
        self.transactions = TransactionalMessageService(self)
        self.tx_check = TransactionalMessageCheckService(self, self.transactions)
        self.remoting = RemotingServer(
            RemotingServerConfig(
                bind_address=config.bind_address,
                listen_port=config.listen_port,
                channel_max_idle_seconds=float(config.server_channel_max_idle_time_seconds),
                backlog=config.server_socket_backlog,
                max_connections=config.server_max_connections,
                max_write_buffer_bytes=config.server_max_buffered_bytes_per_connection,
            )
        )
        self._apply_limits(config)
        # timing every request costs about a microsecond: only when metrics are exported
        self.rpc_metrics = BrokerRpcMetrics(self.stats, timing=config.metrics_port is not None)
        self.remoting.register_hook(self.rpc_metrics)
        self.metrics_server: MetricsServer | None = None
        self.acl: BrokerAcl | None = None
        self._acl_warned = False
        self.namesrv_client = RemotingClient(signer=_signer(config))
        self.registration = BrokerRegistration(self, self.namesrv_client)
        self.fatal_reason: str | None = None
        self.on_fatal: Callable[[str], None] | None = None
        self.replication: BrokerReplication | DLedgerReplication = (
            DLedgerReplication(self, self.store, on_fatal=self._fatal)
            if isinstance(self.store, DLedgerMessageStore)
            else BrokerReplication(self)
        )
        self.replication.request_registration = self.registration.trigger
        self.broker_addr = f"{config.advertised_host}:{config.listen_port}"
        self.store_host = HostPort(b"\x7f\x00\x00\x01", config.listen_port)
        self.boot_timestamp_ms = self.clock.now_ms()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self.pull_processor = PullMessageProcessor(self)
        # timer messages and POP consumption (issue 16)
        self.timer = TimerFeature(self.store, store_config, self.clock)
        self.transactions.final_hooks.append(self.timer.hook.rewrite)
        self.pop: PopConsumption = PopConsumption(
            self, self.pull_processor.message_filter, cdir, timer=self.timer.bridge
        )

    def _start_acl(self) -> None:
        """Load the ACL files and put the ACL hook in front of every processor
        (``aclEnable``), or warn when a server reachable from other hosts has no ACL.

        Raises:
            ConfigError: ACL is on without a ``rocketmqHome``.
        """
        config = self.config
        if not config.acl_enable:
            if not is_loopback(config.bind_address) and not self._acl_warned:
                self._acl_warned = True
                logger.warning(
                    "the broker listens on %s with aclEnable=false: anyone who can reach it may "
                    "send, consume, delete topics and reset offsets; set aclEnable=true",
                    config.bind_address,
                )
            return
        if self.acl is None:
            self.acl = BrokerAcl(
                config.rocketmq_home, self.clock, watch_interval_ms=config.acl_watch_interval_ms
            )
            self.acl.load()
            self.remoting.register_hook(self.acl.hook)

    def _pull_again(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self.pull_processor.pull_again(ctx, request)

    def _max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_max_offset_in_queue(topic, queue_id)

    def _store_counters(self) -> StoreCounters:
        store = self.store
        return StoreCounters(
            store.commit_log.put_times_total,
            store.get_times_found,
            store.get_times_miss,
            store.get_transferred_msgs,
        )

    def _arriving(
        self,
        topic: str,
        queue_id: int,
        next_logic_offset: int,
        tags_code: int,
        store_timestamp_ms: int,
        properties: dict[str, str] | None,
    ) -> None:
        """The store's arriving listener (dispatch thread)."""
        if topic == SCHEDULE_TOPIC:
            self.schedule.on_arrival()
            return
        if topic == TIMER_TOPIC:
            self.timer.on_arrival()
            return
        self.hold.arriving(
            topic, queue_id, next_logic_offset, tags_code, store_timestamp_ms, properties
        )
        self.pop.arriving(
            topic, queue_id, next_logic_offset, tags_code, store_timestamp_ms, properties
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> int:
        """Load everything, start serving and register with the NameServers.

        Returns:
            The bound port.

        Raises:
            ConfigError: a metadata file is unreadable.
            StoreError: the store cannot be loaded (in use, recovery failed).
            OSError: the port cannot be bound.
        """
        self._start_acl()
        await self.load()
        try:
            port = await self.remoting.start()
        except BaseException:
            await asyncio.to_thread(self.store.shutdown)
            raise
        self.serve(port)
        self.pop.start_buffer()
        try:
            await self.replication.start()
        except OSError:
            await self.shutdown()
            raise
        if self.role.is_master:
            self._start_master_services()
        self._every(self.config.flush_consumer_offset_interval_ms / 1000, self.pop.persist_if_dirty)
        self._every(
            self.config.flush_consumer_offset_interval_ms / 1000, self.offsets.persist_if_dirty
        )
        self._every(_CLIENT_SCAN_S, self.clients.scan_expired)
        self._every(_STATS_TICK_S, self.stats.tick)
        self._every(_RPC_PRUNE_S, self.rpc_metrics.prune)
        if self.acl is not None:
            self.acl.start()
        try:
            self.start_metrics()
        except OSError:
            await self.shutdown()
            raise
        accepted = await self.registration.register_all(force=True)
        if self.config.namesrv_addresses and not accepted:
            logger.warning("no name server accepted the registration yet; retrying periodically")
        self.registration.start_periodic()
        logger.info("broker %s started on %s", self.config.broker_name, self.broker_addr)
        return port

    async def load(self) -> None:
        """Load the metadata files, then load (recover) and start the store.

        Raises:
            ConfigError: a metadata file is unreadable.
            StoreError: the store cannot be loaded.
        """
        self.topics.load()
        self.groups.load()
        self.offsets.load()
        self.pop.create_system_topics()
        self.timer.create_topic(self.topics)
        self.pop.load()
        if not await asyncio.to_thread(self.store.load):
            raise StoreError(
                f"message store {self.store_config.store_path_root_dir} failed to load"
            )
        self._restore_missing_topics()
        try:
            self.schedule.load()
            self.transactions.load()
            self.timer.load()
        except BaseException:
            await asyncio.to_thread(self.store.shutdown)
            raise
        self.store.start()
        if self.config.role.is_slave:  # before any request can reach the store
            self.store.set_replica_mode(True)

    def _restore_missing_topics(self) -> None:
        """Give topics that have stored messages but no configuration (the broker died
        between auto-creating a topic and writing topics.json) a read-write configuration."""
        restored = []
        for topic, queue_ids in self.store.topic_queues().items():
            if topic in self.topics.table or not queue_ids:
                continue
            n = max(queue_ids) + 1
            self.topics.table[topic] = TopicConfig(topic, n, n, PERM_READ | PERM_WRITE)
            restored.append(topic)
        if restored:
            logger.warning("restored the configuration of topics with messages: %s", restored)
            self.topics.data_version = self.topics.data_version.next_version(self.clock.now_ms())
            self.topics.file.persist_soon()

    def serve(self, port: int) -> None:
        """Wire the processors and services for a server bound to ``port`` (no network I/O:
        tests call this without starting the server)."""
        host = _resolve(self.config.advertised_host)
        self.broker_addr = f"{host}:{port}"
        self.store_host = HostPort(ipaddress.ip_address(host).packed, port)
        self._start_acl()
        self._register_processors()
        self.remoting.add_channel_close_listener(self._on_channel_closed)
        self.topics.on_change = self._topics_changed
        self.topics.on_created = self._topic_created
        self.hold.start()
        self.pop.polling.start()
        self.pop.notify_polling.start()
        self._started = True

    def _register_processors(self) -> None:
        self.send_processor = SendMessageProcessor(self)
        self.send_processor.rewriters.append(self.timer.hook)
        self.send_processor.interceptors.append(MessageTypeInterceptor(self))
        for processor in (
            self.send_processor,
            SendBackProcessor(self, self.send_processor.rewriters),
            self.pull_processor,
            ClientManageProcessor(self),
            ConsumerManageProcessor(self),
            QueryMessageProcessor(self),
            AdminBrokerProcessor(self),
            AdminConsumerProcessor(self),
            StatsProcessor(self),
            EndTransactionProcessor(self),
            AclAdminProcessor(self),
            PopMessageProcessor(self),
            HAStatusProcessor(self),
            DLedgerProcessor(self),
            TimerProcessor(self),
        ):
            processor.register(self.remoting)

    def _every(self, period_s: float, fn: Callable[[], Any]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(period_s)
                try:
                    fn()
                except Exception:
                    logger.exception("periodic task %s failed", getattr(fn, "__name__", fn))

        self._tasks.append(asyncio.get_running_loop().create_task(loop()))

    async def shutdown(self) -> None:
        """Unregister, stop serving, persist the metadata and shut the store down."""
        if not self._started:
            await asyncio.to_thread(self.store.shutdown)
            return
        self._started = False
        await self.registration.stop()
        await self.registration.unregister_all()
        await self.hold.stop()
        await self.replication.stop()
        await self.remoting.stop()
        await self.stop_metrics()
        if self.acl is not None:
            await self.acl.stop()
        await self._stop_master_services()
        await self.pop.stop()
        await asyncio.to_thread(self.timer.shutdown)
        tasks = list(self._tasks)
        self._tasks.clear()
        await cancel_and_wait(*tasks)
        for file in (self.offsets.file, self.topics.file, self.groups.file):
            try:
                file.write_now()
            except OSError as exc:
                logger.error("cannot write %s at shutdown: %s", file.path, exc)
        await asyncio.to_thread(self.store.shutdown)
        await self.namesrv_client.close()
        logger.info("broker %s stopped", self.config.broker_name)

    # -- roles (issue 13; DLedger reuses change_role) -----------------------------------------

    @property
    def role(self) -> BrokerRole:
        """The broker's current role (``brokerRole`` at start; may change at run time)."""
        return self.replication.role

    def _start_master_services(self) -> None:
        """What only a master runs: delay delivery, the transaction check, POP revive, the
        timer wheel's delivery."""
        self.schedule.start()
        self.tx_check.start()
        self.timer.start()
        self.pop.revive.start()

    async def _stop_master_services(self) -> None:
        await self.pop.revive.stop()
        await asyncio.to_thread(self.timer.shutdown)
        await self.tx_check.stop()
        await asyncio.to_thread(self.schedule.stop)

    async def change_role(self, role: BrokerRole, broker_id: int | None = None) -> None:
        """Become ``role`` while running (RocketMQ ``changeToSlave`` / ``changeToMaster``).

        A new slave stops the master-only services, puts the store in replica mode and
        starts replicating from the master the NameServers name (or ``haMasterAddress``); a
        new master stops replicating, reloads the delay progress and the pending transactions
        the slave copied, and starts the master-only services. Either way the broker then
        registers again under its new id (default: 0 for a master, the configured id or 1
        for a slave).

        Raises:
            ConfigError: ``broker_id`` does not suit ``role``.
        """
        old = self.role
        if broker_id is None:
            broker_id = 0 if role.is_master else (self.config.broker_id or 1)
        new_config = dataclasses.replace(self.config, broker_role=role.value, broker_id=broker_id)
        if old is role and new_config == self.config:
            return
        logger.info("broker role %s[%d] -> %s[%d]", old.value, self.config.broker_id,
                    role.value, broker_id)  # fmt: skip
        if old.is_master and role.is_slave:
            await self._stop_master_services()
        self.config = new_config
        self.topics.config = new_config
        await self.replication.set_role(role)
        if old.is_slave and role.is_master:
            self.schedule.load()
            self.transactions.load()
            self._start_master_services()
        await self.registration.register_all(force=True)

    def _fatal(self, reason: str) -> None:
        """The broker cannot go on (a DLedger node refused by its group...): stop."""
        if self.fatal_reason is None:
            self.fatal_reason = reason
            logger.critical("the broker stops: %s", reason)
            if self.on_fatal is not None:
                self.on_fatal(reason)

    # -- events ------------------------------------------------------------------------------

    def _topics_changed(self) -> None:
        self.topics.file.persist_soon()
        self.registration.trigger()

    def _topic_created(self, tc: TopicConfig) -> None:
        """A new topic's ConsumeQueue files made ahead, off the reput thread (issue 18: the
        first message to each queue does not wait for a file creation and its syncs)."""
        prepare = getattr(self.store, "prepare_consume_queues", None)
        if prepare is not None:
            prepare(tc.topic_name, range(max(tc.read_queue_nums, tc.write_queue_nums)))

    def _on_channel_closed(self, channel: Channel) -> None:
        self.hold.on_channel_closed(channel)
        self.clients.on_channel_closed(channel)
        self.locks.unlock_channel(channel.id)

    def notify_consumers_changed(self, group: str, channels: list[Channel]) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED (one-way) to every consumer of ``group``."""
        ext = h.NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext_fields()
        for channel in channels:
            request = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, dict(ext))
            try:
                self.remoting.invoke_oneway(channel, request)
            except (ConnectionClosedError, LocalProtocolError) as exc:
                logger.debug("cannot notify %r of %s: %s", channel, group, exc)

    # -- configuration -----------------------------------------------------------------------

    def all_properties(self) -> dict[str, str]:
        """Broker and store configuration as RocketMQ properties (GET_BROKER_CONFIG)."""
        from ariane.broker.config import store_to_properties

        props = self.config.to_properties()
        props.update(store_to_properties(self.store_config))
        return props

    async def update_config(self, props: Mapping[str, str]) -> list[str]:
        """Apply UPDATE_BROKER_CONFIG properties and persist them.

        Only the keys of ``runtime_config`` are accepted: ``LIVE_KEYS`` take effect at once,
        ``RESTART_KEYS`` are saved and apply after a restart; anything else (store geometry,
        paths, identity, network, security) raises before anything changes.

        Returns:
            Keys that are not known (ignored).

        Raises:
            ConfigError: a key may not change over the wire or a value is invalid (nothing is
                changed).
            OSError: the overrides file cannot be written.
        """
        plan = check_wire_update(props)  # the closed admin plane: only safe keys, in range
        loaded = load_properties(props, broker=self.config, store=self.store_config)
        old = self.config
        # only what is read on every use changes now; the rest is saved for the next start,
        # so GET_BROKER_CONFIG keeps showing what runs
        live = load_properties({k: props[k] for k in plan.live}, broker=old)
        keep = {name: getattr(old, name) for name in RESTART_ONLY_FIELDS}
        self._apply(dataclasses.replace(live.broker, **keep))
        saved = self._read_overrides()
        saved.update({k: v for k, v in props.items() if k not in loaded.unknown})
        text = format_properties(saved).encode("utf-8")
        await asyncio.to_thread(write_file_atomically, self.overrides_path, text)
        if old.broker_permission != loaded.broker.broker_permission:
            logger.info(
                "broker permission %d -> %d", old.broker_permission, loaded.broker.broker_permission
            )
            self.topics._changed()
        return loaded.unknown

    def _apply_limits(self, config: BrokerConfig) -> None:
        self.groups.auto_create_limit = config.auto_create_subscription_group_limit
        self.clients.max_per_group = config.max_clients_per_group

    def _apply(self, config: BrokerConfig) -> None:
        self._apply_limits(config)
        self.config = config
        self.topics.config = config
        self.groups.auto_create = config.auto_create_subscription_group
        self.clients.expired_s = config.channel_expired_timeout_ms / 1000
        self.hold.long_polling = config.long_polling_enable
        self.hold.short_polling_ms = config.short_polling_time_ms
        self.locks.max_live_ms = config.rebalance_lock_max_live_time_ms

    def _read_overrides(self) -> dict[str, str]:
        try:
            with open(self.overrides_path, encoding="utf-8") as f:
                return parse_properties(f.read())
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(self.overrides_path, f"cannot read: {exc}") from None

    # -- runtime info and metrics ---------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO table (all values strings)."""
        return runtime_info(self)

    def earliest_message_time(self) -> int:
        """Store time of the oldest message in the CommitLog (ms), -1 when empty."""
        store = self.store
        if store.max_phy_offset <= store.min_phy_offset:
            return -1
        return store.commit_log.pickup_store_timestamp(store.min_phy_offset, 100)

    def start_metrics(self) -> None:
        """Serve ``/metrics`` when ``metricsPromExporterPort`` (or ``metricsExporterType=PROM``)
        asks for it.

        Raises:
            MetricsBindError: the metrics port cannot be bound.
        """
        port = self.config.metrics_port
        if port is None or self.metrics_server is not None:
            return
        from ariane.broker.metrics import BrokerMetrics
        from ariane.observability.exporter import LoopCollector, MetricsServer, new_registry

        collector = LoopCollector(asyncio.get_running_loop(), BrokerMetrics(self).build)
        server = MetricsServer(new_registry(collector), self.config.metrics_host, port)
        server.start()
        self.metrics_server = server

    async def stop_metrics(self) -> None:
        """Stop serving ``/metrics`` (waits for the HTTP thread off the loop)."""
        server, self.metrics_server = self.metrics_server, None
        if server is not None:
            await asyncio.to_thread(server.stop)
