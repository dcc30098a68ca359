"""A topic the broker creates has its queues' first ConsumeQueue files made ahead, off the
reput thread (issue 18: ``BrokerController._topic_created`` -> ``prepare_consume_queues``)."""

from __future__ import annotations

import time

from ariane.bench import _micro_cases as mc
from ariane.bench._micro_broker import InProcessBroker


def test_an_auto_created_topic_has_its_queue_files_made_ahead() -> None:
    broker = InProcessBroker()
    try:
        store = broker.controller.store
        assert broker.controller.topics.get(mc.TOPIC) is None
        broker.request(mc.send_request())  # auto-creates the topic (queue 1 gets the message)
        tc = broker.controller.topics.get(mc.TOPIC)
        assert tc is not None
        assert tc.write_queue_nums > 1
        queues = [store.find_consume_queue(mc.TOPIC, q).queue for q in range(tc.write_queue_nums)]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(q.next_ready or q.files for q in queues):
            time.sleep(0.01)
        assert all(q.next_ready or q.files for q in queues)
        assert [bool(q.files) for q in queues].count(True) <= 1  # only queue 1 was written
    finally:
        broker.close()
