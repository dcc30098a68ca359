"""Limits of the closed admin plane: auto-created topics and groups, clients per group,
NameServer KV entries, connections and bytes buffered per connection."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from pathlib import Path

from ariane.namesrv.config import NamesrvConfig
from ariane.namesrv.server import NameServer
from ariane.remoting.config import RemotingServerConfig
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import ConsumerData, HeartbeatData
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer
from tests.unit.broker.harness import Broker, FakeChannel


def test_auto_creation_stops_at_its_limits(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(
            tmp_path, auto_create_topic_limit=0, auto_create_subscription_group_limit=0
        ).start()
        try:
            known = len(b.c.topics.table)
            b.c.config = b.c.topics.config = dataclasses.replace(
                b.c.config, auto_create_topic_limit=known + 1
            )
            assert (await b.send("Fresh1")).code == ResponseCode.SUCCESS
            refused = await b.send("Fresh2")
            assert refused.code == ResponseCode.TOPIC_NOT_EXIST
            assert "autoCreateTopicLimit" in (refused.remark or "")
            assert "Fresh2" not in b.c.topics.table
            body = HeartbeatData("c1", consumer_data_set=[ConsumerData(group_name="G1")]).encode()
            r = await b.answer(RequestCode.HEART_BEAT, None, body)
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            assert "autoCreateSubscriptionGroupLimit=0" in (r.remark or "")
        finally:
            await b.stop()

    asyncio.run(main())


def test_clients_per_group_are_limited(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, max_clients_per_group=2).start()
        try:
            codes = []
            for i in range(3):
                body = HeartbeatData(
                    f"c{i}", consumer_data_set=[ConsumerData(group_name="G")]
                ).encode()
                r = await b.answer(RequestCode.HEART_BEAT, None, body, FakeChannel(f"1.1.1.{i}:1"))
                codes.append(r.code)
            assert codes == [ResponseCode.SUCCESS, ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR]
            assert len(b.c.clients.consumers["G"].channels) == 2
            # a known client's heartbeat still passes
            body = HeartbeatData("c0", consumer_data_set=[ConsumerData(group_name="G")]).encode()
            first = b.c.clients.consumers["G"].channels
            channel = next(iter(first.values())).channel
            r = await b.answer(RequestCode.HEART_BEAT, None, body, channel)
            assert r.code == ResponseCode.SUCCESS
        finally:
            await b.stop()

    asyncio.run(main())


def test_namesrv_kv_entries_are_limited(tmp_path: Path) -> None:
    async def main() -> None:
        config = NamesrvConfig(kv_config_path=str(tmp_path / "kv.json"), kv_config_max_entries=2)
        server = NameServer(config)
        channel = FakeChannel()
        answers: list[RemotingCommand] = []
        for key in ("a", "b", "c", "a"):
            header = h.PutKVConfigRequestHeader(namespace="NS", key=key, value="v")
            request = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, header.to_ext_fields())
            server.remoting.dispatcher.handle_request(channel, request)  # type: ignore[arg-type]
            wanted = len(answers) + 1
            await _until(lambda: len(channel.sent) >= wanted)  # noqa: B023
            answers.append(channel.sent[-1])
        assert [r.code for r in answers] == [0, 0, ResponseCode.SYSTEM_ERROR, 0]
        assert "kvConfigMaxEntries" in (answers[2].remark or "")
        assert server.kv_config.count() == 2

    asyncio.run(main())


def test_connections_over_the_limit_are_closed() -> None:
    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(max_connections=1))
        port = await server.start()
        try:
            first = await asyncio.open_connection("127.0.0.1", port)
            await _until(lambda: len(server.channels) == 1)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed at once
            writer.close()
            assert len(server.channels) == 1
            first[1].close()
        finally:
            await server.stop()

    asyncio.run(main())


def test_a_peer_that_stops_reading_is_disconnected() -> None:
    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(max_write_buffer_bytes=1 << 20))
        port = await server.start()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            await _until(lambda: len(server.channels) == 1)
            (channel,) = server.channels
            big = RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"x" * (256 * 1024))
            for _ in range(64):
                if not channel.is_active:
                    break
                channel.invoke_oneway(big)
                await asyncio.sleep(0)
            await _until(lambda: not channel.is_active)
        finally:
            sock.close()
            await server.stop()

    asyncio.run(main())


async def _until(cond: object, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not cond():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)
