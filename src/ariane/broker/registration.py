"""Registration with the NameServers (RocketMQ ``BrokerContext.registerBrokerAll`` and
``BrokerOuterAPI``).

How it works: the broker sends REGISTER_BROKER with its whole topic table and its DataVersion
to every configured NameServer, in parallel; a NameServer that fails is logged and skipped.
It registers at start (before announcing itself ready), every ``registerNameServerPeriod``
(30 s) and shortly after its topics change (changes within 50 ms are coalesced into one
registration). Registrations never overlap, so a NameServer never sees an older table after a
newer one. When the broker's permission is not read-write, every topic is announced with its
permission restricted by the broker's. With ``forceRegister=false`` a NameServer that already
has the current DataVersion (QUERY_DATA_VERSION) is skipped. The ORDER_TOPIC_CONFIG table a
NameServer returns marks ordered topics; a slave learns its master's address and HA address
from the answer (:meth:`BrokerReplication.on_registered`). At shutdown the broker unregisters
everywhere.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TYPE_CHECKING

from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.errors import ArianeError
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import (
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["BrokerRegistration"]

logger = logging.getLogger(__name__)

_DEBOUNCE_S = 0.05
_RW = PERM_READ | PERM_WRITE


class BrokerRegistration:
    """Keeps the NameServers informed about this broker.

    Args:
        broker: the broker being registered.
        client: the client used to reach the NameServers.
    """

    def __init__(self, broker: BrokerContext, client: RemotingClient) -> None:
        self.broker = broker
        self.client = client
        self._lock = asyncio.Lock()
        self._pending: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._periodic: asyncio.Task[None] | None = None
        self.registrations = 0

    # -- what is sent -----------------------------------------------------------------------

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """The topic table as announced (permissions restricted by the broker's)."""
        wrapper = self.broker.topics.wrapper()
        perm = self.broker.config.broker_permission
        if perm & _RW != _RW:
            wrapper.topic_config_table = {
                name: TopicConfig(
                    tc.topic_name,
                    tc.read_queue_nums,
                    tc.write_queue_nums,
                    tc.perm & perm,
                    tc.topic_filter_type,
                    tc.topic_sys_flag,
                    tc.order,
                    dict(tc.attributes),
                )
                for name, tc in wrapper.topic_config_table.items()
            }
        return wrapper

    def _header(self, body: bytes, compressed: bool) -> dict[str, str]:
        broker = self.broker
        config = broker.config
        return h.RegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            ha_server_addr=broker.replication.ha_server_addr(broker.broker_addr),
            broker_id=config.broker_id,
            compressed=compressed,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        ).to_ext_fields()

    # -- registering -----------------------------------------------------------------------

    async def register_all(self, *, force: bool = False) -> int:
        """Register with every NameServer now; returns how many accepted.

        Args:
            force: register even where the DataVersion is unchanged.
        """
        addrs = self.broker.config.namesrv_addresses
        if not addrs:
            return 0
        async with self._lock:
            wrapper = self.wrapper()
            compressed = self.broker.config.compressed_register
            body = RegisterBrokerBody(wrapper).encode(compress=compressed)
            header = self._header(body, compressed)
            force = force or self.broker.config.force_register
            results = await asyncio.gather(
                *(self._register_one(addr, header, body, wrapper, force) for addr in addrs)
            )
        self.registrations += 1
        return sum(results)

    async def _register_one(
        self,
        addr: str,
        header: dict[str, str],
        body: bytes,
        wrapper: TopicConfigSerializeWrapper,
        force: bool,
    ) -> bool:
        timeout = self.broker.config.register_broker_timeout_ms
        try:
            if not force and not await self._changed_on(addr, wrapper, timeout):
                return True
            request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
            response = await self.client.invoke(addr, request, timeout)
        except (ArianeError, OSError) as exc:
            logger.warning("register to name server %s failed: %s", addr, exc)
            return False
        if response.code != ResponseCode.SUCCESS:
            logger.warning(
                "name server %s refused the registration: %s %s", addr, response.code,
                response.remark,
            )  # fmt: skip
            return False
        answer = h.RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
        self.broker.replication.on_registered(answer.master_addr, answer.ha_server_addr)
        if response.body:
            try:
                order = KVTable.decode(response.body).table
            except ArianeError as exc:
                logger.warning("bad ORDER_TOPIC_CONFIG from %s: %s", addr, exc)
            else:
                self.broker.topics.update_order_topics(order)
        logger.debug("registered to name server %s", addr)
        return True

    async def _changed_on(
        self, addr: str, wrapper: TopicConfigSerializeWrapper, timeout_ms: int
    ) -> bool:
        config = self.broker.config
        header = h.QueryDataVersionRequestHeader(
            broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            broker_id=config.broker_id,
        )
        request = RemotingCommand.request(
            RequestCode.QUERY_DATA_VERSION, header.to_ext_fields(), wrapper.data_version.encode()
        )
        response = await self.client.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            return True
        changed = h.QueryDataVersionResponseHeader.from_ext_fields(response.ext_fields).changed
        return bool(changed)

    def trigger(self) -> None:
        """Register soon (topics changed); calls within 50 ms are coalesced."""
        if self._pending is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pending = loop.call_later(_DEBOUNCE_S, self._fire)

    def _fire(self) -> None:
        self._pending = None
        task = asyncio.get_running_loop().create_task(self._register_logged(True))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _register_logged(self, force: bool) -> None:
        try:
            await self.register_all(force=force)
        except Exception:
            logger.exception("registering with the name servers failed")

    # -- lifecycle -------------------------------------------------------------------------

    def start_periodic(self) -> None:
        """Re-register every ``registerNameServerPeriod``."""
        self._periodic = asyncio.get_running_loop().create_task(
            self._periodic_loop(), name="register-broker-periodic"
        )

    async def _periodic_loop(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.register_name_server_period_ms / 1000)
            await self._register_logged(False)

    async def stop(self) -> None:
        """Stop registering (pending registrations finish or are cancelled)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        tasks = list(self._tasks)
        if self._periodic is not None:
            tasks.append(self._periodic)
            self._periodic = None
        await cancel_and_wait(*tasks)

    async def unregister_all(self) -> None:
        """Tell every NameServer this broker is gone (best effort, 3 s each)."""
        config = self.broker.config
        header = h.UnRegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            broker_id=config.broker_id,
        ).to_ext_fields()

        async def one(addr: str) -> None:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
            try:
                await self.client.invoke(addr, request, 3000)
                logger.info("unregistered from name server %s", addr)
            except (ArianeError, OSError) as exc:
                logger.warning("unregister from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in config.namesrv_addresses))
