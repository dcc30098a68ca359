"""Route data as producers and consumers use it (RocketMQ ``TopicPublishInfo`` and
``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``topicRouteData2TopicSubscribeInfo``).

How it works: the NameServer's ``TopicRouteData`` lists, per broker group, how many read and
write queues a topic has. A producer needs the *writable* queues of brokers that have a master,
ordered by broker name: ``publish_info_from_route`` builds them (book §3.6, §17.33). For an
ordered topic (``orderTopicConf`` = ``"broker-a:4;broker-b:4"``) the queues come from that
string instead, in its order. A consumer needs the *readable* queues
(``subscribe_queues_from_route``). ``TopicPublishInfo.select_one_message_queue`` is the plain
round robin with "avoid the broker that just failed" of book §3.7. Pure code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.route import MASTER_ID, QueueData, TopicRouteData

__all__ = [
    "TopicPublishInfo",
    "clamp_default_route",
    "publish_info_from_route",
    "subscribe_queues_from_route",
]

_INT_MAX = 2**31 - 1


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of one topic, and the round-robin counter over them.

    Attributes:
        topic: the topic.
        message_queues: the queues, broker by broker in name order.
        order_topic: whether the route came from ``orderTopicConf``.
        have_route: whether the route came from the NameServer (not just a placeholder).
        route: the route this was built from.
        counter: the ``sendWhichQueue`` index (starts at a random value).
    """

    topic: str
    message_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_route: bool = False
    route: TopicRouteData | None = None
    counter: int = field(default_factory=lambda: random.randrange(_INT_MAX))

    @property
    def ok(self) -> bool:
        """Whether there is at least one queue to send to."""
        return bool(self.message_queues)

    @property
    def awaiting_master(self) -> bool:
        """No queue to send to only because the brokers with writable queues have no master
        at the moment (a DLedger group electing, a master restarting): worth a short wait."""
        route = self.route
        if self.message_queues or route is None or self.order_topic:
            return False
        masters = _master_brokers(route)
        return any(
            qd.perm & PERM_WRITE and qd.broker_name not in masters for qd in route.queue_datas
        )

    def next_index(self) -> int:
        """``sendWhichQueue.getAndIncrement()``: a non-negative index, wrapping like Java's."""
        value = self.counter
        self.counter = 0 if value >= _INT_MAX else value + 1
        return value

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin; with ``last_broker_name`` prefer queues on any other broker.

        Raises:
            IndexError: there are no queues (check ``ok`` first).
        """
        queues = self.message_queues
        size = len(queues)
        if last_broker_name is None:
            return queues[self.next_index() % size]
        index = self.next_index()
        for i in range(size):
            mq = queues[(index + i) % size]
            if mq.broker_name != last_broker_name:
                return mq
        return queues[self.next_index() % size]

    def write_queue_nums_of(self, broker_name: str) -> int:
        """The broker's writable queue count for this topic, or -1 if it has none."""
        if self.route is None:
            return -1
        for qd in self.route.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def _master_brokers(route: TopicRouteData) -> set[str]:
    return {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}


def publish_info_from_route(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """``topicRouteData2TopicPublishInfo``: the writable queues of ``route``.

    Only queue data with PERM_WRITE whose broker has a master (id 0) counts, ``writeQueueNums``
    queues each, sorted by broker name. An ``orderTopicConf`` (``"name:count;..."``) takes
    precedence and marks the topic ordered.
    """
    info = TopicPublishInfo(topic, have_route=True, route=route)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, sep, count = item.partition(":")
            if not sep:
                continue
            try:
                nums = int(count)
            except ValueError:
                continue
            info.message_queues.extend(MessageQueue(topic, name, i) for i in range(nums))
        info.order_topic = True
        return info
    masters = _master_brokers(route)
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.message_queues.extend(
                MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
            )
    return info


def subscribe_queues_from_route(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: ``readQueueNums`` queues of each readable
    queue data (slaves may serve reads, so no master is required)."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for i in range(qd.read_queue_nums)
    }


def clamp_default_route(route: TopicRouteData, default_queue_nums: int) -> TopicRouteData:
    """The auto-create template's route with every queue count clamped to
    ``min(default_queue_nums, readQueueNums)`` (book §3.6, default-topic path)."""
    queue_datas = [
        QueueData(
            qd.broker_name,
            min(default_queue_nums, qd.read_queue_nums),
            min(default_queue_nums, qd.read_queue_nums),
            qd.perm,
            qd.topic_sys_flag,
        )
        for qd in route.queue_datas
    ]
    return TopicRouteData(
        queue_datas=queue_datas,
        broker_datas=[bd.copy() for bd in route.broker_datas],
        filter_server_table=dict(route.filter_server_table),
        order_topic_conf=route.order_topic_conf,
        topic_queue_mapping_by_broker=route.topic_queue_mapping_by_broker,
    )
