"""Route conversion and round-robin queue selection (book §3.6, §3.7, §17.33)."""

from __future__ import annotations

from ariane.client._route import (
    TopicPublishInfo,
    clamp_default_route,
    publish_info_from_route,
    subscribe_queues_from_route,
)
from ariane.client.message import MessageQueue
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData


def _route(*queue_datas: QueueData, masters: tuple[str, ...] = ("a", "b", "c")) -> TopicRouteData:
    brokers = [BrokerData("C", name, {0: f"127.0.0.1:{100 + i}"}) for i, name in enumerate(masters)]
    brokers.append(BrokerData("C", "slave-only", {1: "127.0.0.1:999"}))
    return TopicRouteData(queue_datas=list(queue_datas), broker_datas=brokers)


def test_publish_info_takes_write_queues_of_writable_masters_in_broker_name_order() -> None:
    route = _route(
        QueueData("b", read_queue_nums=8, write_queue_nums=2, perm=6),
        QueueData("a", read_queue_nums=1, write_queue_nums=3, perm=6),
        QueueData("c", read_queue_nums=4, write_queue_nums=4, perm=4),  # read-only
        QueueData("slave-only", read_queue_nums=4, write_queue_nums=4, perm=6),  # no master
    )
    info = publish_info_from_route("T", route)
    assert info.message_queues == [
        MessageQueue("T", "a", 0),
        MessageQueue("T", "a", 1),
        MessageQueue("T", "a", 2),
        MessageQueue("T", "b", 0),
        MessageQueue("T", "b", 1),
    ]
    assert info.have_route
    assert not info.order_topic
    assert info.write_queue_nums_of("b") == 2
    assert info.write_queue_nums_of("zzz") == -1


def test_order_topic_conf_defines_the_queues_in_its_order() -> None:
    route = _route(QueueData("a", 4, 4, 6))
    route.order_topic_conf = "b:2;a:1;broken;x:notanumber"
    info = publish_info_from_route("T", route)
    assert info.order_topic
    assert info.message_queues == [
        MessageQueue("T", "b", 0),
        MessageQueue("T", "b", 1),
        MessageQueue("T", "a", 0),
    ]


def test_subscribe_queues_are_the_read_queues_of_readable_brokers() -> None:
    route = _route(
        QueueData("a", 2, 5, 6), QueueData("b", 3, 3, 2), QueueData("slave-only", 1, 1, 4)
    )
    assert subscribe_queues_from_route("T", route) == {
        MessageQueue("T", "a", 0),
        MessageQueue("T", "a", 1),
        MessageQueue("T", "slave-only", 0),
    }


def test_default_route_is_clamped_to_the_default_queue_count() -> None:
    route = _route(QueueData("a", 8, 8, 7), QueueData("b", 2, 16, 7))
    clamped = clamp_default_route(route, 4)
    assert [(q.read_queue_nums, q.write_queue_nums) for q in clamped.queue_datas] == [
        (4, 4),
        (2, 2),
    ]
    assert route.queue_datas[0].read_queue_nums == 8  # the original is untouched


def _info(*brokers: tuple[str, int]) -> TopicPublishInfo:
    queues = [MessageQueue("T", name, i) for name, n in brokers for i in range(n)]
    return TopicPublishInfo("T", queues, have_route=True, counter=0)


def test_round_robin_visits_every_queue_in_turn() -> None:
    info = _info(("a", 2), ("b", 2))
    picked = [info.select_one_message_queue() for _ in range(8)]
    assert picked == info.message_queues * 2


def test_retry_avoids_the_broker_that_just_failed() -> None:
    info = _info(("a", 3), ("b", 1))
    for _ in range(20):
        assert info.select_one_message_queue("a").broker_name == "b"


def test_retry_falls_back_to_the_same_broker_when_it_is_the_only_one() -> None:
    info = _info(("a", 2))
    assert info.select_one_message_queue("a").broker_name == "a"


def test_counter_wraps_like_a_java_int_and_never_goes_negative() -> None:
    info = _info(("a", 3))
    info.counter = 2**31 - 1
    assert info.next_index() == 2**31 - 1
    assert info.next_index() == 0
