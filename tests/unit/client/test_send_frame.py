"""``send_async`` on the encoded-frame path (``send_head`` + ``Channel.invoke_frame``, the send
as its own waiter): the bytes it writes are ``build_request``'s encoded, its answer completes
the future, a refusal fails it, a lost connection retries on the other broker; and what keeps
a send on the generic path (batch, retry topic, trace, signer, hooks, no open connection)."""

from __future__ import annotations

import asyncio
from typing import Any

from ariane.client._producer import Producer
from ariane.client._route import TopicPublishInfo
from ariane.client._rpc import RpcBase
from ariane.client._send import build_request, prepare_single
from ariane.client.config import ClientConfig
from ariane.client.errors import MessageIllegalError
from ariane.client.message import Message, MessageQueue, SendResult, SendStatus
from ariane.common.clock import ManualClock
from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient
from ariane.remoting.protocol.codec import decode_frame, encode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.transport import RecordingTransport
from tests.unit.client.fakes import FakeApi, bind_loop, install, run

A, B = "127.0.0.1:1001", "127.0.0.1:1002"
QA, QB = MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)


class _NoHandler:
    def handle_request(self, channel: Channel, request: RemotingCommand) -> None:
        raise AssertionError("no request expected")


def _channel() -> tuple[Channel, RecordingTransport]:
    channel = Channel(_NoHandler())
    transport = RecordingTransport()
    channel.connection_made(transport)  # type: ignore[arg-type]
    return channel, transport


def _setup(**kwargs: Any) -> tuple[Producer, FakeApi]:
    clock = ManualClock()
    producer = Producer(
        "G", client_config=ClientConfig(namesrv_addr="127.0.0.1:9876", clock=clock), **kwargs
    )
    api = install(producer, clock, {"a": A, "b": B})
    producer._publish["T"] = TopicPublishInfo("T", [QA, QB], have_route=True, counter=0)
    return producer, api


def _written(channel: Channel, transport: RecordingTransport) -> list[RemotingCommand]:
    channel._flush()  # what the loop's next turn does
    return [decode_frame(frame[4:]) for frame in transport.take()]


def _answer(channel: Channel, request: RemotingCommand, code: int = 0, offset: int = 42) -> None:
    ext = {"msgId": "OFFSETID", "queueId": request.ext_fields["e"], "queueOffset": str(offset)}
    response = RemotingCommand.response(code, None if code == 0 else "refused", ext)
    response.opaque = request.opaque
    channel.data_received(encode(response))


def test_a_single_send_writes_the_encoded_request_and_its_answer_completes_it() -> None:
    producer, api = _setup()

    async def go() -> tuple[bytes, bytes, Message, SendResult, int]:
        bind_loop(producer)
        channels = {A: _channel(), B: _channel()}
        api.channels = {addr: pair[0] for addr, pair in channels.items()}
        msg = Message("T", b"x" * 100, flag=3, tags="TagA", keys=["k1"])
        future = producer.send_async(msg)
        (channel, transport) = channels[A]
        channel._flush()
        frame = transport.data
        (sent,) = [decode_frame(frame[4:])]
        assert _written(*channels[B]) == []
        expected = build_request(
            prepare_single(msg, producer.settings, producer._ids), QA, producer._header_base
        )
        expected.opaque = sent.opaque
        expected.ext_fields["g"] = sent.ext_fields["g"]
        assert not future.done()
        _answer(channel, sent)
        return frame, encode(expected), msg, future.result(), channel.pending_requests

    frame, expected, msg, result, pending = run(go)
    assert frame == expected
    assert api.calls == []
    assert result == SendResult(
        SendStatus.SEND_OK, msg.properties["UNIQ_KEY"], "OFFSETID", QA, 42, None
    )
    assert pending == 0


def test_a_refusal_fails_the_send_without_a_retry() -> None:
    producer, api = _setup()

    async def go() -> tuple[BaseException | None, int]:
        bind_loop(producer)
        channel, transport = _channel()
        other, other_transport = _channel()
        api.channels = {A: channel, B: other}
        future = producer.send_async(Message("T", b"x"))
        (sent,) = _written(channel, transport)
        _answer(channel, sent, code=13)  # MESSAGE_ILLEGAL
        assert _written(other, other_transport) == []
        return future.exception(), channel.pending_requests

    error, pending = run(go)
    assert isinstance(error, MessageIllegalError)
    assert api.calls == []
    assert pending == 0


def test_a_lost_connection_retries_on_the_other_broker() -> None:
    producer, api = _setup()

    async def go() -> tuple[RemotingCommand, RemotingCommand, SendResult]:
        bind_loop(producer)
        channel, transport = _channel()
        other, other_transport = _channel()
        api.channels = {A: channel, B: other}
        future = producer.send_async(Message("T", b"x"))
        (first,) = _written(channel, transport)
        channel.connection_lost(None)
        (second,) = _written(other, other_transport)
        _answer(channel, first, offset=1)  # too late: nobody waits for it any more
        assert not future.done()
        _answer(other, second, offset=7)
        return first, second, future.result()

    first, second, result = run(go)
    assert (first.ext_fields["e"], second.ext_fields["e"]) == ("1", "0")
    assert first.ext_fields["i"] == second.ext_fields["i"]
    assert result.message_queue == QB
    assert result.queue_offset == 7
    assert api.calls == []


class _Tracer:
    def __init__(self) -> None:
        self.pubs: list[SendResult] = []

    def now_ms(self) -> int:
        return 5

    def pub(self, source: Any, result: SendResult, *args: Any) -> None:
        self.pubs.append(result)


def test_batches_retry_topics_and_traced_sends_take_the_generic_path() -> None:
    producer, api = _setup()
    producer._publish["%RETRY%G"] = TopicPublishInfo(
        "%RETRY%G", [MessageQueue("%RETRY%G", "a", 0)], have_route=True, counter=0
    )
    tracer = _Tracer()

    async def go() -> list[SendResult]:
        bind_loop(producer)
        channel, transport = _channel()
        api.channels = {A: channel, B: channel}
        futures = [
            producer.send_batch_async([Message("T", b"1"), Message("T", b"2")]),
            producer.send_async(Message("%RETRY%G", b"r", properties={"RECONSUME_TIME": "1"})),
        ]
        producer._tracer = tracer  # type: ignore[assignment]
        futures.append(producer.send_async(Message("T", b"t")))
        assert _written(channel, transport) == []
        return list(await asyncio.gather(*futures))

    results = run(go)
    assert [call.request.ext_fields["b"] for call in api.calls] == ["T", "%RETRY%G", "T"]
    assert [call.request.ext_fields.get("m") for call in api.calls] == ["true", None, None]
    assert all(result.status is SendStatus.SEND_OK for result in results)
    assert tracer.pubs == [results[2]]


def test_the_plain_channel_is_refused_to_signed_or_hooked_requests() -> None:
    async def go() -> list[object]:
        rpc = RpcBase(RemotingClient(), ["127.0.0.1:9876"])
        channel, _ = _channel()
        rpc.remoting._channels[A] = channel
        seen: list[object] = [rpc.plain_channel(A), rpc.plain_channel(B)]
        rpc.remoting.signer = lambda request: None
        seen.append(rpc.plain_channel(A))
        rpc.remoting.signer = None
        rpc.remoting.dispatcher.hooks.append(object())  # type: ignore[arg-type]
        seen.append(rpc.plain_channel(A))
        rpc.remoting.dispatcher.hooks.clear()
        channel.connection_lost(None)
        seen.append(rpc.plain_channel(A))
        return [x is channel for x in seen]

    assert run(go) == [True, False, False, False, False]
