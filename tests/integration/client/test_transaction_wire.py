"""The transaction protocol on the wire, against a scripted in-process broker.

The real broker's transaction support is issue 4; this checks what the client puts on the
wire today: the half message, the one-way END_TRANSACTION after the local transaction, and the
answer to a broker's CHECK_TRANSACTION_STATE (a server-to-client request on the producer's own
connection, dispatched by the ClientInstance to the producer of the message's PGROUP).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from ariane.client import LocalTransactionState, Message, MessageExt, TransactionProducer
from ariane.common.message import HostPort
from ariane.common.msgid import create_offset_msg_id
from ariane.common.properties import decode_properties
from ariane.common.record import encode_record
from ariane.remoting.channel import Channel
from ariane.remoting.config import RemotingServerConfig
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from ariane.remoting.server import RemotingServer
from tests.integration.client.conftest import run
from tests.support.polling import await_for

pytestmark = pytest.mark.integration

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
HALF_OFFSET = 7 * 4096


@dataclass
class StubBroker:
    """NameServer and broker in one: routes everything to itself, remembers what it got."""

    server: RemotingServer
    halves: list[tuple[RemotingCommand, Channel]] = field(default_factory=list)
    ends: list[tuple[h.EndTransactionRequestHeader, RemotingCommand]] = field(default_factory=list)
    heartbeats: list[Channel] = field(default_factory=list)

    @property
    def addr(self) -> str:
        return self.server.address

    def route(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        data = TopicRouteData(
            [QueueData("stub", 2, 2, 6)], [BrokerData("C", "stub", {0: self.addr})]
        )
        return RemotingCommand.response(ResponseCode.SUCCESS, body=data.encode())

    def send(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.halves.append((request, ctx.channel))
        header = h.SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
        uniq = decode_properties(header.properties or "")["UNIQ_KEY"]
        port = self.addr.rsplit(":", 1)[1]
        ext = {
            "msgId": create_offset_msg_id(bytes([127, 0, 0, 1]), int(port), HALF_OFFSET),
            "queueId": str(header.queue_id),
            "queueOffset": "42",
            "transactionId": uniq,
        }
        return RemotingCommand.response(ResponseCode.SUCCESS, ext_fields=ext)

    def end(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.ends.append(
            (h.EndTransactionRequestHeader.from_ext_fields(request.ext_fields), request)
        )

    def heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.heartbeats.append(ctx.channel)
        return RemotingCommand.response(ResponseCode.SUCCESS)

    def check(self, channel: Channel, half: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE for a stored half message, one-way as brokers send it."""
        header = h.SendMessageRequestHeaderV2.from_ext_fields(half.ext_fields)
        props = decode_properties(header.properties or "")
        msg = MessageExt(
            header.topic,
            half.body or b"",
            0,
            props,
            queue_id=header.queue_id,
            queue_offset=42,
            born_host=HostPort(bytes([127, 0, 0, 1]), 1),
            store_host=HostPort(bytes([127, 0, 0, 1]), int(self.addr.rsplit(":", 1)[1])),
            commit_log_offset=HALF_OFFSET,
        )
        check = h.CheckTransactionStateRequestHeader(
            tran_state_table_offset=42,
            commit_log_offset=HALF_OFFSET,
            topic=header.topic,
            msg_id=props["UNIQ_KEY"],
            transaction_id=props["UNIQ_KEY"],
            offset_msg_id=msg.offset_msg_id,
        )
        self.server.invoke_oneway(
            channel,
            RemotingCommand.request(
                RequestCode.CHECK_TRANSACTION_STATE, check.to_ext_fields(), encode_record(msg)
            ),
        )


@asynccontextmanager
async def stub_broker() -> AsyncIterator[StubBroker]:
    server = RemotingServer(RemotingServerConfig(listen_port=0))
    stub = StubBroker(server)
    server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, stub.route)
    server.register_processor(RequestCode.SEND_MESSAGE_V2, stub.send)
    server.register_processor(RequestCode.END_TRANSACTION, stub.end)
    server.register_processor(RequestCode.HEART_BEAT, stub.heartbeat)
    server.register_processor(
        RequestCode.UNREGISTER_CLIENT, lambda c, r: RemotingCommand.response(ResponseCode.SUCCESS)
    )
    await server.start()
    try:
        yield stub
    finally:
        await server.stop()


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK, UNKNOW])
def test_half_message_then_one_way_end_transaction(state: LocalTransactionState) -> None:
    async def go() -> None:
        async with (
            stub_broker() as stub,
            TransactionProducer(
                "txg_wire", checker=lambda m: COMMIT, namesrv_addr=stub.addr
            ) as producer,
        ):
            result = await producer.send_in_transaction(
                Message("TxWire", b"body"), lambda m, a: state
            )
            ((half, _),) = stub.halves
            header = h.SendMessageRequestHeaderV2.from_ext_fields(half.ext_fields)
            props = decode_properties(header.properties or "")
            assert header.sys_flag & 0x4
            assert (props["TRAN_MSG"], props["PGROUP"]) == ("true", "txg_wire")
            await await_for(lambda: asyncio.sleep(0, stub.ends), bool)
            ((end, request),) = stub.ends
            assert request.is_oneway
            assert end.commit_or_rollback == state.sys_flag
            assert (end.commit_log_offset, end.tran_state_table_offset) == (HALF_OFFSET, 42)
            assert end.msg_id == props["UNIQ_KEY"] == result.msg_id
            assert end.producer_group == "txg_wire"
            assert not end.from_transaction_check

    run(go())


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK, UNKNOW])
def test_a_check_back_is_answered_by_the_checker(state: LocalTransactionState) -> None:
    asked: list[MessageExt] = []

    def checker(msg: MessageExt) -> LocalTransactionState:
        asked.append(msg)
        return state

    async def go() -> None:
        async with (
            stub_broker() as stub,
            TransactionProducer("txg_check", checker=checker, namesrv_addr=stub.addr) as producer,
        ):
            await producer.send_in_transaction(Message("TxCheck", b"body"), lambda m, a: UNKNOW)
            ((half, channel),) = stub.halves
            await await_for(lambda: asyncio.sleep(0, stub.ends), bool)
            stub.check(channel, half)
            await await_for(lambda: asyncio.sleep(0, stub.ends), lambda e: len(e) == 2)
            end, request = stub.ends[1]
            assert request.is_oneway
            assert end.from_transaction_check
            assert end.commit_or_rollback == state.sys_flag
            assert (end.commit_log_offset, end.tran_state_table_offset) == (HALF_OFFSET, 42)
            assert end.producer_group == "txg_check"
            (msg,) = asked
            assert msg.topic == "TxCheck"
            assert msg.body == b"body"
            assert end.msg_id == msg.properties["UNIQ_KEY"] == end.transaction_id

    run(go())


def test_the_producer_group_is_registered_by_heartbeat_for_check_backs() -> None:
    async def go() -> None:
        async with (
            stub_broker() as stub,
            TransactionProducer(
                "txg_hb", checker=lambda m: COMMIT, namesrv_addr=stub.addr
            ) as producer,
        ):
            await producer.send_in_transaction(Message("TxHb", b"x"), lambda m, a: COMMIT)
            assert await await_for(lambda: asyncio.sleep(0, stub.heartbeats), bool)

    run(go())
