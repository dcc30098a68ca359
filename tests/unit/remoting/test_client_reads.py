"""A client's connections read into one reused buffer (``ReadBufferChannel``), and a request on
an open connection does not look the running loop up (CPython 3.11's ``get_running_loop()``
makes a getpid system call: once per pull of a push consumer)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import ariane.remoting.client as remoting_client
from ariane.remoting.channel import ReadBufferChannel
from ariane.remoting.client import RemotingClient
from ariane.remoting.protocol.codec import decode_frame, encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.transport import RecordingTransport


async def _connected(client: RemotingClient, addr: str) -> tuple[Any, RecordingTransport]:
    """``client``'s channel to ``addr`` over a recording transport (no socket)."""
    loop = asyncio.get_running_loop()
    transport = RecordingTransport()

    async def create_connection(factory: Any, host: str, port: int) -> tuple[Any, Any]:
        channel = factory()
        channel.connection_made(transport)
        return transport, channel

    loop.create_connection = create_connection  # type: ignore[method-assign]
    return await client.get_channel(addr), transport


def _read(channel: Any, data: bytes) -> None:
    """What the transport does for a buffered protocol: recv_into its buffer, then report."""
    buf = channel.get_buffer(-1)
    buf[: len(data)] = data
    channel.buffer_updated(len(data))


def _answer(request_bytes: bytes, body: bytes) -> bytes:
    request = decode_frame(request_bytes[4:])
    response = RemotingCommand.response(0, "ok", body=body)
    response.opaque = request.opaque
    return encode(response)


def test_a_client_channel_reads_into_one_buffer_and_copies_each_read_out() -> None:
    async def go() -> None:
        client = RemotingClient()
        channel, transport = await _connected(client, "127.0.0.1:1")
        assert isinstance(channel, ReadBufferChannel)
        assert isinstance(channel, asyncio.BufferedProtocol)
        first = channel.invoke_future(RemotingCommand.request(RequestCode.HEART_BEAT), 3000)
        second = channel.invoke_future(RemotingCommand.request(RequestCode.HEART_BEAT), 3000)
        await asyncio.sleep(0)
        frames = transport.sent()[0]
        one = encode(RemotingCommand.request(RequestCode.HEART_BEAT))
        a, b = frames[: len(one)], frames[len(one) :]
        buffer = channel.get_buffer(-1)
        assert len(buffer) == 256 * 1024
        answer_a = _answer(a, b"A" * 100)
        _read(channel, answer_a[:10])  # a frame split over two reads
        _read(channel, answer_a[10:])
        assert channel.get_buffer(-1) is buffer  # the same buffer for every read
        _read(channel, _answer(b, b"B" * 100))  # overwrites the buffer the first answer came in
        assert (await first).body == b"A" * 100
        assert (await second).body == b"B" * 100

    asyncio.run(go())


def test_a_request_on_an_open_connection_does_not_look_the_loop_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def go() -> list[bytes]:
        client = RemotingClient()
        channel, transport = await _connected(client, "127.0.0.1:1")
        calls: list[int] = []
        real = asyncio.get_running_loop

        def counting() -> asyncio.AbstractEventLoop:
            calls.append(1)
            return real()

        monkeypatch.setattr(remoting_client.asyncio, "get_running_loop", counting)
        bodies = []
        for n in range(3):
            pending = asyncio.ensure_future(
                client.invoke("127.0.0.1:1", RemotingCommand.request(RequestCode.HEART_BEAT), 500)
            )
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            _read(channel, _answer(transport.take()[-1], b"%d" % n))
            bodies.append((await pending).body)
        monkeypatch.undo()
        assert calls == []
        return bodies

    assert asyncio.run(go()) == [b"0", b"1", b"2"]
