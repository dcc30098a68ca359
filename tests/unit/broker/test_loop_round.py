"""A light ASYNC_FLUSH send answers the pull held on its queue without the reput thread
(issue 18, latency at 2,000 msg/s; ``broker/loop_round.py``): the send claims the next round,
its put does not wake the reput thread, the loop runs the round in the turn right after the
read (the producer's acknowledgement written first) and the arrival, reported on the loop's
own thread, answers the held pull in that round.

A real broker on a real store, driven through a real ``Channel`` on a recording transport; the
reput thread is stopped first, so only the loop can dispatch (no race, no sleep: one loop turn
is one ``asyncio.sleep(0)``)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ariane.common.properties import encode_properties
from ariane.common.record import decode_records
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.transport import RecordingTransport
from tests.unit.broker.harness import Broker, FakeChannel, run


def _send(b: Broker, queue_id: int, body: bytes, opaque: int) -> bytes:
    props = encode_properties({"UNIQ_KEY": f"U{opaque}"})
    header = b.send_header("TL", queue_id, props).to_v2()
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)
    request.opaque = opaque
    return encode(request)


async def _broker(root: Path) -> tuple[Broker, Channel, RecordingTransport]:
    b = await Broker(root).start()
    b.c.topics.put(TopicConfig("TL", 2, 2, PERM_READ | PERM_WRITE))
    assert b.c.send_processor.run is not None  # the send pass is on
    assert b.c.send_processor.loop_round is not None  # ASYNC_FLUSH
    b.c.store.reput.stop()  # from here on only the loop dispatches
    producer = Channel(b.c.remoting.dispatcher)
    transport = RecordingTransport(("127.0.0.1", 50000))
    producer.connection_made(transport)  # type: ignore[arg-type]
    return b, producer, transport


async def _hold(b: Broker, consumer: FakeChannel, queue_id: int, offset: int = 0) -> None:
    pull = b.pull_header("TL", queue_id=queue_id, offset=offset)
    await b.call(RequestCode.PULL_MESSAGE, pull, channel=consumer, expect_answer=False)


def _acks(transport: RecordingTransport) -> list[tuple[int, int]]:
    return [(c.opaque, c.code) for c in FrameDecoder().feed(transport.data)]


@pytest.mark.parametrize("sends_per_read", [1, 2])
def test_the_held_pull_is_answered_in_the_loop_turn_after_the_read(
    tmp_path: Path, sends_per_read: int
) -> None:
    """One send in a read goes the per-request way (``SendMessageProcessor.send``, the
    compiled ``put_message``), two take the send pass (``SendRun``): the acknowledgements are
    written at the read's end, the held pull is answered by the next loop turn, with exactly
    the messages at their queue offsets, and the reput thread is not woken."""

    async def main() -> None:
        b, producer, transport = await _broker(tmp_path)
        reput = b.c.store.reput
        reput.idle = True  # what the idle reput thread shows at a light load
        woken: list[int] = []
        reput.wakeup = lambda: woken.append(1)  # type: ignore[method-assign]
        consumer = FakeChannel("127.0.0.1:50001")
        await _hold(b, consumer, 1)
        assert b.c.hold.held_count == 1
        bodies = [b"m%d" % i for i in range(sends_per_read)]
        run_ = b.c.send_processor.run
        assert run_ is not None
        handled = run_.handled
        producer.data_received(b"".join(_send(b, 1, m, 7 + i) for i, m in enumerate(bodies)))
        assert run_.handled - handled == (0 if sends_per_read == 1 else 2)
        # the read answered its sends, once each, and dispatched nothing yet
        assert _acks(transport) == [(7 + i, ResponseCode.SUCCESS) for i in range(sends_per_read)]
        assert consumer.sent == []
        assert reput.claimed
        assert woken == []  # the put did not wake the reput thread
        await asyncio.sleep(0)  # one loop turn
        (answer,) = consumer.sent
        assert answer.code == ResponseCode.SUCCESS
        got = [(m.queue_id, m.queue_offset, m.body) for m in decode_records(answer.body or b"")]
        assert got == [(1, i, m) for i, m in enumerate(bodies)]
        assert b.c.hold.held_count == 0
        assert reput.reput_from_offset == b.c.store.commit_log.max_offset
        assert not b.c.store.commit_log.pending
        assert not reput.claimed
        assert woken == []
        assert b.c.send_processor.loop_round.rounds == 1  # type: ignore[union-attr]
        await b.stop()

    run(main())


def test_no_claim_when_nobody_waits_on_the_queue_or_under_load(tmp_path: Path) -> None:
    """The reput thread keeps the dispatch when no pull is held on the put's queue, and when
    it is busy (not idle: its rounds gather batches): woken as before, no round on the loop."""

    async def main() -> None:
        b, producer, _transport = await _broker(tmp_path)
        reput = b.c.store.reput
        woken: list[int] = []
        reput.wakeup = lambda: woken.append(1)  # type: ignore[method-assign]
        loop_round = b.c.send_processor.loop_round
        assert loop_round is not None
        consumer = FakeChannel("127.0.0.1:50001")
        await _hold(b, consumer, 1)
        reput.idle = True
        producer.data_received(_send(b, 0, b"q0", 7) + _send(b, 0, b"q0b", 8))  # send pass
        producer.data_received(_send(b, 0, b"q0c", 9))  # per-request
        assert not reput.claimed
        assert woken == [1, 1]  # the idle thread is woken as before
        reput.idle = False
        producer.data_received(_send(b, 1, b"q1", 10))  # queue 1, but the thread is busy
        assert not reput.claimed
        await asyncio.sleep(0)
        assert loop_round.rounds == 0
        assert consumer.sent == []  # left to the (stopped) thread
        assert len(b.c.store.commit_log.pending) == 4
        await b.stop()

    run(main())


def test_a_round_running_elsewhere_keeps_the_records_and_is_woken(tmp_path: Path) -> None:
    """When the loop's round finds a round running on another thread (``reput_here``
    declines), nothing is dispatched twice or skipped: that thread is woken and its round
    dispatches the records, once, and reports them through the relay."""

    async def main() -> None:
        b, producer, _transport = await _broker(tmp_path)
        reput = b.c.store.reput
        woken: list[int] = []
        reput.wakeup = lambda: woken.append(1)  # type: ignore[method-assign]
        consumer = FakeChannel("127.0.0.1:50001")
        await _hold(b, consumer, 1)
        reput.idle = True
        producer.data_received(_send(b, 1, b"m0", 7))
        assert reput.claimed
        assert woken == []
        with reput._round:  # the reput thread's round is running
            await asyncio.sleep(0)  # the loop's round declines
        assert not reput.claimed
        assert woken == [1]
        assert consumer.sent == []
        assert len(b.c.store.commit_log.pending) == 1
        other = threading.Thread(target=reput.do_reput)  # the woken thread's round
        other.start()
        other.join()
        assert not b.c.store.commit_log.pending
        assert reput.reput_from_offset == b.c.store.commit_log.max_offset
        for _ in range(10):  # the arrival comes through the relay
            if consumer.sent:
                break
            await asyncio.sleep(0)
        (answer,) = consumer.sent
        assert [(m.queue_offset, m.body) for m in decode_records(answer.body or b"")] == [
            (0, b"m0")
        ]
        await b.stop()

    run(main())


def test_a_put_after_the_claimed_round_began_wakes_the_thread(tmp_path: Path) -> None:
    """The claim is cleared before the loop's round: a put made meanwhile (another thread's)
    that the round does not see wakes the idle thread instead of waiting for its timeout."""

    async def main() -> None:
        b, producer, _transport = await _broker(tmp_path)
        reput = b.c.store.reput
        woken: list[bool] = []
        reput.wakeup = lambda: woken.append(reput.claimed)  # type: ignore[method-assign]
        consumer = FakeChannel("127.0.0.1:50001")
        await _hold(b, consumer, 1)
        reput.idle = True
        producer.data_received(_send(b, 1, b"m0", 7))
        assert reput.claimed
        here = reput.reput_here
        seen: list[bool] = []

        def round_seeing_a_put() -> bool:
            seen.append(reput.claimed)
            producer.data_received(_send(b, 0, b"late", 8))  # queue 0: nobody holds a pull
            return here()

        reput.reput_here = round_seeing_a_put  # type: ignore[method-assign]
        await asyncio.sleep(0)
        assert seen == [False]
        assert woken == [False]  # the late put woke the thread (unclaimed by then)
        assert not b.c.store.commit_log.pending  # the round took both records here
        assert len(consumer.sent) == 1
        await b.stop()

    run(main())


def test_an_arrival_on_the_loop_thread_is_handled_at_once(tmp_path: Path) -> None:
    """Reported from another thread an arrival waits for the loop (the relay); reported on
    the loop's own thread it wakes the held pull before ``arriving`` returns."""

    async def main() -> None:
        b, producer, _transport = await _broker(tmp_path)
        hold = b.c.hold
        consumer = FakeChannel("127.0.0.1:50001")
        await _hold(b, consumer, 1)
        b.c.store.reput.idle = False  # the send leaves the dispatch to the (stopped) thread
        producer.data_received(_send(b, 1, b"m0", 7))
        b.c.store.reput.do_reput()  # dispatched, reported on this (the loop's) thread
        assert len(consumer.sent) == 1  # before this call returned
        assert not hold._arrivals
        await _hold(b, consumer, 1, offset=1)
        producer.data_received(_send(b, 1, b"m1", 8))
        other = threading.Thread(target=b.c.store.reput.do_reput)  # reported from there
        other.start()
        other.join()
        assert len(consumer.sent) == 1  # queued for the loop
        assert len(hold._arrivals) == 1
        for _ in range(10):
            if len(consumer.sent) == 2:
                break
            await asyncio.sleep(0)
        assert [m.body for m in decode_records(consumer.sent[1].body or b"")] == [b"m1"]
        await b.stop()

    run(main())
