"""Channel flushes held for a block (``held_flushes``/``release_flushes``: a DLedger leader's
commit answering many puts) and ``finish_on_loop`` answering at once on the loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

from ariane.broker.processors import finish_on_loop
from ariane.remoting.channel import Channel, flushes_held, held_flushes, release_flushes
from ariane.remoting.protocol.codec import encode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.transport import RecordingTransport


class _NoHandler:
    def handle_request(self, channel: Channel, request: RemotingCommand) -> None:
        raise AssertionError("no request expected")


def _channel() -> tuple[Channel, RecordingTransport]:
    channel = Channel(_NoHandler())
    transport = RecordingTransport()
    channel.connection_made(transport)  # type: ignore[arg-type]
    return channel, transport


def _answer(n: int) -> RemotingCommand:
    cmd = RemotingCommand.response(0, f"answer {n}")
    cmd.opaque = n
    return cmd


def _sent(transport: RecordingTransport) -> list[bytes]:
    return transport.sent()


def test_a_held_block_flushes_each_channel_once_at_its_end() -> None:
    async def go() -> None:
        (a, ta), (b, tb) = _channel(), _channel()
        assert held_flushes()
        assert not held_flushes()  # nested: the outer block owns the release
        for n in (1, 2):
            assert a.send(_answer(n))
            assert b.send(_answer(10 + n))
        assert a.send(_answer(3))
        assert ta.writes == []
        assert tb.writes == []
        release_flushes()
        assert _sent(ta) == [encode(_answer(1)) + encode(_answer(2)) + encode(_answer(3))]
        assert _sent(tb) == [encode(_answer(11)) + encode(_answer(12))]
        await asyncio.sleep(0)  # no flush was left scheduled: nothing more is written
        await asyncio.sleep(0)
        assert len(ta.writes) == 1
        assert len(tb.writes) == 1
        # outside a block a write waits for the next loop turn, as before
        assert a.send(_answer(4))
        assert len(ta.writes) == 1
        await asyncio.sleep(0)
        assert _sent(ta)[1:] == [encode(_answer(4))]

    asyncio.run(go())


def test_a_channel_gone_inside_the_block_writes_nothing() -> None:
    async def go() -> None:
        a, ta = _channel()
        assert held_flushes()
        assert a.send(_answer(1))
        a.connection_lost(None)
        release_flushes()
        assert ta.writes == []
        assert not a.send(_answer(2))

    asyncio.run(go())


def test_finish_on_loop_runs_at_once_on_the_loop_and_later_from_a_thread() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        seen: list[tuple[str, int]] = []

        def finish(f: Future[int]) -> None:
            seen.append((threading.current_thread().name, f.result()))

        on_loop: Future[int] = Future()
        on_loop.set_result(1)
        finish_on_loop(loop, finish, on_loop)
        assert seen == [(threading.current_thread().name, 1)]

        from_thread: Future[int] = Future()
        from_thread.add_done_callback(lambda f: finish_on_loop(loop, finish, f))
        worker = threading.Thread(target=from_thread.set_result, args=(2,), name="store")
        worker.start()
        worker.join()
        assert len(seen) == 1  # not run on the store thread
        await asyncio.sleep(0)
        assert seen == [(threading.current_thread().name, 1), (threading.current_thread().name, 2)]

    asyncio.run(go())


def test_a_block_on_one_thread_never_holds_another_threads_channel() -> None:
    """Two event loops in one process (a broker and a client in tests, say): a block held
    on one thread leaves the other thread's channel to its own loop's flush."""
    other_sent: list[list[bytes]] = []

    def other_thread() -> None:
        async def go() -> None:
            c, tc = _channel()
            assert c.send(_answer(7))
            await asyncio.sleep(0)
            other_sent.extend(tc.writes)

        asyncio.run(go())

    async def go() -> None:
        a, ta = _channel()
        assert held_flushes()
        assert a.send(_answer(1))
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert [b"".join(w) for w in other_sent] == [encode(_answer(7))]
        assert ta.writes == []
        release_flushes()
        assert _sent(ta) == [encode(_answer(1))]

    asyncio.run(go())


def test_flushes_held_releases_once_at_the_outer_block_even_on_an_error() -> None:
    async def go() -> None:
        a, ta = _channel()
        with flushes_held():
            assert a.send(_answer(1))
            with flushes_held():  # nested: the outer block owns the release
                assert a.send(_answer(2))
            assert ta.writes == []
        assert _sent(ta) == [encode(_answer(1)) + encode(_answer(2))]
        try:
            with flushes_held():
                assert a.send(_answer(3))
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        assert _sent(ta)[1:] == [encode(_answer(3))]
        assert held_flushes()  # no block was left open
        release_flushes()

    asyncio.run(go())
