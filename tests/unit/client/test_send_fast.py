"""``send_async``'s common send in few Python frames (issue 18): the round robin, the clock,
the future, the born timestamp and the frame path inline in ``send_async`` / ``attempt``,
with the choices of the calls they replace (``SendTarget.for_message``,
``_send_prepared_async``, ``MQFaultStrategy.select_one_message_queue``,
``TopicPublishInfo.next_index``, ``loop.create_future``, ``born_timestamp``)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from ariane.client._producer import Producer
from ariane.client._route import TopicPublishInfo
from ariane.client.config import ClientConfig
from ariane.client.errors import ClientStateError
from ariane.client.message import Message, MessageQueue
from ariane.common.clock import ManualClock
from ariane.common.message import Message as BaseMessage
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.codec import decode_frame
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.transport import RecordingTransport
from tests.unit.client.fakes import FakeApi, bind_loop, install, run

A, B = "127.0.0.1:1001", "127.0.0.1:1002"
QUEUES = [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)]
INT_MAX = 2**31 - 1


class _NoHandler:
    def handle_request(self, channel: Channel, request: RemotingCommand) -> None:
        raise AssertionError("no request expected")


def _setup(counter: int = 0, **kwargs: Any) -> tuple[Producer, FakeApi]:
    clock = ManualClock()
    producer = Producer(
        "G", client_config=ClientConfig(namesrv_addr="127.0.0.1:9876", clock=clock), **kwargs
    )
    api = install(producer, clock, {"a": A, "b": B})
    producer._publish["T"] = TopicPublishInfo("T", list(QUEUES), have_route=True, counter=counter)
    return producer, api


def _sent(
    channels: dict[str, tuple[Channel, RecordingTransport]],
) -> list[tuple[str, RemotingCommand]]:
    """(address, request) of every frame written, in order of the addresses' first writes."""
    out = []
    for addr, (channel, transport) in channels.items():
        channel._flush()
        blob = b"".join(transport.take())
        i = 0
        while i < len(blob):
            length = int.from_bytes(blob[i : i + 4], "big")
            out.append((addr, decode_frame(blob[i + 4 : i + 4 + length])))
            i += 4 + length
    return out


def _channels(api: FakeApi) -> dict[str, tuple[Channel, RecordingTransport]]:
    pairs = {}
    for addr in (A, B):
        channel = Channel(_NoHandler())
        transport = RecordingTransport()
        channel.connection_made(transport)  # type: ignore[arg-type]
        pairs[addr] = (channel, transport)
    api.channels = {addr: pair[0] for addr, pair in pairs.items()}
    return pairs


@pytest.mark.parametrize("counter", [0, 5, INT_MAX - 4])
def test_the_round_robin_is_next_index_s_across_the_int_wrap(counter: int) -> None:
    producer, api = _setup(counter)
    reference = TopicPublishInfo("T", list(QUEUES), have_route=True, counter=counter)
    expected = [reference.select_one_message_queue() for _ in range(9)]

    async def go() -> list[tuple[str, RemotingCommand]]:
        bind_loop(producer)
        channels = _channels(api)
        for _ in range(9):
            producer.send_async(Message("T", b"x"))
        return _sent(channels)

    sent = run(go)
    got = sorted(sent, key=lambda pair: pair[1].opaque)  # opaques rise with each send
    assert [(addr, int(cmd.ext_fields["e"])) for addr, cmd in got] == [
        ({"a": A, "b": B}[mq.broker_name], mq.queue_id) for mq in expected
    ]
    assert producer._publish["T"].counter == reference.counter


def test_an_enabled_fault_strategy_still_chooses_the_queue() -> None:
    producer, api = _setup(send_latency_fault_enable=True)
    chosen: list[MessageQueue] = []
    select = producer.fault.select_one_message_queue

    def spy(info: TopicPublishInfo, last: str | None) -> MessageQueue:
        mq = select(info, last)
        chosen.append(mq)
        return mq

    producer.fault.select_one_message_queue = spy  # type: ignore[method-assign]

    async def go() -> list[tuple[str, RemotingCommand]]:
        bind_loop(producer)
        channels = _channels(api)
        producer.send_async(Message("T", b"x"))
        return _sent(channels)

    sent = run(go)
    assert len(chosen) == 1
    assert len(sent) == 1
    assert int(sent[0][1].ext_fields["e"]) == chosen[0].queue_id


def test_the_born_timestamp_is_the_wall_clock_s_millisecond() -> None:
    producer, api = _setup()

    async def go() -> tuple[int, list[tuple[str, RemotingCommand]], int]:
        bind_loop(producer)
        channels = _channels(api)
        before = time.time_ns() // 1_000_000
        for _ in range(3):
            producer.send_async(Message("T", b"x"))
        after = time.time_ns() // 1_000_000
        return before, _sent(channels), after

    before, sent, after = run(go)
    assert len(sent) == 3
    for _, cmd in sent:
        assert cmd.ext_fields["g"] == str(int(cmd.ext_fields["g"]))
        assert before <= int(cmd.ext_fields["g"]) <= after


def test_the_future_comes_from_the_loop_s_create_future_when_it_has_its_own() -> None:
    made: list[asyncio.Future[Any]] = []

    class Loop(asyncio.SelectorEventLoop):
        def create_future(self) -> asyncio.Future[Any]:
            future = super().create_future()
            made.append(future)
            return future

    producer, api = _setup()

    async def go() -> asyncio.Future[Any]:
        bind_loop(producer)
        _channels(api)
        return producer.send_async(Message("T", b"x"))

    loop = Loop()
    try:
        future = loop.run_until_complete(go())
    finally:
        loop.close()
    assert made[-1] is future  # (the channels made theirs before)


def test_a_closed_or_unstarted_producer_or_another_thread_is_refused_at_once() -> None:
    producer, api = _setup()

    async def go() -> list[str]:
        bind_loop(producer)
        _channels(api)
        errors = []
        producer._loop_thread = -1  # not the loop's thread
        with pytest.raises(ClientStateError, match="event loop"):
            producer.send_async(Message("T", b"x"))
        bind_loop(producer)
        producer._closed = True
        with pytest.raises(ClientStateError, match="not started") as info:
            producer.send_async(Message("T", b"x"))
        errors.append(str(info.value))
        producer._closed, producer._instance = False, None
        with pytest.raises(ClientStateError, match="not started"):
            producer.send_async(Message("T", b"x"))
        return errors

    assert run(go) == ["producer 'G' is not started"]


def test_the_system_clock_s_now_ms_is_monotonic_ms() -> None:
    producer = Producer("G", namesrv_addr="127.0.0.1:9876")
    before = int(time.monotonic() * 1000)
    now = producer.now_ms()
    assert before <= now <= int(time.monotonic() * 1000)
    clock = ManualClock()
    manual = Producer("G", client_config=ClientConfig(namesrv_addr="x:1", clock=clock))
    clock.advance(1234)
    assert manual.now_ms() == int(clock.monotonic() * 1000)


def test_a_message_sets_the_base_fields_as_the_dataclass_does() -> None:
    body = bytearray(b"abc")
    msg = Message("T", body, flag=7, properties={"P": "1"}, tags="TagA")
    assert type(msg.body) is bytes
    assert msg.body == b"abc"
    assert (msg.topic, msg.flag) == ("T", 7)
    assert msg.properties == {"P": "1", "TAGS": "TagA"}
    plain = Message("T")
    assert BaseMessage("T", b"") == BaseMessage(
        plain.topic, plain.body, plain.flag, plain.properties
    )
    assert plain.properties == {}
    assert plain.properties is not Message("T").properties


def _python_calls(fn: Callable[[], object]) -> list[str]:
    names: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            names.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


def test_a_common_send_runs_few_python_frames() -> None:
    """The common send's Python frames from ``send_async`` to the queued frame: a guard
    against a helper call per send creeping back (15 on these fakes, not counting the id's
    stem formatted once a millisecond; the path before this change ran 28)."""
    producer, api = _setup()

    async def go() -> list[str]:
        bind_loop(producer)
        _channels(api)
        msg = Message("T", b"x" * 1024)
        producer.send_async(Message("T", b"x"))  # the flush handle and sweep are armed
        return _python_calls(lambda: producer.send_async(msg))

    twins = ("encode_properties_py", "send_head_py")  # the pure build's (compiled: no frame)
    names = [
        n
        for n in run(go)
        if n != "UniqueIdGenerator._stem" and "<lambda>" not in n and not n.startswith(twins)
    ]
    assert len(names) <= 15, names
