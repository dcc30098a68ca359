"""A slave copies its master's metadata (RocketMQ ``SlaveSynchronize``).

How it works: while the broker is a slave, :meth:`SlaveSynchronize.sync_all` runs
``slaveSynchronizeInterval`` apart (10 s; the first round 3 s after the broker became a slave,
or sooner with a shorter interval) and asks the master for:

* GET_ALL_TOPIC_CONFIG: when the master's DataVersion differs, the topic table is replaced;
* GET_ALL_CONSUMER_OFFSET: the master's offsets replace the slave's, per ``topic@group`` key;
* GET_ALL_DELAY_OFFSET: the delay levels' progress replaces the slave's ``delayOffset.json``;
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG: like the topics.

Offsets never go backwards across an outage: while the master is down, consumers commit their
offsets to the slave (UPDATE_CONSUMER_OFFSET). Offsets committed here since the last copy are
remembered; the next copy keeps the larger of the two per queue and sends the slave's larger
ones to the master (UPDATE_CONSUMER_OFFSET), so a master that comes back learns the progress
made without it instead of overwriting it (RocketMQ relies on consumers for that). Each step
is skipped when there is no master address (or it is this broker), and a failed step is
logged and retried next round.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ariane.errors import ArianeError
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import (
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
    SubscriptionGroupWrapper,
)
from ariane.remoting.protocol.bodies import TopicConfigSerializeWrapper
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["SlaveSynchronize", "merge_offsets"]

logger = logging.getLogger(__name__)

_FIRST_DELAY_S = 3.0
_TIMEOUT_MS = 3000

Offsets = dict[str, dict[int, int]]


def merge_offsets(
    local: Offsets, master: Offsets, committed_here: Offsets
) -> tuple[Offsets, Offsets]:
    """The slave's new offset table and the offsets to send back to the master.

    Args:
        local: the slave's table now.
        master: the master's table.
        committed_here: the entries of ``local`` that consumers committed on this slave since
            the last copy (everything else in ``local`` came from the master).

    Returns:
        ``(table, push)``: ``table`` is ``local`` with every key of ``master`` replaced by the
        master's queues, except that queues committed here keep the larger offset; ``push``
        holds the queues where this slave is ahead of the master.
    """
    table = {key: dict(queues) for key, queues in local.items()}
    push: Offsets = {}
    for key, queues in master.items():
        merged = dict(queues)
        for queue_id, offset in committed_here.get(key, {}).items():
            if offset > merged.get(queue_id, -1):
                merged[queue_id] = offset
                push.setdefault(key, {})[queue_id] = offset
        table[key] = merged
    for key, queues in committed_here.items():
        if key not in master:
            push[key] = dict(queues)
    return table, push


def _changed_entries(now: Offsets, before: Offsets) -> Offsets:
    """Queues whose offset in ``now`` differs from ``before``."""
    out: Offsets = {}
    for key, queues in now.items():
        old = before.get(key, {})
        diff = {q: off for q, off in queues.items() if old.get(q) != off}
        if diff:
            out[key] = diff
    return out


class SlaveSynchronize:
    """Copies topics, consumer offsets, delay offsets and groups from the master.

    Args:
        broker: the slave broker.
        client: the client used to reach the master.
    """

    def __init__(self, broker: BrokerContext, client: RemotingClient) -> None:
        self.broker = broker
        self.client = client
        self.master_addr = ""
        self.rounds = 0
        self.failures = 0
        self.last_sync_ms = 0
        self._task: asyncio.Task[None] | None = None
        self._snapshot: Offsets = {}

    @property
    def running(self) -> bool:
        """Whether the periodic copy runs."""
        return self._task is not None

    def start(self) -> None:
        """Copy periodically from now on."""
        if self._task is None:
            self._snapshot = {k: dict(v) for k, v in self.broker.offsets.offset_table.items()}
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="slave-synchronize"
            )

    async def stop(self) -> None:
        """Stop copying."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _loop(self) -> None:
        interval_s = self.broker.config.slave_synchronize_interval_ms / 1000
        await asyncio.sleep(min(_FIRST_DELAY_S, interval_s))
        while True:
            await self.sync_all()
            await asyncio.sleep(self.broker.config.slave_synchronize_interval_ms / 1000)

    async def sync_all(self) -> bool:
        """One round of the four copies; True when every step succeeded."""
        addr = self.master_addr
        if not addr or addr == self.broker.broker_addr:
            return False
        ok = True
        for step in (self.sync_topics, self.sync_offsets, self.sync_delay, self.sync_groups):
            try:
                await step(addr)
            except (ArianeError, OSError) as exc:
                ok = False
                logger.warning("%s from master %s failed: %s", step.__name__, addr, exc)
        self.rounds += 1
        if ok:
            self.last_sync_ms = self.broker.clock.now_ms()
        else:
            self.failures += 1
        return ok

    async def _get(self, addr: str, code: int) -> bytes:
        request = RemotingCommand.request(code, {})
        response = await self.client.invoke(addr, request, _TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise ArianeError(f"request {code} answered {response.code}: {response.remark}")
        return response.body or b""

    async def sync_topics(self, addr: str) -> None:
        """GET_ALL_TOPIC_CONFIG: replace the table when the master's version differs."""
        body = await self._get(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = TopicConfigSerializeWrapper.from_json(fastjson.loads(body))
        topics = self.broker.topics
        if wrapper.data_version != topics.data_version:
            topics.replace_all(wrapper.topic_config_table, wrapper.data_version)
            logger.info("copied %d topics from master %s", len(topics.table), addr)

    async def sync_offsets(self, addr: str) -> None:
        """GET_ALL_CONSUMER_OFFSET, merged (see the module docstring)."""
        body = await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        master = ConsumerOffsetSerializeWrapper.decode(body).offset_table
        offsets = self.broker.offsets
        committed_here = _changed_entries(offsets.offset_table, self._snapshot)
        table, push = merge_offsets(offsets.offset_table, master, committed_here)
        for key, queues in push.items():
            topic, _, group = key.partition("@")
            for queue_id, offset in queues.items():
                header = h.UpdateConsumerOffsetRequestHeader(
                    consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
                )
                request = RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()
                )
                response = await self.client.invoke(addr, request, _TIMEOUT_MS)
                if response.code != ResponseCode.SUCCESS:
                    raise ArianeError(f"master refused offset {key}:{queue_id}={offset}")
        if push:
            logger.info("sent offsets committed on this slave to master %s: %s", addr, push)
        if table != offsets.offset_table:
            offsets.offset_table = table
            offsets.dirty = True
            offsets.persist_if_dirty()
        self._snapshot = {k: dict(v) for k, v in table.items()}

    async def sync_delay(self, addr: str) -> None:
        """GET_ALL_DELAY_OFFSET: the delay levels' progress."""
        body = await self._get(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        wrapper = DelayOffsetSerializeWrapper.decode(body)
        self.broker.schedule.replace_offsets(wrapper)

    async def sync_groups(self, addr: str) -> None:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: replace the table when the version differs."""
        body = await self._get(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = SubscriptionGroupWrapper.decode(body)
        groups = self.broker.groups
        if wrapper.data_version != groups.data_version:
            groups.replace_all(wrapper)
            logger.info("copied %d subscription groups from master %s", len(groups.table), addr)
