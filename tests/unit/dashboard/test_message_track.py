"""A message's consumption per group (the Message detail page) at many groups: built from the
cached group list and one GET_BROKER_CONSUME_STATS per broker, never a request per group."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.datastructures import FormData

from ariane.client._admin_bulk import BrokerAnswers
from ariane.client.errors import TopicNotExistError
from ariane.common.message import HostPort, MessageExt
from ariane.dashboard.config import DashboardConfig
from ariane.dashboard.data import BrokerRow, ClusterData, ConsumerOffset, GroupRow, Snapshot
from ariane.dashboard.pages_messages import _consumption, dlq_resend
from ariane.dashboard.web import PageError
from ariane.remoting.protocol.admin_bodies import ConsumeStats, OffsetWrapper
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.stats_bodies import ConsumeStatsList

ADDR_A, ADDR_B = "10.0.0.1:10911", "10.0.0.2:10911"


class _BulkOnlyAdmin:
    """Answers GET_BROKER_CONSUME_STATS of every broker (broker-b silent) and counts the
    calls; any other request fails the test."""

    def __init__(self, lists: dict[str, ConsumeStatsList]) -> None:
        self.lists = lists
        self.bulk_calls = 0

    async def all_consume_stats(self, *, timeout_ms: int | None = None) -> Any:
        self.bulk_calls += 1
        return BrokerAnswers(dict(self.lists), {ADDR_B: "no answer within 3000 ms"})

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the page asked the admin for {name}")


def _stats(group: str, topic: str, broker: str, offsets: list[int]) -> dict[str, Any]:
    table = {MessageQueue(topic, broker, q): OffsetWrapper(9, o, o) for q, o in enumerate(offsets)}
    return {group: [ConsumeStats(table)]}


def _group(name: str, topic: str, clients: int) -> GroupRow:
    return GroupRow(
        name, ("broker-a",), clients, "", "", "", 0, 0.0, (topic,), False, True, True, 16, 1,
        0, ("c1",) if clients else (),
    )  # fmt: skip


class _Dash:
    def __init__(self, admin: _BulkOnlyAdmin, groups: list[GroupRow]) -> None:
        self.admin = admin
        self.config = DashboardConfig("127.0.0.1:9876")
        self.data = ClusterData(admin, self.config)  # type: ignore[arg-type]
        self.groups = groups

        async def group_rows() -> Snapshot[GroupRow]:
            return Snapshot(self.groups)

        async def broker_rows() -> Snapshot[BrokerRow]:
            return Snapshot([
                BrokerRow("c", "broker-a", 0, ADDR_A, "MASTER", True),
                BrokerRow("c", "broker-b", 0, ADDR_B, "MASTER", False),
            ])  # fmt: skip

        self.data.groups = group_rows  # type: ignore[method-assign]
        self.data.brokers = broker_rows  # type: ignore[method-assign]


def _message(queue_offset: int, host: str = ADDR_A) -> MessageExt:
    return MessageExt(
        "Orders", b"x", queue_id=1, queue_offset=queue_offset, store_host=HostPort.parse(host)
    )


def test_statuses_of_every_group_from_one_bulk_request_per_broker() -> None:
    groups = [_group(f"g{i:04d}", "Orders", clients=i % 2) for i in range(10_000)]
    groups.append(_group("other", "Payments", clients=1))
    body = ConsumeStatsList(broker_addr=ADDR_A)
    body.consume_stats_list = [
        _stats("g0000", "Orders", "broker-a", [0, 5]),  # queue 1 at 5: consumed offset 4
        _stats("g0001", "Orders", "broker-a", [0, 4]),  # at 4: not yet, online
        _stats("g0003", "Orders", "broker-b", [9, 9]),  # another broker's queue 1
    ]
    admin = _BulkOnlyAdmin({ADDR_A: body})
    dash = _Dash(admin, groups)

    tracks, warnings = asyncio.run(_consumption(dash, _message(4)))  # type: ignore[arg-type]
    assert [t["group"] for t in tracks] == [f"g{i:04d}" for i in range(200)]
    assert [t["status"] for t in tracks[:4]] == [
        "CONSUMED", "NOT_CONSUME_YET", "NOT_ONLINE", "NOT_CONSUME_YET",
    ]  # fmt: skip
    assert [t["clientIds"] for t in tracks[:2]] == [[], ["c1"]]
    assert warnings == [
        "10,000 groups consume Orders: the first 200 by name are listed; "
        "the Consumer page searches the others"
    ]
    asyncio.run(_consumption(dash, _message(4)))  # type: ignore[arg-type]
    assert admin.bulk_calls == 1  # the offsets are cached like the lists


def test_a_silent_broker_makes_its_messages_unknown() -> None:
    admin = _BulkOnlyAdmin({})
    dash = _Dash(admin, [_group("g1", "Orders", clients=1)])
    tracks, warnings = asyncio.run(
        _consumption(dash, _message(0, ADDR_B))  # type: ignore[arg-type]
    )
    assert (tracks, warnings) == (
        [{"group": "g1", "status": "UNKNOWN (no answer within 3000 ms)", "clientIds": ["c1"]}],
        [],
    )


def test_consumer_offsets_flattened_per_queue() -> None:
    body = ConsumeStatsList(broker_addr=ADDR_A)
    body.consume_stats_list = [_stats("g1", "Orders", "broker-a", [3, 7]), {"idle": []}]
    data = ClusterData(_BulkOnlyAdmin({ADDR_A: body}), DashboardConfig("x:1"))  # type: ignore[arg-type]
    snap = asyncio.run(data.consumer_offsets())
    assert snap.rows == [
        ConsumerOffset("g1", "Orders", "broker-a", 0, 3),
        ConsumerOffset("g1", "Orders", "broker-a", 1, 7),
    ]
    assert snap.errors == {ADDR_B: "no answer within 3000 ms"}


class _UnroutedAdmin:
    """Creates topics that the NameServer never routes (a registration still on its way)."""

    def __init__(self) -> None:
        self.created: list[str] = []

    async def topic_route(self, topic: str) -> Any:
        raise TopicNotExistError(remark=f"no route for topic {topic}")

    async def create_topic(self, topic: str, **kwargs: Any) -> list[str]:
        self.created.append(topic)
        return [ADDR_A]


def test_a_dlq_resend_whose_new_retry_topic_is_not_routed_yet_says_so() -> None:
    """A group that never retried gets its retry topic made by the resend; when the name
    servers do not route it within the request deadline the answer says to try again (503),
    not that the topic is unknown."""
    admin = _UnroutedAdmin()
    dash = SimpleNamespace(
        admin=admin, config=DashboardConfig("127.0.0.1:9876", request_timeout_ms=100)
    )
    form = FormData([("group", "G1"), ("msgId", "AC11000100002A9F0000000000000000")])
    with pytest.raises(PageError) as err:
        asyncio.run(dlq_resend(None, form, dash))  # type: ignore[arg-type]
    assert err.value.status == 503
    assert "%RETRY%G1 was just created" in str(err.value)
    assert admin.created == ["%RETRY%G1"]
