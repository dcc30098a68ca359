"""A minimal transactional producer built on Ariane's own remoting client (integration tests).

It registers a producer group by heartbeat (every 200 ms, so it re-registers after a broker
restart), sends half messages, ends transactions and answers the broker's
CHECK_TRANSACTION_STATE with whatever ``decide(uniq, attempt)`` says (None: stay silent).
Everything runs on an event loop in a background thread; the methods are blocking.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import encode_properties
from ariane.common.record import decode_record
from ariane.errors import ArianeError
from ariane.remoting.client import RemotingClient
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import HeartbeatData, ProducerData
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["Check", "FakeTransactionProducer", "HalfMessage"]

T = TypeVar("T")

#: ``decide(uniq, attempt)`` -> commitOrRollback value (0, 8, 12) or None for no answer.
Decide = Callable[[str, int], "int | None"]


@dataclass(frozen=True)
class HalfMessage:
    """What the send answer tells about a half message."""

    uniq: str
    queue_offset: int
    phys: int


@dataclass(frozen=True)
class Check:
    """One CHECK_TRANSACTION_STATE received."""

    uniq: str
    body: bytes
    check_times: int


class FakeTransactionProducer:
    """A transactional producer of ``group`` talking to one broker.

    Args:
        broker_addr: ``host:port``.
        group: the producer group.
        decide: the answer to each check-back.
    """

    def __init__(self, broker_addr: str, group: str, decide: Decide) -> None:
        self.addr = broker_addr
        self.group = group
        self.decide = decide
        self.checks: list[Check] = []
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._client: RemotingClient | None = None
        self._beat: asyncio.Task[None] | None = None

    def start(self) -> FakeTransactionProducer:
        self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout_s)

    async def _start(self) -> None:
        self._client = RemotingClient()
        self._client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)
        await self._heartbeat()
        self._beat = asyncio.get_running_loop().create_task(self._beat_loop())

    async def _stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
        if self._client is not None:
            await self._client.close()

    async def _heartbeat(self) -> None:
        assert self._client is not None
        data = HeartbeatData(f"tx-{self.group}", [ProducerData(self.group)], [])
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, data.encode())
        await self._client.invoke(self.addr, request, 3000)

    async def _beat_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            try:
                await self._heartbeat()
            except ArianeError:
                continue  # the broker is restarting

    # -- producer side ---------------------------------------------------------------------

    def send_half(self, topic: str, body: bytes, **props: str) -> HalfMessage:
        """Send one transactional (half) message."""
        return self._call(self._send_half(topic, body, props))

    async def _send_half(self, topic: str, body: bytes, props: dict[str, str]) -> HalfMessage:
        assert self._client is not None
        header = h.SendMessageRequestHeaderV2(
            producer_group=self.group, topic=topic, default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=0, sys_flag=0x4,
            born_timestamp=time.time_ns() // 1_000_000, flag=0,
            properties=encode_properties({"TRAN_MSG": "true", "PGROUP": self.group, **props}),
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)
        r = await self._client.invoke(self.addr, request, 5000)
        assert r.code == 0, r.remark
        return HalfMessage(
            r.ext_fields["transactionId"],
            int(r.ext_fields["queueOffset"]),
            decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset,
        )

    def end(self, half: HalfMessage, kind: int) -> RemotingCommand:
        """END_TRANSACTION (sent with an answer, to see what the broker said)."""
        return self._call(self._end(half.uniq, half.queue_offset, half.phys, kind, False, True))

    async def _end(
        self, uniq: str, queue_offset: int, phys: int, kind: int, from_check: bool, wait: bool
    ) -> RemotingCommand:
        assert self._client is not None
        header = h.EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=queue_offset,
            commit_log_offset=phys, commit_or_rollback=kind, msg_id=uniq,
            transaction_id=uniq, from_transaction_check=from_check,
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        if wait:
            return await self._client.invoke(self.addr, request, 5000)
        await self._client.invoke_oneway(self.addr, request.mark_oneway())
        return request

    # -- check-backs -----------------------------------------------------------------------

    def _on_check(self, ctx: RequestContext, request: RemotingCommand) -> None:
        header = h.CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        msg, _ = decode_record(request.body or b"")
        uniq = header.transaction_id or msg.properties.get("UNIQ_KEY", "")
        with self._lock:
            attempt = self._attempts[uniq] = self._attempts.get(uniq, 0) + 1
            times = int(msg.properties.get("TRANSACTION_CHECK_TIMES", "0"))
            self.checks.append(Check(uniq, msg.body, times))
        kind = self.decide(uniq, attempt)
        if kind is not None:
            self._loop.create_task(
                self._answer(uniq, header.tran_state_table_offset, header.commit_log_offset, kind)
            )
        return None

    async def _answer(self, uniq: str, queue_offset: int, phys: int, kind: int) -> None:
        try:
            await self._end(uniq, queue_offset, phys, kind, True, False)
        except ArianeError:
            pass  # the broker went away: it will ask again

    def checks_of(self, uniq: str) -> list[Check]:
        with self._lock:
            return [c for c in self.checks if c.uniq == uniq]
