"""Run processors (``Dispatcher.register_run_processor``, ``Channel.data_received``): which
requests of a read form runs, in what order everything is handled, and which hooks turn runs
off."""

from __future__ import annotations

import asyncio

from ariane.remoting.channel import Channel
from ariane.remoting.dispatch import Dispatcher, RequestContext
from ariane.remoting.metrics import RpcMetrics
from ariane.remoting.protocol.codec import encode
from ariane.remoting.protocol.command import FLAG_ONEWAY, RemotingCommand
from tests.support.transport import RecordingTransport


class _Observer:
    def before_request(self, channel: Channel, request: RemotingCommand) -> None:
        return None

    def after_response(self, channel: Channel, request: RemotingCommand, response: object) -> None:
        pass


def _setup(log: list[tuple[str, ...]]) -> Dispatcher:
    dispatcher = Dispatcher()

    def single(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        log.append(("one", str(request.code), str(request.opaque)))
        return RemotingCommand.response(0)

    def run_a(channel: Channel, requests: list[RemotingCommand]) -> None:
        log.append(("a", *(f"{r.code}:{r.opaque}" for r in requests)))

    def run_b(channel: Channel, requests: list[RemotingCommand]) -> None:
        log.append(("b", *(f"{r.code}:{r.opaque}" for r in requests)))

    for code in (1, 2, 3, 4):
        dispatcher.register_processor(code, single)
    dispatcher.register_run_processor((1, 2), run_a)
    dispatcher.register_run_processor((3,), run_b)
    return dispatcher


def _feed(dispatcher: Dispatcher, codes: list[int], oneway: frozenset[int] = frozenset()) -> bytes:
    async def main() -> bytes:
        channel = Channel(dispatcher)
        transport = RecordingTransport()
        channel.connection_made(transport)  # type: ignore[arg-type]
        frames = []
        for i, code in enumerate(codes):
            request = RemotingCommand.request(code)
            request.opaque = i
            if i in oneway:
                request.flag |= FLAG_ONEWAY
            frames.append(encode(request))
        channel.data_received(b"".join(frames))
        return transport.data

    return asyncio.run(main())


def test_consecutive_run_codes_form_runs_in_arrival_order() -> None:
    log: list[tuple[str, ...]] = []
    dispatcher = _setup(log)
    assert dispatcher.run_codes == frozenset({1, 2, 3})
    _feed(dispatcher, [1, 2, 1, 3, 3, 4, 2, 4, 1, 1])
    assert log == [
        ("a", "1:0", "2:1", "1:2"),
        ("b", "3:3", "3:4"),
        ("one", "4", "5"),
        ("one", "2", "6"),  # a run of one is a plain request
        ("one", "4", "7"),
        ("a", "1:8", "1:9"),
    ]


def test_hooks_without_ignores_turn_runs_off() -> None:
    log: list[tuple[str, ...]] = []
    dispatcher = _setup(log)
    dispatcher.register_hook(RpcMetrics(timing=False))  # looks at none of these codes
    assert dispatcher.run_codes == frozenset({1, 2, 3})
    dispatcher.register_hook(_Observer())  # type: ignore[arg-type]
    assert dispatcher.run_codes == frozenset()
    _feed(dispatcher, [1, 2, 3])
    assert log == [("one", "1", "0"), ("one", "2", "1"), ("one", "3", "2")]


def test_timing_metrics_turn_runs_off() -> None:
    log: list[tuple[str, ...]] = []
    dispatcher = _setup(log)
    dispatcher.register_hook(RpcMetrics(timing=True))
    assert dispatcher.run_codes == frozenset()
    dispatcher.register_run_processor((4,), lambda channel, requests: None)
    assert dispatcher.run_codes == frozenset()


def test_answers_of_plain_requests_between_runs_are_written() -> None:
    log: list[tuple[str, ...]] = []
    dispatcher = _setup(log)
    data = _feed(dispatcher, [4, 1, 1, 4], oneway=frozenset({3}))
    assert log == [("one", "4", "0"), ("a", "1:1", "1:2"), ("one", "4", "3")]
    assert data == encode(_answer(0))  # the runs answer nothing here; one-way 3 gets none


def _answer(opaque: int) -> RemotingCommand:
    response = RemotingCommand.response(0)
    response.opaque = opaque
    return response


def _send_frames(count: int, oneway_at: int = -1) -> bytes:
    """``count`` plain SEND_MESSAGE_V2 frames (taken raw by the compiled decoder)."""
    from ariane.bench import _micro_cases as mc

    frames = []
    for i in range(count):
        request = mc.send_request()
        request.opaque = 1000 + i
        if i == oneway_at:
            request.flag |= FLAG_ONEWAY  # flag 1: not raw, yet of a run code
        frames.append(encode(request))
    return b"".join(frames)


def _raw_log(data: bytes, loop_only: bool, inflight: int = 0) -> list[tuple[str, ...]]:
    """What the run processor of SEND_MESSAGE(_V2) and the plain processor saw of one read."""
    import ariane.remoting.channel as channel_module
    from ariane.remoting.protocol.rawsend import RAW_CLASS

    log: list[tuple[str, ...]] = []
    dispatcher = Dispatcher()
    dispatcher.raw_sends = True

    def single(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        log.append(("one", str(request.code), str(request.opaque)))
        return RemotingCommand.response(0)

    def run_sends(channel: Channel, requests: list[RemotingCommand]) -> None:
        log.append(("run", *(f"{r.__class__ is RAW_CLASS}:{r.opaque}" for r in requests)))

    for code in (10, 310):
        dispatcher.register_processor(code, single)
    dispatcher.register_run_processor((10, 310), run_sends)
    saved = channel_module._ONLY_RAW

    async def main() -> None:
        channel = Channel(dispatcher, max_inflight=3)
        channel.connection_made(RecordingTransport())  # type: ignore[arg-type]
        channel._inflight = inflight
        channel.data_received(data)

    if loop_only:
        channel_module._ONLY_RAW = set()  # never all raw: the per-command loop
    try:
        asyncio.run(main())
    finally:
        channel_module._ONLY_RAW = saved
    return log


def test_a_read_of_raw_sends_is_the_run_the_loop_makes() -> None:
    """A read whose frames are all plain single sends (RawSends in the compiled build) is
    handed as one run without the per-command loop: the same run, in the same order, as the
    loop gives; a read with another frame, or a channel over its in-flight limit, takes the
    loop."""
    from ariane.remoting.protocol import codec

    for data, inflight in (
        (_send_frames(40), 0),
        (_send_frames(1), 0),
        (_send_frames(12, oneway_at=5), 0),
        (_send_frames(12), 3),
    ):
        fast, loop = _raw_log(data, False, inflight), _raw_log(data, True, inflight)
        assert fast == loop
    all_raw = _raw_log(_send_frames(40), False)
    assert len(all_raw) == 1
    assert all_raw[0][0] == "run"
    assert len(all_raw[0]) == 41
    if codec._FAST_FRAMES is not None and codec._RAW_FRAMES:
        assert all(item.startswith("True:") for item in all_raw[0][1:])
    assert _raw_log(_send_frames(1), False) == [("one", "310", "1000")]
    mixed = _raw_log(_send_frames(12, oneway_at=5), False)
    assert len(mixed) == 1
    assert len(mixed[0]) == 13  # the one-way send is in the run too, not raw
