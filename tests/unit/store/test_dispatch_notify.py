"""The reput thread's arriving listener: one call per (topic, queue id, tagsCode) group of a
dispatched batch, in order of first appearance, with the group's last request, its properties
only for a group of one, and nothing for records outside the queues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ariane.common.sysflag import TRANSACTION_PREPARED_TYPE
from ariane.store.format import DispatchRequest
from tests.unit.store.helpers import open_store


def _req(topic: str, qid: int, offset: int, tags: int, sys_flag: int = 0) -> DispatchRequest:
    return DispatchRequest(
        topic, qid, offset * 100, 100, tags, 1000 + offset, offset, None, None, sys_flag,
        {"n": str(offset)},
    )  # fmt: skip


def test_one_call_per_group_with_its_last_request(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        calls: list[tuple[Any, ...]] = []
        store.reput.listener = lambda *args: calls.append(args)
        batch = [
            _req("A", 0, 0, 7),
            _req("B", 1, 1, 0),
            _req("A", 0, 2, 7),
            _req("C", 0, 3, 0, TRANSACTION_PREPARED_TYPE),  # outside the queues
            _req("A", 0, 4, 9),
            _req("A", 0, 5, 7),
        ]
        store.reput._notify(batch)
        assert calls == [
            ("A", 0, 6, 7, 1005, None),  # three requests: the last one, no properties
            ("B", 1, 2, 0, 1001, {"n": "1"}),  # one: its properties
            ("A", 0, 5, 9, 1004, {"n": "4"}),
        ]


def test_a_failing_listener_does_not_stop_the_others(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        seen: list[str] = []

        def listener(topic: str, *_: Any) -> None:
            seen.append(topic)
            if topic == "A":
                raise RuntimeError("boom")

        store.reput.listener = listener
        store.reput._notify([_req("A", 0, 0, 0), _req("B", 0, 1, 0)])
        assert seen == ["A", "B"]
