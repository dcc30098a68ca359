"""A small push-style consumer for the admin CLI tests, built on ``ClientAPI`` pulls.

It joins a ``ClientInstance`` as a ``ConsumerMember`` (so brokers see it online, relay
GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY to it and send it
RESET_CONSUMER_CLIENT_OFFSET), pulls every queue of one topic on one broker from its own
offsets, records what it received and commits its offsets after each batch. It runs on the
SDK's background event loop so tests can drive the CLI from the main thread meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ariane.client.config import ClientConfig
from ariane.client.message import MessageQueue, PullStatus
from ariane.client.sync import background_loop
from ariane.common.sysflag import PULL_SUBSCRIPTION
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)

__all__ = ["MiniConsumer"]


class MiniConsumer:
    """Consumes ``topic`` (queues ``0..queue_nums-1`` of ``broker_name``) as ``group``."""

    def __init__(
        self,
        namesrv_addr: str,
        group: str,
        topic: str,
        *,
        broker_name: str = "broker-a",
        queue_nums: int = 2,
    ) -> None:
        self._group = group
        self.topic = topic
        self.queues = [MessageQueue(topic, broker_name, q) for q in range(queue_nums)]
        self.broker_name = broker_name
        self.offsets: dict[MessageQueue, int] = {mq: 0 for mq in self.queues}
        self.received: list[tuple[int, int, bytes]] = []  # (queue id, offset, body)
        self.resets: list[dict[MessageQueue, int]] = []
        self.paused = threading.Event()
        self._parked = threading.Event()  # the pull loop saw ``paused``: no pull in flight
        self._lock = threading.Lock()
        self._config = ClientConfig(namesrv_addr=namesrv_addr, instance_name=f"mini-{group}")
        self._instance: Any = None
        self._task: asyncio.Task[None] | None = None

    # -- ConsumerMember --------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._group

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            self._group,
            ConsumeType.CONSUME_PASSIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            [SubscriptionData.build(self.topic, "*")],
        )

    def subscribe_topics(self) -> list[str]:
        return [self.topic]

    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None:
        pass

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return False

    async def do_rebalance(self) -> None:
        pass

    async def persist_consumer_offset(self) -> None:
        pass

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        with self._lock:
            self.resets.append(dict(offsets))
            for mq, offset in offsets.items():
                if mq in self.offsets:
                    self.offsets[mq] = offset

    def running_info(self) -> dict[str, Any]:
        return {
            "properties": {"consumerGroup": self._group, "consumeType": "CONSUME_PASSIVELY"},
            "subscriptionSet": [SubscriptionData.build(self.topic, "*").to_json()],
            "mqTable": {},
            "statusTable": {},
        }

    async def consume_message_directly(self, msg: Any, broker_name: str | None) -> Any:
        with self._lock:
            self.received.append((msg.queue_id, msg.queue_offset, bytes(msg.body)))
        return {
            "order": False,
            "autoCommit": True,
            "consumeResult": "CR_SUCCESS",
            "remark": "consumed by MiniConsumer",
            "spentTimeMills": 0,
        }

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        background_loop().run(self._start())

    def stop(self) -> None:
        background_loop().run(self._stop())

    def pause(self) -> None:
        """Stop pulling; returns once the pull loop has stopped (a pull in flight when this
        is called could otherwise still bring messages sent afterwards)."""
        self._parked.clear()
        self.paused.set()
        if not self._parked.wait(30):
            raise AssertionError("the pull loop did not stop")

    def bodies(self) -> list[bytes]:
        with self._lock:
            return [b for _, _, b in self.received]

    async def _start(self) -> None:
        from ariane.client._instance import ClientInstance

        self._instance = ClientInstance.acquire(self._config)
        self._instance.register_consumer(self)
        await self._instance.start()
        await self._instance.update_topic_route(self.topic)
        await self._instance.send_heartbeat_to_all_brokers()
        self._task = asyncio.get_running_loop().create_task(self._pull_loop())

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self._instance.unregister_consumer(self._group)
        await self._instance.release()

    async def _pull_loop(self) -> None:
        instance = self._instance
        while True:
            addr = instance.find_broker_addr_in_publish(self.broker_name)
            got = 0
            if self.paused.is_set():
                self._parked.set()
            elif addr is not None:
                for mq in self.queues:
                    got += await self._pull_one(instance.api, addr, mq)
            await asyncio.sleep(0 if got else 0.05)

    async def _pull_one(self, api: Any, addr: str, mq: MessageQueue) -> int:
        with self._lock:
            offset = self.offsets[mq]
        header = h.PullMessageRequestHeader(
            consumer_group=self._group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=PULL_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
        )
        try:
            result = await api.pull_message(addr, header, 3000)
        except Exception:
            return 0
        if result.status is not PullStatus.FOUND:
            return 0
        with self._lock:
            if self.offsets[mq] != offset:
                return 0  # reset while the pull was in flight: drop this batch
            for msg in result.messages:
                self.received.append((mq.queue_id, msg.queue_offset, bytes(msg.body)))
            self.offsets[mq] = result.next_begin_offset
            new = result.next_begin_offset
        await api.update_consumer_offset(addr, self._group, mq.topic, mq.queue_id, new)
        return len(result.messages)
