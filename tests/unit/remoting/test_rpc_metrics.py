"""RpcMetrics: latency per (request, response) code, long polling, one-way counts, the
in-flight table and its pruning."""

from __future__ import annotations

import asyncio

import pytest

from ariane.common.histogram import Histogram
from ariane.remoting.metrics import (
    RpcMetrics,
    processor_of,
    request_code_name,
    response_code_name,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.unit.broker.harness import FakeChannel


class Clock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def test_latency_buckets_and_code_names() -> None:
    clock = Clock()
    rpc = RpcMetrics(clock)
    ch = FakeChannel()
    for ms, code in ((0.5, ResponseCode.SUCCESS), (4, ResponseCode.SUCCESS), (50, 17)):
        req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2)
        rpc.before_request(ch, req)  # type: ignore[arg-type]
        clock.ns += int(ms * 1_000_000)
        rpc.after_response(ch, req, RemotingCommand.response(code))  # type: ignore[arg-type]
    snap = rpc.snapshot()
    ok = snap.latency[(RequestCode.SEND_MESSAGE_V2, ResponseCode.SUCCESS, False)]
    assert ok.count == 2
    assert ok.sum == 4.5
    assert ok.cumulative()[:3] == [(1.0, 1), (3.0, 1), (5.0, 2)]
    assert (RequestCode.SEND_MESSAGE_V2, ResponseCode.TOPIC_NOT_EXIST, False) in snap.latency
    assert request_code_name(RequestCode.SEND_MESSAGE_V2) == "send_message_v2"
    assert response_code_name(ResponseCode.SUCCESS) == "success"
    assert request_code_name(-1) == "-1"
    assert processor_of(RequestCode.PULL_MESSAGE) == "pull"
    assert processor_of(RequestCode.GET_BROKER_RUNTIME_INFO) == "admin"


def test_unknown_codes_share_one_series_and_oneway_is_counted() -> None:
    rpc = RpcMetrics(Clock())
    ch = FakeChannel()
    for code in (9999, 12345):
        req = RemotingCommand.request(code)
        rpc.before_request(ch, req)  # type: ignore[arg-type]
        rpc.after_response(ch, req, RemotingCommand.response(4242))  # type: ignore[arg-type]
    oneway = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET).mark_oneway()
    rpc.before_request(ch, oneway)  # type: ignore[arg-type]
    snap = rpc.snapshot()
    assert list(snap.latency) == [(-1, -1, False)]
    assert snap.latency[(-1, -1, False)].count == 2
    assert snap.oneway == {RequestCode.UPDATE_CONSUMER_OFFSET: 1}
    assert snap.in_flight == {}


def test_held_pulls_are_long_polling_and_dead_channels_are_pruned() -> None:
    async def go() -> None:
        rpc = RpcMetrics(Clock())
        ch, gone = FakeChannel(), FakeChannel()
        quick = RemotingCommand.request(RequestCode.PULL_MESSAGE)
        rpc.before_request(ch, quick)  # type: ignore[arg-type]
        rpc.after_response(ch, quick, RemotingCommand.response(0))  # type: ignore[arg-type]
        held = RemotingCommand.request(RequestCode.PULL_MESSAGE)
        rpc.before_request(ch, held)  # type: ignore[arg-type]
        lost = RemotingCommand.request(RequestCode.PULL_MESSAGE)
        rpc.before_request(gone, lost)  # type: ignore[arg-type]
        admin = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
        rpc.before_request(ch, admin)  # type: ignore[arg-type]
        await asyncio.sleep(0)  # the loop turns: the pulls are held now
        snap = rpc.snapshot()
        assert snap.held_pulls == 2
        assert snap.in_flight == {"admin": 1}
        gone.close()
        assert rpc.prune() == 1
        rpc.after_response(ch, held, RemotingCommand.response(19))  # type: ignore[arg-type]
        snap = rpc.snapshot()
        assert snap.held_pulls == 0
        assert (RequestCode.PULL_MESSAGE, 19, True) in snap.latency
        assert (RequestCode.PULL_MESSAGE, 0, False) in snap.latency

    asyncio.run(go())


def test_histogram_rejects_bad_bounds_and_merges() -> None:
    with pytest.raises(ValueError, match="increasing"):
        Histogram([1, 1])
    with pytest.raises(ValueError, match="increasing"):
        Histogram([])
    a, b = Histogram([1, 2]), Histogram([1, 2])
    a.observe(1)
    b.observe(3)
    a.merge(b)
    assert a.cumulative() == [(1.0, 1), (2.0, 1), (float("inf"), 2)]
    assert a.sum == 4
    with pytest.raises(ValueError, match="different"):
        a.merge(Histogram([5]))


def test_pulls_look_the_loop_up_once_and_a_new_loop_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CPython 3.11's ``get_running_loop`` makes a getpid system call: the hook looks the
    server's loop up once, not per loop turn that received a pull; a hook outliving its loop
    finds the next one, and driven without a loop it still counts."""
    lookups = []
    real = asyncio.get_running_loop

    def counting() -> asyncio.AbstractEventLoop:
        lookups.append(1)
        return real()

    monkeypatch.setattr(asyncio, "get_running_loop", counting)
    rpc = RpcMetrics(Clock())
    ch = FakeChannel()

    async def turns(n: int) -> None:
        for _ in range(n):
            held = RemotingCommand.request(RequestCode.PULL_MESSAGE)
            rpc.before_request(ch, held)  # type: ignore[arg-type]
            await asyncio.sleep(0)  # a later loop turn: this pull was held
            rpc.after_response(ch, held, RemotingCommand.response(0))  # type: ignore[arg-type]

    asyncio.run(turns(5))
    assert len(lookups) == 1
    assert rpc.snapshot().latency[(RequestCode.PULL_MESSAGE, 0, True)].count == 5
    asyncio.run(turns(3))  # the first loop is closed: the second one is looked up once
    assert len(lookups) == 2
    assert rpc.snapshot().latency[(RequestCode.PULL_MESSAGE, 0, True)].count == 8
    quick = RemotingCommand.request(RequestCode.PULL_MESSAGE)
    rpc.before_request(ch, quick)  # type: ignore[arg-type]
    rpc.after_response(ch, quick, RemotingCommand.response(0))  # type: ignore[arg-type]
    assert rpc.snapshot().latency[(RequestCode.PULL_MESSAGE, 0, False)].count == 1
