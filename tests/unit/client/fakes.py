"""A scripted stand-in for ``ClientInstance`` so producers run without sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ariane.client._route import TopicPublishInfo
from ariane.client.message import MessageQueue
from ariane.common.clock import ManualClock
from ariane.common.message import HostPort, MessageExt
from ariane.common.msgid import create_offset_msg_id
from ariane.remoting.channel import ResponseCallback
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.command import RemotingCommand

Outcome = BaseException | int  # an exception to raise, or a response code


def consumed_message(topic: str, properties: dict[str, Any], retries: int = 0) -> MessageExt:
    """A message as a consumer gets it (a store host and offset: its offset msgId)."""
    return MessageExt(
        topic,
        b"body",
        properties=properties,
        reconsume_times=retries,
        store_host=HostPort(b"\x7f\x00\x00\x01", 10911),
        commit_log_offset=1 << 20,
    )


class FakeClock:
    """Milliseconds that only move when told (a ``now_ms`` callable)."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class Call:
    addr: str
    timeout_ms: int
    request: RemotingCommand


@dataclass
class FakeApi:
    """Answers sends from a per-address script; each attempt may advance the clock."""

    clock: ManualClock
    script: dict[str, list[Outcome]] = field(default_factory=dict)
    latency_ms: int = 1
    calls: list[Call] = field(default_factory=list)
    oneway: list[tuple[str, RemotingCommand]] = field(default_factory=list)
    ends: list[tuple[str, h.EndTransactionRequestHeader, str | None]] = field(default_factory=list)
    next_offset: int = 100
    #: connections ``plain_channel`` hands out (the encoded-frame path); others: invoke_callback
    channels: dict[str, Any] = field(default_factory=dict)

    def plain_channel(self, addr: str) -> Any:
        return self.channels.get(addr)

    def _answer(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        self.calls.append(Call(addr, timeout_ms, request))
        self.clock.advance(self.latency_ms)
        outcomes = self.script.get(addr) or [0]
        outcome = outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        self.next_offset += 1
        port = int(addr.rsplit(":", 1)[1])
        ext = {
            "msgId": create_offset_msg_id(b"\x7f\x00\x00\x01", port, 4096 * self.next_offset),
            "queueId": request.ext_fields.get("e", "0"),
            "queueOffset": str(self.next_offset),
            "transactionId": "TX" + request.ext_fields.get("e", "0"),
        }
        return RemotingCommand.response(
            outcome, f"code {outcome}", ext if outcome in (0, 10) else {}
        )

    def invoke_future(
        self, addr: str, request: RemotingCommand, timeout_ms: int
    ) -> asyncio.Future[RemotingCommand]:
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(self._answer(addr, request, timeout_ms))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def invoke_callback(
        self, addr: str, request: RemotingCommand, timeout_ms: int, callback: ResponseCallback
    ) -> None:
        try:
            response = self._answer(addr, request, timeout_ms)
        except BaseException as exc:
            asyncio.get_running_loop().call_soon(callback, None, exc)
            return
        asyncio.get_running_loop().call_soon(callback, response, None)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        self.oneway.append((addr, request))

    async def end_transaction_oneway(
        self, addr: str, header: h.EndTransactionRequestHeader, remark: str | None = None
    ) -> None:
        self.ends.append((addr, header, remark))


@dataclass
class FakeInstance:
    api: FakeApi
    brokers: dict[str, str]
    client_id: str = "127.0.0.1@test"
    spawned: list[Any] = field(default_factory=list)
    #: topics whose route a failure asked to fetch again, in order
    failure_refreshes: list[str] = field(default_factory=list)

    def find_broker_addr_in_publish(self, name: str) -> str | None:
        return self.brokers.get(name)

    def refresh_route_soon(self, topic: str) -> None:
        self.failure_refreshes.append(topic)

    async def update_topic_route(self, topic: str, **kwargs: Any) -> bool:
        return False

    async def refresh_route_after_failure(self, topic: str) -> bool:
        self.failure_refreshes.append(topic)
        return False

    def spawn(self, coro: Any, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.spawned.append(task)
        return task


def install(producer: Any, clock: ManualClock, brokers: dict[str, str], queues: int = 2) -> FakeApi:
    """Give ``producer`` a fake instance and a route of ``queues`` queues per broker."""
    api = FakeApi(clock)
    producer._instance = FakeInstance(api, brokers)
    mqs = [MessageQueue("T", name, i) for name in sorted(brokers) for i in range(queues)]
    producer._publish["T"] = TopicPublishInfo("T", mqs, have_route=True, counter=0)
    return api


def run(coro_fn: Callable[[], Any]) -> Any:
    return asyncio.run(coro_fn())


def bind_loop(producer: Any) -> None:
    """What ``Producer.start`` records about its loop (call inside the running loop)."""
    import threading

    producer._loop = asyncio.get_running_loop()
    producer._loop_thread = threading.get_ident()
