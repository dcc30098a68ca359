"""The C++ client (PyPI rocketmq 0.4.4) against our NameServer and remoting server.

The NameServer is a real ``ariane namesrv`` process; a stand-in broker built on
``RemotingServer`` registers with it and answers SEND_MESSAGE. The C++ producer must find the
route in our JSON, reach the broker, and read our send response.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from ariane.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RemotingServerConfig,
    RequestCode,
    RequestContext,
    ResponseCode,
)
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import (
    TopicConfig,
)
from tests.helpers import register_broker_command
from tests.integration.namesrv_process import NamesrvProcess

pytestmark = [pytest.mark.compat, pytest.mark.xdist_group("cpp-client")]

PRODUCER = """
import sys
from rocketmq.client import Producer, Message
p = Producer('PID-compat')
p.set_namesrv_addr(sys.argv[1])
p.start()
msg = Message('CompatTopic')
msg.set_keys('k1')
msg.set_tags('tagA')
msg.set_body('hello from cpp')
r = p.send_sync(msg)
print('RESULT', int(r.status), r.offset, flush=True)
p.shutdown()
"""


def test_cpp_producer_routes_through_our_namesrv(cpp_client_python: Path, tmp_path: Path) -> None:
    ns = NamesrvProcess(tmp_path / "ns")
    try:
        asyncio.run(_scenario(cpp_client_python, ns.addr, tmp_path))
    finally:
        assert ns.stop() == 0


async def _scenario(python: Path, namesrv_addr: str, tmp_path: Path) -> None:
    sends: list[tuple[int, str, h.SendMessageRequestHeader, bytes | None]] = []

    def on_send(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = h.SendMessageRequestHeader.from_ext_fields(request.ext_fields)
        sends.append((request.code, request.language.name, header, request.body))
        reply = h.SendMessageResponseHeader(
            msg_id="7F00000100002A9F0000000000000001",
            queue_id=header.queue_id,
            queue_offset=41 + len(sends),
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields=reply.to_ext_fields())

    broker = RemotingServer(RemotingServerConfig())
    broker.register_processor(RequestCode.SEND_MESSAGE, on_send)
    broker.register_default_processor(
        lambda ctx, request: request.make_response(ResponseCode.SUCCESS)
    )
    port = await broker.start()
    client = RemotingClient()
    try:
        topics = (TopicConfig("CompatTopic", 4, 4, 6), TopicConfig("TBW102", 8, 8, 7))
        register = register_broker_command(broker_addr=f"127.0.0.1:{port}", topics=topics)
        r = await client.invoke(namesrv_addr, register, 5000)
        assert r.code == ResponseCode.SUCCESS
        proc = await asyncio.create_subprocess_exec(
            str(python),
            "-c",
            PRODUCER,
            namesrv_addr,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode(errors="replace")
        assert b"RESULT 0 42" in out  # SEND_OK and our queue offset, parsed by the C++ client
        ((code, language, header, payload),) = sends
        assert (code, language) == (RequestCode.SEND_MESSAGE, "CPP")
        assert (header.topic, header.producer_group, header.batch) == (
            "CompatTopic",
            "PID-compat",
            False,
        )
        assert payload == b"hello from cpp"
    finally:
        await client.close()
        await broker.stop()
