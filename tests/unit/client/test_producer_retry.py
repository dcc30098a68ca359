"""The send retry loop, time budget and fault bookkeeping, against a scripted fake cluster."""

from __future__ import annotations

import pytest

from ariane.client._producer import Producer
from ariane.client._route import TopicPublishInfo, publish_info_from_route
from ariane.client.config import ClientConfig
from ariane.client.errors import (
    ClientStateError,
    MessageIllegalError,
    SendError,
    TopicNotWritableError,
)
from ariane.client.message import Message, MessageQueue, SendStatus
from ariane.common.clock import ManualClock
from ariane.errors import ConnectError, InvalidArgumentError, RequestTimeoutError
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from tests.unit.client.fakes import FakeApi, bind_loop, install, run

A, B = "127.0.0.1:1001", "127.0.0.1:1002"
BROKERS = {"a": A, "b": B}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _producer_with(clock: ManualClock, **kwargs: object) -> tuple[Producer, FakeApi]:
    config = ClientConfig(namesrv_addr="127.0.0.1:9876", clock=clock)
    producer = Producer("G", client_config=config, **kwargs)  # type: ignore[arg-type]
    return producer, install(producer, clock, BROKERS)


def test_a_transport_failure_moves_the_retry_to_another_broker(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [ConnectError("down")]
    result = run(lambda: producer.send(Message("T", b"x")))
    assert [c.addr for c in api.calls] == [A, B]
    assert result.status is SendStatus.SEND_OK
    assert result.message_queue.broker_name == "b"


def test_all_attempts_failing_raises_send_error_with_the_last_cause(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [RequestTimeoutError("slow")]
    api.script[B] = [ConnectError("down")]
    with pytest.raises(SendError) as info:
        run(lambda: producer.send(Message("T", b"x")))
    assert info.value.attempts == 3
    assert not info.value.timed_out
    assert isinstance(info.value.__cause__, (ConnectError, RequestTimeoutError))
    assert len(api.calls) == 3


def test_retry_times_zero_means_one_attempt(clock: ManualClock) -> None:
    producer, api = _producer_with(clock, retry_times=0)
    api.script[A] = [ConnectError("down")]
    with pytest.raises(SendError):
        run(lambda: producer.send(Message("T", b"x")))
    assert len(api.calls) == 1


def test_a_non_retriable_answer_is_raised_at_once(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [13]  # MESSAGE_ILLEGAL
    with pytest.raises(MessageIllegalError):
        run(lambda: producer.send(Message("T", b"x")))
    assert len(api.calls) == 1


def test_a_retriable_answer_is_retried(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [1]  # SYSTEM_ERROR
    result = run(lambda: producer.send(Message("T", b"x")))
    assert [c.addr for c in api.calls] == [A, B]
    assert result.ok


def test_every_attempt_gets_what_is_left_of_one_budget(clock: ManualClock) -> None:
    producer, api = _producer_with(clock, send_timeout_ms=3000)
    api.latency_ms = 1200
    api.script[A] = [RequestTimeoutError("slow")]
    api.script[B] = [RequestTimeoutError("slow")]
    with pytest.raises(SendError):
        run(lambda: producer.send(Message("T", b"x")))
    assert [c.timeout_ms for c in api.calls] == [3000, 1800, 600]


def test_the_loop_stops_when_the_budget_is_spent(clock: ManualClock) -> None:
    producer, api = _producer_with(clock, send_timeout_ms=3000)
    api.latency_ms = 1600
    api.script[A] = [RequestTimeoutError("slow")]
    api.script[B] = [RequestTimeoutError("slow")]
    with pytest.raises(SendError) as info:
        run(lambda: producer.send(Message("T", b"x")))
    assert info.value.timed_out
    assert info.value.attempts == 2
    assert [c.timeout_ms for c in api.calls] == [3000, 1400]


@pytest.mark.parametrize("retry_not_ok", [False, True])
def test_stored_but_not_ok(clock: ManualClock, retry_not_ok: bool) -> None:
    producer, api = _producer_with(clock, retry_another_broker_when_not_store_ok=retry_not_ok)
    api.script[A] = [10]  # FLUSH_DISK_TIMEOUT
    result = run(lambda: producer.send(Message("T", b"x")))
    if retry_not_ok:
        assert result.ok
        assert len(api.calls) == 2
    else:
        assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
        assert len(api.calls) == 1


def test_a_chosen_queue_or_selector_gets_exactly_one_attempt(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [ConnectError("down")]
    with pytest.raises(ConnectError):
        run(lambda: producer.send(Message("T", b"x"), queue=MessageQueue("T", "a", 1)))
    with pytest.raises(ConnectError):
        run(lambda: producer.send(Message("T", b"x"), selector=lambda mqs, m, arg: mqs[0]))
    assert len(api.calls) == 2
    api.script[A] = [0]
    result = run(lambda: producer.send(Message("T", b"x"), sharding_key="order-42"))
    again = run(lambda: producer.send(Message("T", b"x"), sharding_key="order-42"))
    assert result.message_queue == again.message_queue


def test_with_latency_fault_tolerance_a_failed_broker_is_avoided_by_later_sends(
    clock: ManualClock,
) -> None:
    producer, api = _producer_with(clock, send_latency_fault_enable=True)
    api.script[A] = [ConnectError("down"), 0]
    run(lambda: producer.send(Message("T", b"x")))
    api.calls.clear()
    for _ in range(10):
        run(lambda: producer.send(Message("T", b"x")))
    assert {c.addr for c in api.calls} == {B}
    clock.advance(600_000)  # the isolation ends
    api.calls.clear()
    for _ in range(10):
        run(lambda: producer.send(Message("T", b"x")))
    assert {c.addr for c in api.calls} == {A, B}


def test_without_latency_fault_tolerance_later_sends_go_back_to_the_broker(
    clock: ManualClock,
) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [ConnectError("down"), 0]
    for _ in range(10):
        run(lambda: producer.send(Message("T", b"x")))
    assert A in {c.addr for c in api.calls[2:]}


def test_send_async_retries_transport_failures_only(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [ConnectError("down")]

    async def go() -> object:
        bind_loop(producer)
        return await producer.send_async(Message("T", b"x"))

    result = run(go)
    assert [c.addr for c in api.calls] == [A, B]
    api.calls.clear()
    api.script[A] = [16]  # NO_PERMISSION: an answer, not retried
    api.script[B] = [16]
    with pytest.raises(Exception, match="code=16"):
        run(go)
    assert len(api.calls) == 1
    assert result.ok


def test_send_async_gives_up_after_its_retries(clock: ManualClock) -> None:
    producer, api = _producer_with(clock, retry_times_async=1)
    api.script[A] = [ConnectError("down")]
    api.script[B] = [ConnectError("down")]

    async def go() -> object:
        bind_loop(producer)
        return await producer.send_async(Message("T", b"x"))

    with pytest.raises(ConnectError):
        run(go)
    assert len(api.calls) == 2


def test_oneway_sends_one_request(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    run(lambda: producer.send_oneway(Message("T", b"x")))
    assert len(api.oneway) == 1
    assert not api.calls


def test_queue_selector_and_sharding_key_exclude_each_other(clock: ManualClock) -> None:
    producer, _ = _producer_with(clock)
    with pytest.raises(InvalidArgumentError):
        run(
            lambda: producer.send(
                Message("T", b"x"), queue=MessageQueue("T", "a", 0), sharding_key="k"
            )
        )


def test_send_async_refuses_other_threads(clock: ManualClock) -> None:
    producer, _ = _producer_with(clock)

    async def go() -> None:
        bind_loop(producer)
        producer._loop_thread = -1  # as if called from another thread
        with pytest.raises(ClientStateError):
            producer.send_async(Message("T", b"x"))

    run(go)


# -- finding a new master at once (DLedger failover, issue 14) ------------------------------------


def test_a_slave_refusal_or_a_lost_connection_fetches_the_route_again(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [14]  # SERVICE_NOT_AVAILABLE: "message store is slave mode"
    run(lambda: producer.send(Message("T", b"x")))
    assert producer._instance.failure_refreshes == ["T"]  # type: ignore[union-attr]
    producer, api = _producer_with(clock)
    api.script[A] = [ConnectError("down")]
    run(lambda: producer.send(Message("T", b"x")))
    assert producer._instance.failure_refreshes == ["T"]  # type: ignore[union-attr]


def test_other_refusals_do_not_fetch_the_route(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    api.script[A] = [17]  # TOPIC_NOT_EXIST: retried, the route is not in doubt
    run(lambda: producer.send(Message("T", b"x")))
    assert producer._instance.failure_refreshes == []  # type: ignore[union-attr]


def test_a_route_left_without_a_master_is_waited_for_within_the_budget(clock: ManualClock) -> None:
    from ariane.client._route import TopicPublishInfo

    producer, api = _producer_with(clock, retry_times=2)
    api.script[A] = [ConnectError("down")]
    api.script[B] = [ConnectError("down")]
    calls = 0

    async def refresh(topic: str) -> bool:
        nonlocal calls
        calls += 1
        if calls == 2:  # the second look finds no master, the third a new one
            producer._publish["T"] = TopicPublishInfo("T", [], have_route=True)
        if calls == 3:
            producer._publish["T"] = TopicPublishInfo(
                "T", [MessageQueue("T", "c", 0)], have_route=True
            )
            producer._instance.brokers["c"] = "127.0.0.1:1003"  # type: ignore[union-attr]
        return True

    producer._instance.refresh_route_after_failure = refresh  # type: ignore[union-attr, method-assign]
    result = run(lambda: producer.send(Message("T", b"x")))
    assert result.message_queue.broker_name == "c"


def _masterless(perm: int = 6, masters: dict[int, str] | None = None) -> TopicPublishInfo:
    """Publish info of a topic on broker "a" whose route lists no master for it (a DLedger
    group electing), or a master with the queue data's ``perm``."""
    route = TopicRouteData(
        queue_datas=[QueueData("a", read_queue_nums=2, write_queue_nums=2, perm=perm)],
        broker_datas=[BrokerData("C", "a", masters or {1: "127.0.0.1:1011"})],
    )
    return publish_info_from_route("T", route)


def test_a_send_starting_without_a_master_waits_for_one_within_the_budget(
    clock: ManualClock,
) -> None:
    producer, api = _producer_with(clock)
    waiting = _masterless()
    assert waiting.awaiting_master
    producer._publish["T"] = waiting
    looks: list[str] = []

    async def refresh(topic: str) -> bool:  # the second look finds the new master
        looks.append(topic)
        if len(looks) == 2:
            producer._publish["T"] = TopicPublishInfo(
                "T", [MessageQueue("T", "a", 0)], have_route=True
            )
        return True

    producer._instance.refresh_route_after_failure = refresh  # type: ignore[union-attr, method-assign]
    result = run(lambda: producer.send(Message("T", b"x")))
    assert result.status is SendStatus.SEND_OK
    assert looks == ["T", "T"]
    assert [c.addr for c in api.calls] == [A]


def test_a_topic_not_writable_by_permission_fails_at_once(clock: ManualClock) -> None:
    producer, api = _producer_with(clock)
    read_only = _masterless(perm=4, masters={0: A})
    assert not read_only.awaiting_master
    producer._publish["T"] = read_only
    with pytest.raises(TopicNotWritableError):
        run(lambda: producer.send(Message("T", b"x")))
    assert producer._instance.failure_refreshes == []  # type: ignore[union-attr]
    assert api.calls == []
