"""``FrameDecoder`` with the compiled loop over a read's frames (``_speedups.decode_json_frames``)
against the decoder without it (the frame-at-a-time loop, and the pure decoder).

A read carries many frames; the compiled loop decodes the plain ones in one call and stops at
any other (a frame the compiled decoder hands back, an incomplete one, a bad length), where the
Python loop takes over. For streams mixing plain frames, frames only the pure decoder reads
(another serialisation type, numbers in extFields), a malformed frame and a bad length, fed
whole and cut at every byte, the decoder gives exactly the commands (every field, every body)
and the same error with the same good commands before it as the decoder without the compiled
loop and as the pure build. Runs in both builds (in PURE_TESTS).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.remoting.protocol import codec
from ariane.remoting.protocol.codec import FrameDecodeError, FrameDecoder, encode
from ariane.remoting.protocol.command import RemotingCommand, SerializeType


@contextmanager
def _mode(mode: str) -> Iterator[None]:
    """'loop': the compiled loop (as built); 'one': one compiled frame at a time; 'pure'."""
    saved = codec._FAST_FRAMES, codec._FAST_FRAME
    if mode != "loop":
        codec._FAST_FRAMES = None
    if mode == "pure":
        codec._FAST_FRAME = None
    try:
        yield
    finally:
        codec._FAST_FRAMES, codec._FAST_FRAME = saved


def _send(i: int) -> bytes:
    cmd = RemotingCommand.request(310, {"a": "g", "b": "T", "e": str(i % 4)}, bytes([i % 251]) * i)
    cmd.opaque = i
    return encode(cmd)


def _odd(i: int) -> bytes:
    """Frames the compiled decoder hands back but the pure one reads."""
    if i % 2:
        cmd = RemotingCommand.request(11, {"topic": "T", "n": str(i)}, b"x" * i)
        cmd.opaque = 1000 + i
        cmd.serialize_type = SerializeType.ROCKETMQ
        return encode(cmd)
    header = orjson.dumps({"code": 12, "opaque": 2000 + i, "extFields": {"k": i, "s": "v"}})
    body = b"b" * i
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


_BROKEN = struct.pack(">II", 4 + 3, 3) + b"{x}"  # a JSON header that does not parse
_BAD_LENGTH = struct.pack(">I", 2)


def _decode(stream: bytes, cuts: list[int], mode: str) -> tuple[list[RemotingCommand], str]:
    with _mode(mode):
        decoder = FrameDecoder()
        out: list[RemotingCommand] = []
        start = 0
        try:
            for cut in [*cuts, len(stream)]:
                out += decoder.feed(stream[start:cut])
                start = cut
        except FrameDecodeError as exc:
            return out + exc.decoded, str(exc)
        return out, ""


_PIECE = st.one_of(
    st.integers(0, 40).map(_send),
    st.integers(0, 40).map(_send),
    st.integers(0, 40).map(_odd),
)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(_PIECE, max_size=12),
    tail=st.sampled_from([b"", _BROKEN, _BAD_LENGTH, _BROKEN + _send(3)]),
    data=st.data(),
)
def test_loop_decodes_as_the_frame_at_a_time_and_pure_decoders(
    pieces: list[bytes], tail: bytes, data: st.DataObject
) -> None:
    stream = b"".join(pieces) + tail
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4, unique=True)))
    got = _decode(stream, cuts, "loop")
    assert got == _decode(stream, cuts, "one")
    assert got == _decode(stream, cuts, "pure")
    if not tail:
        assert not got[1]
        assert len(got[0]) == len(pieces)


def test_every_frame_every_body_cut_at_every_byte() -> None:
    stream = b"".join(_send(i) if i % 3 else _odd(i) for i in range(1, 12))
    whole, error = _decode(stream, [], "loop")
    assert not error
    assert [c.opaque for c in whole] == [
        i if i % 3 else (1000 + i if i % 2 else 2000 + i) for i in range(1, 12)
    ]
    assert [c.body for c in whole] == [
        bytes([i % 251]) * i if i % 3 else (b"x" if i % 2 else b"b") * i for i in range(1, 12)
    ]
    for cut in range(len(stream) + 1):
        assert _decode(stream, [cut], "loop") == (whole, "")


def test_error_after_good_frames_keeps_them() -> None:
    stream = _send(1) + _odd(2) + _send(3) + _BAD_LENGTH
    got, error = _decode(stream, [], "loop")
    assert [c.opaque for c in got] == [1, 2002, 3]
    assert error == "bad frame length 2 (limit 16777216)"
    assert (got, error) == _decode(stream, [], "pure")


@pytest.mark.skipif(codec._FAST_FRAMES is None, reason="pure build")
def test_compiled_loop_stops_where_it_cannot_go_on() -> None:
    frames = codec._FAST_FRAMES
    assert frames is not None
    plain = _send(5) + _send(6)
    out: list[RemotingCommand] = []
    assert frames(plain + _odd(1), 0, 1 << 24, out) == len(plain)
    assert [c.opaque for c in out] == [5, 6]
    out.clear()
    assert frames(plain + _send(7)[:-1], 0, 1 << 24, out) == len(plain)  # incomplete
    out.clear()
    assert frames(plain + _BAD_LENGTH, 0, 1 << 24, out) == len(plain)
    out.clear()
    assert frames(plain, len(_send(5)), 1 << 24, out) == len(plain)
    assert [c.opaque for c in out] == [6]
    out.clear()
    assert frames(plain, 0, 10, out) == 0  # over the frame limit: the Python loop says so
    with pytest.raises(TypeError):
        frames(bytearray(plain), 0, 1 << 24, out)
