"""The asyncio server, client and blocking client against each other on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import pytest

from ariane.errors import (
    ConnectError,
    ConnectionClosedError,
    RequestError,
    RequestTimeoutError,
)
from ariane.remoting import (
    Channel,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RemotingServerConfig,
    RequestCode,
    RequestContext,
    ResponseCode,
    SerializeType,
)
from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.eventloop import run as run_loop
from ariane.remoting.protocol.codec import FrameDecoder, encode
from tests.support.polling import await_until

pytestmark = pytest.mark.integration

T = TypeVar("T")
ECHO = 9001
SLOW = 9002
BOOM = 9003
REJECT = 9004
LATE = 9005
ONEWAY_COUNT = 9006


def run(coro: Coroutine[Any, Any, T], uvloop: bool = False) -> T:
    return run_loop(asyncio.wait_for(coro, 30), use_uvloop=uvloop)


class Fixture:
    """A server with a few test processors."""

    def __init__(self, **config: Any) -> None:
        self.server = RemotingServer(RemotingServerConfig(**config))
        self.release: asyncio.Future[None] | None = None
        self.late: list[RequestContext] = []
        self.oneway_seen = 0
        self.closed: list[Channel] = []
        s = self.server
        s.register_processor(ECHO, self.echo)
        s.register_processor(SLOW, self.slow)
        s.register_processor(BOOM, self.boom)
        s.register_processor(REJECT, self.reject)
        s.register_processor(LATE, self.hold)
        s.register_processor(ONEWAY_COUNT, self.count)
        s.add_channel_close_listener(self.closed.append)

    def echo(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response(
            ResponseCode.SUCCESS, ext_fields=request.ext_fields, body=request.body
        )

    async def slow(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        assert self.release is not None
        await self.release
        return RemotingCommand.response(ResponseCode.SUCCESS, body=request.body)

    def boom(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("kaput")

    def reject(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise RequestError(ResponseCode.NO_PERMISSION, "not for you")

    def hold(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.late.append(ctx)

    def count(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.oneway_seen += 1
        raise ValueError("no response even for errors")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"


async def started(**config: Any) -> Fixture:
    fx = Fixture(**config)
    await fx.server.start()
    return fx


@contextlib.asynccontextmanager
async def serving(**config: Any) -> AsyncIterator[tuple[Fixture, RemotingClient]]:
    """A started server fixture and a client, both closed afterwards."""
    fx = await started(**config)
    client = RemotingClient()
    try:
        yield fx, client
    finally:
        await client.close()
        await fx.server.stop()


@pytest.mark.parametrize("uvloop", [False, True], ids=["asyncio", "uvloop"])
def test_echo_and_concurrent_correlation(uvloop: bool) -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            fx.release = asyncio.get_running_loop().create_future()
            slow = [
                asyncio.ensure_future(
                    client.invoke(fx.addr, RemotingCommand.request(SLOW, body=b"s%d" % i), 5000)
                )
                for i in range(50)
            ]
            fast = await asyncio.gather(
                *(
                    client.invoke(
                        fx.addr, RemotingCommand.request(ECHO, {"i": str(i)}, b"%d" % i), 5000
                    )
                    for i in range(500)
                )
            )
            assert [r.body for r in fast] == [b"%d" % i for i in range(500)]
            assert [r.ext_fields["i"] for r in fast] == [str(i) for i in range(500)]
            assert all(r.is_response for r in fast)
            fx.release.set_result(None)
            assert [r.body for r in await asyncio.gather(*slow)] == [b"s%d" % i for i in range(50)]

    run(main(), uvloop)


def test_errors_become_responses_and_the_connection_survives() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            r = await client.invoke(fx.addr, RemotingCommand.request(4242), 3000)
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert r.remark == " request type 4242 not supported"
            r = await client.invoke(fx.addr, RemotingCommand.request(BOOM), 3000)
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert "kaput" in (r.remark or "")
            r = await client.invoke(fx.addr, RemotingCommand.request(REJECT), 3000)
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "not for you")
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"ok"), 3000)
            assert r.body == b"ok"
            assert len(fx.server.channels) == 1

    run(main())


def test_header_errors_are_answered_with_invalid_parameter() -> None:
    async def main() -> None:
        fx = await started()

        def needs_header(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            from ariane.remoting.protocol.headers import GetRouteInfoRequestHeader

            GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
            return request.make_response(ResponseCode.SUCCESS)

        fx.server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, needs_header)
        client = RemotingClient()
        try:
            r = await client.invoke(
                fx.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 3000
            )
            assert r.code == ResponseCode.INVALID_PARAMETER
            assert r.remark == "GetRouteInfoRequestHeader: the custom field topic is missing"
        finally:
            await client.close()
            await fx.server.stop()

    run(main())


def test_oneway_requests_get_no_response_even_on_error() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            for _ in range(3):
                await client.invoke_oneway(fx.addr, RemotingCommand.request(ONEWAY_COUNT))
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"after"), 3000)
            assert r.body == b"after"  # the only frame that came back
            assert fx.oneway_seen == 3

    run(main())


def test_late_response_and_timeout() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            waiting = asyncio.ensure_future(
                client.invoke(fx.addr, RemotingCommand.request(LATE), 5000)
            )
            await await_until(lambda: len(fx.late) == 1, what="request held")
            assert fx.late[0].send_response(
                RemotingCommand.response(ResponseCode.SUCCESS, body=b"later")
            )
            assert not fx.late[0].send_response(RemotingCommand.response(ResponseCode.SUCCESS))
            assert (await waiting).body == b"later"

            with pytest.raises(RequestTimeoutError):
                await client.invoke(fx.addr, RemotingCommand.request(LATE), 50)
            fx.late[1].send_response(RemotingCommand.response(ResponseCode.SUCCESS))  # dropped
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"fine"), 3000)
            assert r.body == b"fine"

    run(main())


def test_server_calls_the_client_back_on_its_connection() -> None:
    async def main() -> None:
        fx = await started()
        client = RemotingClient()
        notified: list[str] = []

        def running_info(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            return request.make_response(
                ResponseCode.SUCCESS, body=b"info:" + request.ext_fields["clientId"].encode()
            )

        def ids_changed(ctx: RequestContext, request: RemotingCommand) -> None:
            notified.append(request.ext_fields["consumerGroup"])

        client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
        client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ids_changed)
        try:
            await client.invoke(fx.addr, RemotingCommand.request(ECHO), 3000)
            (channel,) = fx.server.channels
            answer = await fx.server.invoke(
                channel,
                RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"clientId": "c1"}),
                3000,
            )
            assert answer.body == b"info:c1"
            fx.server.invoke_oneway(
                channel,
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}
                ),
            )
            await await_until(lambda: notified == ["G"], what="notification delivered")
            unknown = await fx.server.invoke(
                channel, RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE), 3000
            )
            assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await client.close()
            await fx.server.stop()

    run(main())


def test_closed_connection_fails_in_flight_requests_and_client_reconnects() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            waiting = asyncio.ensure_future(
                client.invoke(fx.addr, RemotingCommand.request(LATE), 5000)
            )
            await await_until(lambda: len(fx.late) == 1, what="request held")
            fx.late[0].channel.close()
            with pytest.raises(ConnectionClosedError):
                await waiting
            await await_until(lambda: len(fx.closed) == 1, what="close listener called")
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"again"), 3000)
            assert r.body == b"again"
            assert fx.late[0].send_response(RemotingCommand.response(ResponseCode.SUCCESS)) is False

    run(main())


def test_malformed_bytes_close_only_that_connection() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            await client.invoke(fx.addr, RemotingCommand.request(ECHO), 3000)
            reader, writer = await asyncio.open_connection("127.0.0.1", fx.server.port)
            good = encode(RemotingCommand.request(ECHO, body=b"before"))
            writer.write(good + struct.pack(">i", 2**30) + b"junk")
            data = await reader.read()  # the server answers the good frame, then closes
            (answer,) = FrameDecoder().feed(data)
            assert answer.body == b"before"
            writer.close()
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"still"), 3000)
            assert r.body == b"still"

    run(main())


def test_idle_connections_are_closed() -> None:
    async def main() -> None:
        async with serving(channel_max_idle_seconds=0.2) as (fx, client):
            await client.invoke(fx.addr, RemotingCommand.request(ECHO), 3000)
            await await_until(lambda: not fx.server.channels, what="idle connection closed")
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"back"), 3000)
            assert r.body == b"back"

    run(main())


class Recorder:
    def __init__(self, deny: bool = False) -> None:
        self.deny = deny
        self.seen: list[tuple[int, int | None]] = []

    def before_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        request.ext_fields.setdefault("AccessKey", "ak")
        if self.deny and request.ext_fields.get("secret") != "yes":
            return RemotingCommand.response(ResponseCode.NO_PERMISSION, "denied")
        return None

    def after_response(
        self, channel: Channel, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        self.seen.append((request.code, None if response is None else response.code))


def test_hooks_on_both_sides() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            server_hook = Recorder(deny=True)
            fx.server.register_hook(server_hook)
            client_hook = Recorder()
            client.register_hook(client_hook)
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO), 3000)
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "denied")
            r = await client.invoke(fx.addr, RemotingCommand.request(ECHO, {"secret": "yes"}), 3000)
            assert r.code == ResponseCode.SUCCESS
            assert r.ext_fields["AccessKey"] == "ak"  # added by the client hook, echoed back
            assert server_hook.seen == [
                (ECHO, ResponseCode.NO_PERMISSION),
                (ECHO, ResponseCode.SUCCESS),
            ]
            assert client_hook.seen == server_hook.seen

    run(main())


def test_binary_serialisation_is_mirrored() -> None:
    async def main() -> None:
        async with serving() as (fx, client):
            req = RemotingCommand.request(
                ECHO, {"k": "v"}, b"b", serialize_type=SerializeType.ROCKETMQ
            )
            r = await client.invoke(fx.addr, req, 3000)
            assert r.serialize_type is SerializeType.ROCKETMQ
            assert (r.ext_fields, r.body) == ({"k": "v"}, b"b")

    run(main())


def test_inflight_limit_pauses_reading_without_losing_requests() -> None:
    async def main() -> None:
        async with serving(max_inflight_per_channel=4) as (fx, client):
            fx.release = asyncio.get_running_loop().create_future()
            calls = [
                asyncio.ensure_future(
                    client.invoke(fx.addr, RemotingCommand.request(SLOW, body=b"%d" % i), 10000)
                )
                for i in range(40)
            ]
            await await_until(lambda: len(fx.server.dispatcher.tasks) >= 4, what="limit reached")
            await asyncio.sleep(0.05)
            assert len(fx.server.dispatcher.tasks) <= 4 + 1
            fx.release.set_result(None)
            assert [r.body for r in await asyncio.gather(*calls)] == [b"%d" % i for i in range(40)]

    run(main())


def test_client_disconnecting_mid_request_leaves_the_server_serving() -> None:
    async def main() -> None:
        fx = await started()
        fx.release = asyncio.get_running_loop().create_future()
        leaver = RemotingClient()
        stayer = RemotingClient()
        try:
            pending = asyncio.ensure_future(
                leaver.invoke(fx.addr, RemotingCommand.request(SLOW), 5000)
            )
            await await_until(
                lambda: len(fx.server.dispatcher.tasks) == 1, what="slow request running"
            )
            await leaver.close()
            with pytest.raises(ConnectionClosedError):
                await pending
            fx.release.set_result(None)  # its answer has nowhere to go
            await await_until(lambda: not fx.server.dispatcher.tasks, what="slow request finished")
            r = await stayer.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"here"), 3000)
            assert r.body == b"here"
        finally:
            await stayer.close()
            await fx.server.stop()

    run(main())


def test_connect_errors() -> None:
    async def main() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = RemotingClient()
        with pytest.raises(ConnectError):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 1000)
        await client.close()

    run(main())


def test_blocking_client() -> None:
    async def main() -> None:
        fx = await started()
        loop = asyncio.get_running_loop()
        timed_out = asyncio.Event()

        def blocking_calls() -> None:
            with BlockingRemotingClient() as client:
                r = client.invoke(fx.addr, RemotingCommand.request(ECHO, {"a": "1"}, b"x"), 3000)
                assert (r.ext_fields, r.body) == ({"a": "1"}, b"x")
                with pytest.raises(RequestTimeoutError):
                    client.invoke(fx.addr, RemotingCommand.request(LATE), 100)
                # answer the timed-out call now; its late response must be skipped by opaque
                asyncio.run_coroutine_threadsafe(answer_late(), loop).result(5)
                r = client.invoke(fx.addr, RemotingCommand.request(ECHO, body=b"y"), 3000)
                assert r.body == b"y"
                client.invoke_oneway(fx.addr, RemotingCommand.request(ONEWAY_COUNT))
                r = client.invoke(fx.addr, RemotingCommand.request(BOOM), 3000)
                assert r.code == ResponseCode.SYSTEM_ERROR

        async def answer_late() -> None:
            timed_out.set()
            fx.late[0].send_response(RemotingCommand.response(ResponseCode.SUCCESS, body=b"stale"))

        try:
            await loop.run_in_executor(None, blocking_calls)
            assert timed_out.is_set()
            assert fx.oneway_seen == 1
        finally:
            await fx.server.stop()

    run(main())


def test_blocking_client_reconnects_after_server_restart() -> None:
    async def main() -> None:
        fx = await started()
        port = fx.server.port
        loop = asyncio.get_running_loop()
        client = BlockingRemotingClient()

        def call() -> RemotingCommand:
            return client.invoke(
                f"127.0.0.1:{port}", RemotingCommand.request(ECHO, body=b"r"), 3000
            )

        try:
            assert (await loop.run_in_executor(None, call)).body == b"r"
            await fx.server.stop()
            with pytest.raises((ConnectionClosedError, ConnectError)):
                await loop.run_in_executor(None, call)
            fx2 = Fixture(listen_port=port)
            await fx2.server.start()
            try:
                assert (await loop.run_in_executor(None, call)).body == b"r"
            finally:
                await fx2.server.stop()
        finally:
            client.close()

    run(main())


def test_processor_result_forms() -> None:
    async def main() -> None:
        fx = await started()
        loop = asyncio.get_running_loop()

        def future_result(
            ctx: RequestContext, request: RemotingCommand
        ) -> asyncio.Future[RemotingCommand]:
            fut: asyncio.Future[RemotingCommand] = loop.create_future()
            loop.call_soon(
                fut.set_result, RemotingCommand.response(ResponseCode.SUCCESS, body=b"fut")
            )
            return fut

        def wrong_type(ctx: RequestContext, request: RemotingCommand) -> Any:
            return {"not": "a response"}

        async def failing(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            await asyncio.sleep(0)
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, "no such topic")

        fx.server.register_processor(9100, future_result)
        fx.server.register_processor(9101, wrong_type)
        fx.server.register_processor(9102, failing)
        client = RemotingClient()
        try:
            assert (
                await client.invoke(fx.addr, RemotingCommand.request(9100), 3000)
            ).body == b"fut"
            r = await client.invoke(fx.addr, RemotingCommand.request(9101), 3000)
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert "not a response" in (r.remark or "")
            r = await client.invoke(fx.addr, RemotingCommand.request(9102), 3000)
            assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "no such topic")
        finally:
            await client.close()
            await fx.server.stop()

    run(main())
