"""The send pass on frames left raw (``rawsend.RawSend``: the compiled prepare reads the send
header from the frame bytes, ``_speedups_sendraw.h``) against the pass on the commands the
eager decoder makes (the reference prepare, ``send_run.prepare_run_py``).

The requests are test_send_run_native's odd but legal ones (V1 and V2, optional fields
missing, lenient numbers, non-ASCII and escaped properties, the broker's stamps, every kind the
pass declines) plus headers written with escapes orjson would not write (``\\u00e9``, ``\\/``,
upper-case hex), keys in another order, extra keys and numbers the reference reads leniently:
both give the same ready sends (every ``MessageInner`` field and type, the properties' order)
and stop at the same requests, and only the expected requests reach the reference. A read of
them through a broker with raw frames writes the same answers and CommitLog as without.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest

from ariane.broker.processors import send_run
from ariane.common import native
from ariane.common.message import HostPort
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.remoting.channel import Channel
from ariane.remoting.protocol import codec, rawsend
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.command import FLAG_ONEWAY, RemotingCommand
from ariane.store.config import FlushDiskType
from tests.support.transport import RecordingTransport
from tests.unit.broker.harness import Broker, run
from tests.unit.broker.test_send_run import _commit_log, _frames
from tests.unit.broker.test_send_run_native import (
    _broker,
    _counting_ctx,
    _prepare_all,
    _request,
    _requests,
)


def _reshaped(frame: bytes, old: bytes, new: bytes) -> bytes:
    """``frame`` with one replacement in its header (the lengths adjusted)."""
    (hl,) = struct.unpack_from(">I", frame, 4)
    header, body = frame[8 : 8 + hl].replace(old, new, 1), frame[8 + hl :]
    assert old in frame[8 : 8 + hl]
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def _odd_frames(b: Broker) -> list[bytes]:
    """Frames our encoder would not write, each one taken raw by the scan."""
    base = _request(b, "TA", {"UNIQ_KEY": "R1", "TAGS": "a"})
    opaques = iter(range(900001, 900100))

    def fresh() -> bytes:
        base.opaque = next(opaques)
        return encode(base)

    frames = [
        _reshaped(fresh(), b'"TA"', b'"T\\u0041"'),  # an escape in the topic
        _reshaped(fresh(), b"UNIQ_KEY\\u0001R1", b"UNIQ_KEY\\u0001\\u00e9\\/\\u00C9"),
        _reshaped(fresh(), b'"e":"0"', b'"e":"\\u0031"'),  # an escaped number: reference
        _reshaped(fresh(), b'"e":"0"', b'"e":"007"'),  # a leading zero (hdr_int reads it)
        _reshaped(fresh(), b'"e":"0"', b'"zz":"extra","e":"-0"'),  # an extra key
        _reshaped(fresh(), b'"h":"0"', b'"h":"2147483648"'),  # an int32 out of range
        _reshaped(fresh(), b'"g":"', b'"g":"-'),  # a negative born timestamp
        _reshaped(fresh(), b'"g":"', b'"g":"1234567890'),  # 19 digits: the reference reads it
        _reshaped(fresh(), b'"h":"0"', b'"h":"-2147483648"'),  # the int32 limit
    ]
    ext = base.ext_fields
    reordered = RemotingCommand.request(base.code, {k: ext[k] for k in reversed(ext)}, b"re")
    frames.append(encode(reordered))
    return frames


def _all_frames(b: Broker) -> list[bytes]:
    return [encode(r) for r in _requests(b)] + _odd_frames(b)


def _decode(stream: bytes, raw: bool) -> list[Any]:
    decoder = FrameDecoder()
    decoder.raw_sends = raw
    return decoder.feed(stream)


@pytest.fixture
def compiled_raw() -> None:
    if codec._FAST_FRAMES is None or send_run.prepare_run is send_run.prepare_run_py:
        pytest.skip("pure build: nothing is left raw")


@pytest.fixture
def compiled_spans(compiled_raw: None) -> None:
    if getattr(native.speedups, "RAW_SEND_SLOTS", 9) < 10:
        pytest.skip("an extension built before a RawSend's spans")


def test_raw_frames_give_the_references_ready_sends(tmp_path: Path, compiled_raw: None) -> None:
    async def main() -> None:
        b = await _broker(tmp_path)
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        stream = b"".join(_all_frames(b))
        commands = _decode(stream, False)
        raws = _decode(stream, True)
        raw_count = sum(1 for r in raws if type(r) is rawsend.RawSend)
        assert raw_count == len(raws) - 2  # all but the one-way and the ROCKETMQ-serialised
        born = HostPort(b"\x0a\x00\x00\x07", 40123)
        ctx, calls = _counting_ctx(run_proc, born)
        compiled = _prepare_all(send_run.prepare_run, ctx, raws)
        reference = _prepare_all(send_run.prepare_run_py, run_proc._prepare_ctx(born), commands)
        assert compiled == reference
        # to the reference: the three topics' first sends, the lenient numbers (two), a header
        # that does not parse, one without a required field, the topics the pass never takes
        # (two), the escaped number, the int32 out of range and the 19 digits (the one-way and
        # ROCKETMQ requests, not raw, are declined by the compiled prepare itself)
        assert len(calls) == 11
        assert all(type(r) is rawsend.RawSend for r in calls)
        assert sum(len(stop[2]) for stop in reference) >= 22
        await b.stop()

    run(main())


_SPAN = struct.Struct("=IIIBBBB")  # _speedups_sendscan.h's rs_span: k, v, vn, kn, esc, high


def _spans(r: Any) -> dict[str, str]:
    """A RawSend's extFields read through its ``spans`` (the decoder's one scan)."""
    out: dict[str, str] = {}
    src = r.source
    for k, v, vn, kn, esc, high, pad in _SPAN.iter_unpack(r.spans):
        assert r.ext_at < k < k + kn < v <= v + vn < r.ext_end
        assert pad == 0
        raw_value = src[v : v + vn]
        assert esc == (b"\\" in raw_value)
        assert high == any(ch >= 0x80 for ch in raw_value)
        out[src[k : k + kn].decode()] = orjson.loads(b'"' + raw_value + b'"')
    return out


def test_raw_frames_carry_the_scans_extfields(tmp_path: Path, compiled_spans: None) -> None:
    """The decoder's scan leaves each pair's key and value where orjson reads them (one scan
    per header: the prepare reads the fields through these spans)."""

    async def main() -> None:
        b = await _broker(tmp_path)
        raws = [r for r in _decode(b"".join(_all_frames(b)), True) if type(r) is rawsend.RawSend]
        assert len(raws) > 40
        for r in raws:
            ext = orjson.loads(r.source[r.ext_at : r.ext_end])
            assert _spans(r) == ext
            assert list(_spans(r)) == list(ext)  # in the header's order
            assert len(r.spans) == _SPAN.size * len(ext)
        await b.stop()

    run(main())


def test_a_raw_send_without_its_spans_is_read_the_same(
    tmp_path: Path, compiled_spans: None
) -> None:
    """A RawSend whose ``spans`` are missing, cut or point outside its extFields (none the
    decoder makes) is scanned again: the same ready sends and stops as with its spans."""

    async def main() -> None:
        b = await _broker(tmp_path)
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        stream = b"".join(_all_frames(b))
        born = HostPort(b"\x0a\x00\x00\x07", 40123)
        ctx, calls = _counting_ctx(run_proc, born)
        expected = _prepare_all(send_run.prepare_run, ctx, _decode(stream, True))
        expected_calls = len(calls)
        for damage in ("delete", "cut", "outside", "long"):
            raws = _decode(stream, True)
            for r in raws:
                if type(r) is not rawsend.RawSend:
                    continue
                if damage == "delete":
                    del r.spans
                elif damage == "cut":
                    r.spans = r.spans[:-3]
                elif damage == "outside":
                    r.spans = _SPAN.pack(0, 1, 2, 1, 0, 0, 0) + r.spans[_SPAN.size :]
                else:
                    r.spans = r.spans * 30  # more pairs than a plain header has
            ctx, calls = _counting_ctx(run_proc, born)
            assert _prepare_all(send_run.prepare_run, ctx, raws) == expected, damage
            assert len(calls) == expected_calls
        await b.stop()

    run(main())


async def _drive(root: Path, frames: list[bytes], raw: bool) -> tuple[bytes, bytes, int, int]:
    b = await _broker(root)
    dispatcher = b.c.remoting.dispatcher
    channel = Channel(dispatcher)
    transport = RecordingTransport(("127.0.0.1", 50000))
    channel.connection_made(transport)  # type: ignore[arg-type]
    seen: list[int] = []
    fast = codec._FAST_FRAMES
    assert fast is not None

    def frames_of(source: bytes, pos: int, limit: int, commands: list[Any], *_raw: bool) -> int:
        end = fast(source, pos, limit, commands, raw)
        seen.append(sum(1 for c in commands if type(c) is rawsend.RawSend))
        return end

    codec._FAST_FRAMES = frames_of
    try:
        for part in (frames[:20], frames[20:]):  # two reads (the second after a decline)
            dispatcher.raw_sends = raw
            channel.data_received(b"".join(part))
    finally:
        codec._FAST_FRAMES = fast
    b.c.store.wait_dispatched()
    run_proc = b.c.send_processor.run
    assert run_proc is not None
    out = (transport.data, _commit_log(b), run_proc.handled, max(seen))
    await b.stop()
    return out


def test_a_read_of_raw_frames_writes_the_references_bytes(
    tmp_path: Path, compiled_raw: None
) -> None:
    async def main() -> None:
        builder = await _broker(tmp_path / "build")
        # not the sends the broker answers at random (a queue picked for queue id -1, a
        # UNIQ_KEY made for a send without one): both brokers must see the same
        frames = []
        for frame in _all_frames(builder):
            cmd = FrameDecoder().feed(frame)[0]
            ext = cmd.ext_fields
            if ext.get("e", ext.get("queueId")) != "-1" and "UNIQ_KEY" in (
                ext.get("i", ext.get("properties")) or ""
            ):
                frames.append(frame)
        await builder.stop()
        raw = await _drive(tmp_path / "raw", frames, True)
        eager = await _drive(tmp_path / "eager", frames, False)
        assert raw[0] == eager[0]  # every answer, byte for byte
        assert raw[1] == eager[1]  # every record
        assert raw[2] == eager[2] > 25
        assert raw[3] > 15  # the raw frames were taken raw
        assert eager[3] == 0
        oneway = sum(1 for f in frames if FrameDecoder().feed(f)[0].flag & FLAG_ONEWAY)
        assert len(_frames(raw[0])) == len(frames) - oneway

    run(main())


def test_the_pass_turns_raw_frames_on_only_while_it_takes_sends(tmp_path: Path) -> None:
    async def main() -> None:
        b = await _broker(tmp_path)
        dispatcher = b.c.remoting.dispatcher
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        assert dispatcher.raw_sends is False
        channel = Channel(dispatcher)
        transport = RecordingTransport(("127.0.0.1", 50000))
        channel.connection_made(transport)  # type: ignore[arg-type]
        frames = _all_frames(b)[:4]  # four plain sends
        for i, frame in enumerate(frames):
            assert FrameDecoder().feed(frame)[0].opaque == -3 + i * 7919
        channel.data_received(b"".join(frames))
        assert dispatcher.raw_sends is True
        run_proc._enabled = lambda: False  # type: ignore[method-assign]  # e.g. SYNC_MASTER
        channel.data_received(b"".join(frames))
        assert dispatcher.raw_sends is False
        handled = run_proc.handled
        channel.data_received(b"".join(frames))  # raw frames no more, answered one by one
        assert run_proc.handled == handled
        assert transport.data.count(b'"code":0,') == 12
        await b.stop()

    run(main())


def test_sync_flush_sends_are_answered_from_raw_frames(tmp_path: Path, compiled_raw: None) -> None:
    """SYNC_FLUSH takes raw frames too: each send keeps its RawSend until the group commit's
    answer, a SUCCESS frame written from its opaque (no command decoded)."""

    async def main() -> None:
        b = await Broker(tmp_path, store={"flush_disk_type": FlushDiskType.SYNC_FLUSH}).start()
        dispatcher = b.c.remoting.dispatcher
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        channel = Channel(dispatcher)
        transport = RecordingTransport(("127.0.0.1", 50000))
        channel.connection_made(transport)  # type: ignore[arg-type]
        b.c.topics.put(TopicConfig("TA", 4, 4, PERM_READ | PERM_WRITE, "SINGLE_TAG"))
        reads: dict[int, list[bytes]] = {700: [], 800: []}
        for base, frames in reads.items():
            for i in range(4):
                request = _request(b, "TA", {"UNIQ_KEY": f"S{base + i}"})
                request.opaque = base + i
                frames.append(encode(request))
        channel.data_received(b"".join(reads[700]))  # decoded: the pass turns raw frames on
        assert dispatcher.raw_sends is True
        decoded = rawsend.RawSend.command
        calls = []

        def counting(self: rawsend.RawSend) -> Any:
            calls.append(self.opaque)
            return decoded(self)

        rawsend.RawSend.command = counting  # type: ignore[method-assign]
        try:
            channel.data_received(b"".join(reads[800]))  # raw, answered after the group commit
            for _ in range(10_000):
                if len(_frames(transport.data)) == 8:
                    break
                await asyncio.sleep(0.001)
        finally:
            rawsend.RawSend.command = decoded  # type: ignore[method-assign]
        assert run_proc.handled == 8
        # only the run's first send is decoded (the reference prepare checks a topic new to the
        # run); the group commit's answers are written from the raw frames
        assert calls == [800]
        answers = [FrameDecoder().feed(f)[0] for f in _frames(transport.data).values()]
        assert [a.opaque for a in answers] == [700, 701, 702, 703, 800, 801, 802, 803]
        assert [a.code for a in answers] == [0] * 8
        assert [a.ext_fields["transactionId"] for a in answers] == [f"S{a.opaque}" for a in answers]
        offsets = [int(a.ext_fields["queueOffset"]) for a in answers]
        assert sorted(offsets) == sorted(set(offsets))  # eight records, no offset twice
        await b.stop()

    run(main())
