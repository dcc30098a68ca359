"""The simple consumer (RocketMQ 5 ``SimpleConsumer``) over the remoting POP protocol.

How it works: the application asks for messages (``receive``) and settles each one itself:
``ack`` when it is done, ``change_invisible_duration`` to keep it longer or to have it back
sooner. ``receive`` sends one POP_MESSAGE to one broker that serves a subscribed topic (topics
and brokers are taken in turn), for every queue of the topic (queue id -1), waiting up to
``await_duration_ms`` on the broker for messages to arrive (long polling). The broker leases
what it hands out for the invisible duration: a message not acked by then is delivered again
(with ``reconsume_times`` + 1), after ``retryMaxTimes`` + 1 deliveries it goes to the group's
DLQ. Each message carries its receipt handle in the ``POP_CK`` property; ``ack`` and
``change_invisible_duration`` send it to the broker it came from. With ``fifo=True`` the pops
are orderly: the broker hands out a queue's next messages only once the previous ones are
acked (or their lease ended), and ``reconsume_times`` counts the deliveries of each message.

There are no offsets to commit, no rebalancing and no queues to own: several simple consumers
of one group share the topic's messages, and POP and push consumers of different groups consume
the same topic side by side.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Collection, Mapping
from typing import Any

from ariane.client._consumer_base import ConsumerBase
from ariane.client._pop_api import PopStatus, receipt_handle_of
from ariane.client.config import DEFAULT_INSTANCE_NAME, ClientConfig
from ariane.client.consumer_types import ConsumeFromWhere, MessageModel, MessageSelector
from ariane.client.errors import BrokerNotFoundError, ClientStateError
from ariane.client.message import MessageExt, MessageQueue
from ariane.common.pop import ConsumeInitMode, ReceiptHandle
from ariane.common.properties import POP_CK
from ariane.common.sysflag import PERM_READ
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.client_bodies import ConsumeType
from ariane.remoting.protocol.headers import pop as hp

__all__ = ["SimpleConsumer"]

logger = logging.getLogger(__name__)

#: Most messages one receive may ask for (the broker's limit).
MAX_RECEIVE = 32
#: Extra time the request may take beyond the long-polling wait (network, broker work).
_REQUEST_MARGIN_MS = 3000


class SimpleConsumer(ConsumerBase):
    """Receives messages and acks them one by one (asyncio; RocketMQ 5 ``SimpleConsumer``).

    ::

        async with SimpleConsumer("group", {"Orders": "TagA"}, namesrv_addr="127.0.0.1:9876") as c:
            for msg in await c.receive(16, invisible_duration_ms=30_000):
                handle(msg)
                await c.ack(msg)

    Args:
        group: the consumer group.
        subscriptions: topic -> tag expression or ``MessageSelector`` (``subscribe`` adds more).
        namesrv_addr: NameServer addresses.
        await_duration_ms: how long a ``receive`` waits on the broker for messages (long
            polling; 0 answers at once).
        invisible_duration_ms: the default lease of received messages.
        fifo: orderly pops (a queue's next messages only after the previous ones are acked).
        consume_from_max: a group new to a queue starts at its newest message (RocketMQ 5's
            behaviour); False starts at the oldest.
        request_timeout_ms: timeout of acks and changes.
        instance_name: client instance name.
        client_ip: the address put in the client id.
        client_config: full client settings (instead of the three above).

    Raises:
        InvalidArgumentError: a bad group name or setting.
    """

    consume_type = ConsumeType.CONSUME_POP

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str | MessageSelector] | None = None,
        *,
        namesrv_addr: str | None = None,
        await_duration_ms: int = 20_000,
        invisible_duration_ms: int = 30_000,
        fifo: bool = False,
        consume_from_max: bool = True,
        request_timeout_ms: int = 3000,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        client_ip: str | None = None,
        client_config: ClientConfig | None = None,
    ) -> None:
        super().__init__(
            group,
            namesrv_addr=namesrv_addr,
            instance_name=instance_name,
            client_ip=client_ip,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            consume_timestamp=None,
            allocate_strategy=None,
            offset_store_dir=None,
            client_config=client_config,
        )
        if await_duration_ms < 0:
            raise InvalidArgumentError("await_duration_ms must be >= 0")
        self._check_positive(
            invisible_duration_ms=invisible_duration_ms, request_timeout_ms=request_timeout_ms
        )
        self.await_duration_ms = await_duration_ms
        self.invisible_duration_ms = invisible_duration_ms
        self.fifo = fifo
        self.orderly = fifo
        self.init_mode = ConsumeInitMode.MAX if consume_from_max else ConsumeInitMode.MIN
        self.request_timeout_ms = request_timeout_ms
        self._turn = itertools.count()
        for topic, expression in (subscriptions or {}).items():
            self._subscribe(topic, expression)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the cluster (routes and heartbeats).

        Raises:
            ClientStateError: closed already.
            ArianeError: the NameServer cannot be reached.
        """
        if self.started:
            return
        await self._join()

    async def close(self) -> None:
        """Leave the cluster; un-acked messages come back after their lease."""
        if self._closed:
            return
        await self._leave()

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Receive from ``topic`` too (tag expression or selector)."""
        self._subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving from ``topic``."""
        self._unsubscribe(topic)

    # -- receiving -------------------------------------------------------------------------------

    def _targets(self) -> list[tuple[str, str]]:
        """(topic, broker name) pairs that may serve a receive."""
        instance = self.instance
        out = []
        for topic in self._subscriptions:
            route = instance.topic_route_table.get(topic)
            if route is None:
                continue
            for qd in route.queue_datas:
                if qd.perm & PERM_READ and qd.read_queue_nums > 0:
                    out.append((topic, qd.broker_name))
        return sorted(out)

    async def receive(
        self, max_message_num: int = 16, invisible_duration_ms: int | None = None
    ) -> list[MessageExt]:
        """Lease up to ``max_message_num`` messages (1..32) from one broker.

        Waits up to ``await_duration_ms`` when there is nothing; an empty list then.
        ``reconsume_times`` of a message is the number of earlier deliveries.

        Raises:
            ClientStateError: not started or nothing subscribed.
            InvalidArgumentError: a bad count or duration.
            BrokerResponseError: the broker refused (no such topic, no permission...).
        """
        if not 0 < max_message_num <= MAX_RECEIVE:
            raise InvalidArgumentError(f"max_message_num must be 1..{MAX_RECEIVE}")
        invisible = (
            self.invisible_duration_ms if invisible_duration_ms is None else invisible_duration_ms
        )
        if invisible <= 0:
            raise InvalidArgumentError("invisible_duration_ms must be > 0")
        instance = self.instance
        if not self._subscriptions:
            raise ClientStateError("subscribe to a topic before receiving")
        targets = self._targets()
        if not targets:
            for topic in list(self._subscriptions):
                await instance.update_topic_route(topic)
            targets = self._targets()
            if not targets:
                raise BrokerNotFoundError(f"no readable broker for {sorted(self._subscriptions)}")
        topic, broker_name = targets[next(self._turn) % len(targets)]
        sd = self._subscriptions[topic]
        addr = self._broker_addr(broker_name, topic)
        header = hp.PopMessageRequestHeader(
            consumer_group=self._group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_message_num,
            invisible_time=invisible,
            poll_time=self.await_duration_ms,
            born_time=_now_ms(),
            init_mode=int(self.init_mode),
            exp_type=sd.expression_type,
            exp=sd.sub_string,
            order=self.fifo,
        )
        result = await instance.api.pop_message(
            addr, broker_name, header, self.await_duration_ms + _REQUEST_MARGIN_MS
        )
        if result.status is not PopStatus.FOUND:
            return []
        return result.messages

    def _broker_addr(self, broker_name: str, topic: str) -> str:
        found = self.instance.find_broker_addr_in_subscribe(broker_name)
        if found is None:
            raise BrokerNotFoundError(f"{broker_name} (serving {topic})")
        return found[0]

    # -- settling --------------------------------------------------------------------------------

    async def ack(self, message: MessageExt) -> None:
        """Done with ``message``: it is not delivered again (unless its lease already ended).

        Raises:
            InvalidArgumentError: the message was not received by a simple consumer.
            BrokerResponseError: the broker refused the ack.
        """
        handle = receipt_handle_of(message)
        header = hp.AckMessageRequestHeader(
            consumer_group=self._group,
            topic=handle.real_topic(message.topic, self._group),
            queue_id=handle.queue_id,
            extra_info=handle.encode(),
            offset=handle.queue_offset,
        )
        addr = self._broker_addr(handle.broker_name, message.topic)
        await self.instance.api.ack_message(addr, header, self.request_timeout_ms)

    async def change_invisible_duration(
        self, message: MessageExt, invisible_duration_ms: int
    ) -> None:
        """Make ``message`` visible again ``invisible_duration_ms`` from now (longer to keep
        working on it, short to have it back soon); its receipt handle is updated in place.

        Raises:
            InvalidArgumentError: not a received message, or a negative duration.
            BrokerResponseError: the broker refused.
        """
        if invisible_duration_ms < 0:
            raise InvalidArgumentError("invisible_duration_ms must be >= 0")
        handle = receipt_handle_of(message)
        header = hp.ChangeInvisibleTimeRequestHeader(
            consumer_group=self._group,
            topic=handle.real_topic(message.topic, self._group),
            queue_id=handle.queue_id,
            extra_info=handle.encode(),
            offset=handle.queue_offset,
            invisible_time=invisible_duration_ms,
        )
        addr = self._broker_addr(handle.broker_name, message.topic)
        answer = await self.instance.api.change_invisible_time(
            addr, header, self.request_timeout_ms
        )
        message.properties[POP_CK] = ReceiptHandle(
            handle.queue_offset, answer.pop_time, answer.invisible_time, answer.revive_qid,
            handle.retry_flag, handle.broker_name, handle.queue_id, handle.queue_offset,
        ).encode()  # fmt: skip

    # -- ConsumerMember --------------------------------------------------------------------------

    def subscribe_topics(self) -> Collection[str]:
        """Subscribed topics."""
        return list(self._subscriptions)

    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None:
        """Routes are read from the instance when receiving."""

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """Whether a subscribed topic has no route yet."""
        return topic in self._subscriptions and (
            self._instance is None or topic not in self._instance.topic_route_table
        )

    async def do_rebalance(self) -> None:
        """Nothing to rebalance: the broker shares the messages."""

    async def persist_consumer_offset(self) -> None:
        """Nothing to commit: the broker keeps POP offsets."""

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """The broker applies resets to POP groups itself (server-side reset)."""

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO."""
        return self._running_info_base(
            {
                "awaitDuration": str(self.await_duration_ms),
                "invisibleDuration": str(self.invisible_duration_ms),
            }
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
