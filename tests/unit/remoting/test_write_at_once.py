"""Requests written at once (``Channel(write_at_once=...)``: a client's pulls) instead of at
the next loop turn's flush, so the broker starts on a pull while the consumer handles the
batch it just received."""

from __future__ import annotations

import asyncio

from ariane.remoting.channel import Channel, held_flushes, release_flushes
from ariane.remoting.config import PULL_CODES, RemotingClientConfig
from ariane.remoting.protocol.codec import encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.transport import RecordingTransport
from tests.unit.remoting.test_held_flushes import _NoHandler, _sent


def _channel(write_at_once: frozenset[int] = PULL_CODES) -> tuple[Channel, RecordingTransport]:
    channel = Channel(_NoHandler(), write_at_once=write_at_once)
    transport = RecordingTransport()
    channel.connection_made(transport)  # type: ignore[arg-type]
    return channel, transport


def _request(code: int, opaque: int) -> RemotingCommand:
    cmd = RemotingCommand.request(code)
    cmd.opaque = opaque
    return cmd


def test_a_pull_leaves_at_once_with_what_was_queued_before_it() -> None:
    async def go() -> None:
        channel, transport = _channel()
        beat = _request(RequestCode.HEART_BEAT, 1)
        pull = _request(RequestCode.PULL_MESSAGE, 2)
        assert channel.send(beat)
        assert transport.writes == []  # an ordinary request waits for the loop turn
        assert channel.send(pull)
        assert _sent(transport) == [encode(beat) + encode(pull)]  # in order, one write
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(transport.writes) == 1  # the scheduled flush was cancelled
        lite = _request(RequestCode.LITE_PULL_MESSAGE, 3)
        assert channel.send(lite)
        assert _sent(transport)[1:] == [encode(lite)]

    asyncio.run(go())


def test_answers_held_blocks_and_other_channels_keep_the_loop_turn() -> None:
    async def go() -> None:
        channel, transport = _channel()
        answer = RemotingCommand.response(int(RequestCode.PULL_MESSAGE), "same number")
        answer.opaque = 7
        assert channel.send(answer)  # a response whose code equals a pull's is not a pull
        assert transport.writes == []
        await asyncio.sleep(0)
        assert _sent(transport) == [encode(answer)]
        assert held_flushes()
        pull = _request(RequestCode.PULL_MESSAGE, 8)
        assert channel.send(pull)
        assert len(transport.writes) == 1  # a held block keeps it until its release
        release_flushes()
        assert _sent(transport)[1:] == [encode(pull)]
        plain, plain_transport = _channel(frozenset())
        assert plain.send(_request(RequestCode.PULL_MESSAGE, 9))
        assert plain_transport.writes == []
        await asyncio.sleep(0)
        assert len(plain_transport.writes) == 1

    asyncio.run(go())


def test_a_client_writes_its_pulls_at_once_by_default() -> None:
    codes = RemotingClientConfig().write_at_once
    assert {RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE} <= codes
    assert RequestCode.SEND_MESSAGE_V2 not in codes
    assert RequestCode.ARIANE_BULK_PULL_MESSAGE in codes
    assert RequestCode.POP_MESSAGE in codes
