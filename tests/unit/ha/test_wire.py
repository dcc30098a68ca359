"""The replication byte format: reports and frames, whole, split anywhere, and broken."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import RemoteProtocolError
from ariane.ha.wire import (
    Frame,
    FrameDecoder,
    ReportDecoder,
    encode_frame_header,
    encode_report,
)


def test_report_bytes() -> None:
    assert encode_report(0) == bytes(8)
    assert encode_report(0x0102030405060708) == bytes(range(1, 9))
    with pytest.raises(ValueError, match="negative"):
        encode_report(-1)
    with pytest.raises(ValueError):
        encode_report(1 << 63)


def test_frame_header_bytes() -> None:
    assert encode_frame_header(65536, 32768) == bytes.fromhex("000000000001000000008000")
    with pytest.raises(ValueError):
        encode_frame_header(0, -1)
    with pytest.raises(ValueError):
        encode_frame_header(0, 1 << 31)


def test_reports_keep_only_the_last_complete_one() -> None:
    dec = ReportDecoder()
    stream = encode_report(10) + encode_report(20) + encode_report(30)
    assert dec.feed(stream[:5]) is None
    assert dec.feed(stream[5:19]) == 20  # 10 and 20 complete: the last wins
    assert dec.feed(stream[19:]) == 30
    assert dec.feed(b"") is None
    with pytest.raises(RemoteProtocolError, match="negative"):
        dec.feed(struct.pack(">q", -5))


def test_frames_whole_split_and_heartbeats() -> None:
    body = bytes(range(256)) * 3
    stream = (
        encode_frame_header(100, len(body))
        + body
        + encode_frame_header(100 + len(body), 0)
        + encode_frame_header(868, 4)
        + b"tail"
    )
    whole = FrameDecoder(1 << 20).feed(stream)
    assert whole == [Frame(100, body), Frame(868, b""), Frame(868, b"tail")]
    for cut in range(len(stream)):
        dec = FrameDecoder(1 << 20)
        got = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert got == whole
        assert dec.buffered == 0


@pytest.mark.parametrize(
    "header",
    [struct.pack(">qi", -1, 0), struct.pack(">qi", 0, -7), struct.pack(">qi", 0, 1025)],
)
def test_bad_frame_headers_are_refused(header: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="bad replication frame header"):
        FrameDecoder(1024).feed(header + b"x" * 16)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=64)), max_size=8), st.data())
def test_any_split_decodes_the_same(frames: list[tuple[int, bytes]], data: st.DataObject) -> None:
    stream = b"".join(encode_frame_header(o, len(b)) + b for o, b in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    dec = FrameDecoder(64)
    got: list[Frame] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        got += dec.feed(stream[prev:cut])
        prev = cut
    assert got == [Frame(o, b) for o, b in frames]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_either_decodes_or_raises_protocol_error(junk: bytes) -> None:
    dec = FrameDecoder(64)
    try:
        frames = dec.feed(junk)
    except RemoteProtocolError:
        return
    assert all(0 <= len(f.body) <= 64 and f.offset >= 0 for f in frames)
