"""Client registry, queue locks and the pull hold service, without sockets or sleeps."""

from __future__ import annotations

import asyncio
from typing import Any

from ariane.broker.client_manager import ClientManager
from ariane.broker.filters import FilterFactory
from ariane.broker.long_polling import PullRequestHoldService
from ariane.broker.rebalance_lock import RebalanceLockManager
from ariane.common.clock import ManualClock
from ariane.common.hashing import tags_code
from ariane.remoting.protocol.client_bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from ariane.remoting.protocol.command import LanguageCode, RemotingCommand
from tests.unit.broker.harness import FakeChannel


def manager(clock: ManualClock) -> tuple[ClientManager, list[tuple[str, list[int]]]]:
    notes: list[tuple[str, list[int]]] = []
    m = ClientManager(clock, lambda g, chs: notes.append((g, [c.id for c in chs])), 120.0)
    return m, notes


def register(m: ClientManager, ch: FakeChannel, cid: str, topics: tuple[str, ...]) -> bool:
    info = m.client_info(ch, cid, LanguageCode.CPP, 400)  # type: ignore[arg-type]
    subs = [SubscriptionData.build(t, "*", sub_version=1) for t in topics]
    return m.register_consumer(
        "G", info, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, subs,
    )  # fmt: skip


def test_consumer_changes_notify_the_group() -> None:
    clock = ManualClock()
    m, notes = manager(clock)
    a, b = FakeChannel(), FakeChannel()
    assert register(m, a, "a", ("T",))
    assert not register(m, a, "a", ("T",))
    assert register(m, b, "b", ("T",))
    assert register(m, a, "a", ("T", "U"))  # a new topic
    assert notes == [("G", [a.id]), ("G", [a.id, b.id]), ("G", [a.id, b.id])]
    assert m.consumer_ids("G") == ["a", "b"]
    assert m.groups_subscribing("U") == {"G"}
    m.on_channel_closed(b)  # type: ignore[arg-type]
    assert notes[-1] == ("G", [a.id])
    assert m.unregister_consumer("G", a)  # type: ignore[arg-type]
    assert m.consumer_group("G") is None


def test_silent_clients_expire() -> None:
    clock = ManualClock()
    m, _ = manager(clock)
    a, b = FakeChannel(), FakeChannel()
    register(m, a, "a", ("T",))
    m.register_producer("P", m.client_info(b, "b", LanguageCode.JAVA, 1))  # type: ignore[arg-type]
    clock.advance(60_000)
    register(m, a, "a", ("T",))
    clock.advance(61_000)
    expired = m.scan_expired()
    assert [c.id for c in expired] == [b.id]
    assert not b.is_active
    assert a.is_active
    assert "P" not in m.producers
    assert m.find_producer_channel("P") is None


def test_locks_expire_and_only_the_holder_unlocks() -> None:
    clock = ManualClock()
    locks = RebalanceLockManager(clock)
    mq = MessageQueue("T", "b", 0)
    assert locks.try_lock_batch("G", [mq], "a") == [mq]
    assert locks.try_lock_batch("G", [mq], "b") == []
    locks.unlock_batch("G", [mq], "b")
    assert locks.is_locked("G", mq, "a")
    clock.advance(30_000)
    assert locks.try_lock_batch("G", [mq], "a") == [mq]  # refreshed
    clock.advance(59_000)
    assert locks.try_lock_batch("G", [mq], "b") == []
    clock.advance(2_000)
    assert locks.group_has_locks("G") is False
    assert locks.try_lock_batch("G", [mq], "b") == [mq]
    locks.unlock_batch("G", [mq], "b")
    assert locks.holder("G", mq) is None


class Ctx:
    def __init__(self, channel: FakeChannel) -> None:
        self.channel = channel
        self.responses: list[RemotingCommand] = []

    def send_response(self, response: RemotingCommand) -> bool:
        self.responses.append(response)
        return True


def hold_service(max_offsets: dict[tuple[str, int], int], **kwargs: Any) -> PullRequestHoldService:
    def execute(ctx: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response(0, "re-run")

    return PullRequestHoldService(
        execute, lambda t, q: max_offsets.get((t, q), 0), check_interval_s=3600, **kwargs
    )


def test_hold_wakes_on_matching_arrival_only() -> None:
    async def main() -> None:
        offsets = {("T", 0): 5}
        svc = hold_service(offsets)
        svc.start()
        ctx = Ctx(FakeChannel())
        flt = FilterFactory().build("A", None)
        assert svc.suspend(ctx, RemotingCommand.request(11), "T", 0, 5, flt, 15000)  # type: ignore[arg-type]
        offsets[("T", 0)] = 6
        svc.notify_message_arriving("T", 0, 6, tags_code("B"))
        assert not ctx.responses
        assert svc.held_count == 1
        svc.notify_message_arriving("T", 1, 6, tags_code("A"))
        assert not ctx.responses
        svc.notify_message_arriving("T", 0, 6, tags_code("A"))
        assert [r.remark for r in ctx.responses] == ["re-run"]
        assert svc.held_count == 0
        await svc.stop()

    asyncio.run(main())


def test_hold_answers_at_once_when_the_queue_grew_meanwhile() -> None:
    async def main() -> None:
        svc = hold_service({("T", 0): 7})
        svc.start()
        ctx = Ctx(FakeChannel())
        svc.suspend(
            ctx, RemotingCommand.request(11), "T", 0, 5, FilterFactory().build("*", None), 15000
        )  # type: ignore[arg-type]
        assert len(ctx.responses) == 1
        assert svc.held_count == 0
        await svc.stop()

    asyncio.run(main())


def test_hold_timeout_check_and_closed_connections() -> None:
    async def main() -> None:
        offsets = {("T", 0): 5}
        svc = hold_service(offsets, max_per_channel=2)
        svc.start()
        ch = FakeChannel()
        ctxs = [Ctx(ch) for _ in range(3)]
        held = [
            svc.suspend(
                c, RemotingCommand.request(11), "T", 0, 5, FilterFactory().build("*", None), 15000
            )  # type: ignore[arg-type]
            for c in ctxs
        ]
        assert held == [True, True, False]  # per-connection cap
        (first, *_) = svc.table[("T", 0)]
        svc._timed_out(first)
        assert len(ctxs[0].responses) == 1
        assert svc.held_count == 1
        svc.on_channel_closed(ch)  # type: ignore[arg-type]
        assert svc.held_count == 0
        assert not svc._by_channel
        other = Ctx(FakeChannel())
        svc.suspend(
            other, RemotingCommand.request(11), "T", 0, 5, FilterFactory().build("A", None), 15000
        )  # type: ignore[arg-type]
        offsets[("T", 0)] = 9
        svc.check_all()  # the periodic check wakes whatever grew, filter or not
        assert len(other.responses) == 1
        await svc.stop()

    asyncio.run(main())


def test_arrivals_from_another_thread_reach_the_loop() -> None:
    async def main() -> None:
        offsets = {("T", 0): 5}
        svc = hold_service(offsets)
        svc.start()
        ctx = Ctx(FakeChannel())
        svc.suspend(
            ctx, RemotingCommand.request(11), "T", 0, 5, FilterFactory().build("*", None), 15000
        )  # type: ignore[arg-type]
        svc.arriving("U", 0, 1, 0, 0, None)  # nobody waits on U: nothing queued
        assert not svc._arrivals
        offsets[("T", 0)] = 6
        await asyncio.to_thread(svc.arriving, "T", 0, 6, 0, 0, None)
        for _ in range(100):
            if ctx.responses:
                break
            await asyncio.sleep(0)
        assert len(ctx.responses) == 1
        await svc.stop()

    asyncio.run(main())


def test_short_polling_ignores_arrivals() -> None:
    async def main() -> None:
        offsets = {("T", 0): 5}
        svc = hold_service(offsets, long_polling=False, short_polling_ms=1000)
        svc.start()
        assert svc.check_interval_s == 1.0
        ctx = Ctx(FakeChannel())
        svc.suspend(
            ctx, RemotingCommand.request(11), "T", 0, 5, FilterFactory().build("*", None), 15000
        )  # type: ignore[arg-type]
        svc.arriving("T", 0, 6, 0, 0, None)
        assert not svc._arrivals
        (held,) = svc.table[("T", 0)]
        assert held.timer is not None
        assert held.timer.when() - asyncio.get_running_loop().time() <= 1.0
        await svc.stop()

    asyncio.run(main())


class _ChannelCtx:
    """A held pull's context on a real channel: answers go through ``Channel.send``."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel

    def send_response(self, response: RemotingCommand) -> bool:
        return bool(self.channel.send(response))


def test_an_arrival_writes_the_woken_answers_without_waiting_for_the_loop_turn() -> None:
    """Issue 18 (latency): the answers of the pulls an arrival wakes are written before the
    arrival's callback returns, one write per connection, not at the next loop turn (whose
    poll lets the dispatch thread take the GIL first)."""
    from ariane.remoting.channel import Channel
    from tests.support.transport import RecordingTransport
    from tests.unit.remoting.test_held_flushes import _NoHandler

    async def main() -> None:
        offsets = {("T", 0): 5}
        svc = hold_service(offsets)
        svc.start()
        channel = Channel(_NoHandler())
        transport = RecordingTransport()
        channel.connection_made(transport)  # type: ignore[arg-type]
        flt = FilterFactory().build("*", None)
        for _ in range(2):  # two pulls of one connection held on the queue
            ctx = _ChannelCtx(channel)
            assert svc.suspend(ctx, RemotingCommand.request(11), "T", 0, 5, flt, 15000)  # type: ignore[arg-type]
        assert svc.held_count == 2
        assert transport.writes == []
        offsets[("T", 0)] = 6
        svc.notify_message_arriving("T", 0, 6, tags_code("A"))
        assert svc.held_count == 0
        assert len(transport.writes) == 1  # both answers, at once, in one write
        await asyncio.sleep(0)
        assert len(transport.writes) == 1  # nothing left for the loop turn
        await svc.stop()

    asyncio.run(main())
