"""Raft port frames: every kind round-trips byte for byte, partial input waits, and anything
malformed is refused (property tests throw arbitrary bytes at the decoder)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.dledger.wire import MAX_FRAME, Hello, HelloAck, decode_frame, encode_frame
from ariane.errors import RemoteProtocolError
from ariane.raft import (
    Code,
    HeartBeatRequest,
    HeartBeatResponse,
    PushRequest,
    PushResponse,
    PushType,
    TransferRequest,
    TransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

FRAMES = [
    Hello(1, "broker-a", "n0", "n0-127.0.0.1:1;n1-127.0.0.1:2"),
    HelloAck(True, ""),
    HelloAck(False, "dLegerPeers differ"),
    VoteRequest("g", "n0", "n1", 7, "n0", 41, 6, 99),
    VoteResponse("g", "n1", "n0", 7, 99, VoteResult.REJECT_TERM_NOT_READY),
    HeartBeatRequest("g", "n0", "n1", 7, "n0", 3),
    HeartBeatResponse("g", "n1", "n0", 8, 3, Code.EXPIRED_TERM),
    PushRequest("g", "n0", "n1", 7, "n0", PushType.APPEND, 10, 6, 9, 5, (6, 7), (b"e1", b"")),
    PushRequest("g", "n0", "n1", 7, "n0", PushType.COMPARE, 12, 7, 9, 6),
    PushRequest("g", "n0", "n1", 7, "n0", PushType.TRUNCATE, 100, 3, 9, 6, wipe=True),
    PushRequest("g", "n0", "n1", 7, "n0", PushType.COMMIT, -1, -1, 9, 8),
    PushResponse("g", "n1", "n0", 7, 5, PushType.APPEND, Code.SUCCESS, 11, 0, 11),
    PushResponse("g", "n1", "n0", 7, 6, PushType.COMPARE, Code.INCONSISTENT_STATE, 12, 0, 20, 4, 5),
    TransferRequest("g", "n0", "n2", 7, "n0", "n0", "n2", 55, 12),
    TransferResponse("g", "n2", "n0", 8, 12, Code.TAKE_LEADERSHIP_FAILED),
]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: type(f).__name__)
def test_round_trip(frame: object) -> None:
    data = encode_frame(frame)  # type: ignore[arg-type]
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    assert decode_frame(data + b"junk") == (frame, len(data))
    for cut in range(len(data)):
        assert decode_frame(data[:cut]) is None


def test_two_frames_back_to_back() -> None:
    a, b = encode_frame(FRAMES[3]), encode_frame(FRAMES[7])
    frame, used = decode_frame(a + b) or (None, 0)
    assert frame == FRAMES[3]
    assert decode_frame((a + b)[used:]) == (FRAMES[7], len(b))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">i", 0), "bad frame length"),
        (struct.pack(">i", MAX_FRAME + 1), "bad frame length"),
        (struct.pack(">ib", 1, 42), "unknown frame kind"),
        (encode_frame(FRAMES[3])[:-1] + b"", None),
        (struct.pack(">ib", 3, 1) + b"\x01\x00", "frame ends inside"),
        (encode_frame(HelloAck(True, "x"))[:4] + b"\x01\x01\x00\x01\xff", "not UTF-8"),
    ],
)
def test_bad_frames(data: bytes, reason: str | None) -> None:
    if reason is None:
        assert decode_frame(data) is None
        return
    with pytest.raises(RemoteProtocolError, match=reason):
        decode_frame(data)


def test_trailing_bytes_inside_a_frame_are_refused() -> None:
    data = bytearray(encode_frame(FRAMES[5]))
    data += b"\x00"
    struct.pack_into(">i", data, 0, len(data) - 4)
    with pytest.raises(RemoteProtocolError, match="unexpected bytes"):
        decode_frame(bytes(data))


def test_unknown_codes_are_refused() -> None:
    data = bytearray(encode_frame(FRAMES[6]))
    struct.pack_into(">i", data, len(data) - 4, 777)
    with pytest.raises(RemoteProtocolError, match="unknown response code"):
        decode_frame(bytes(data))


def test_payload_count_must_match_terms() -> None:
    bad = PushRequest("g", "a", "b", 1, "a", PushType.APPEND, 0, -1, -1, 1, (1, 1), (b"x",))
    with pytest.raises(ValueError, match="one payload per term"):
        encode_frame(bad)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    try:
        decode_frame(data)
    except RemoteProtocolError:
        pass


@given(st.binary(min_size=1, max_size=200), st.integers(min_value=5, max_value=60))
def test_corrupted_frames_are_refused_or_decode(noise: bytes, at: int) -> None:
    data = bytearray(encode_frame(FRAMES[7]))
    for k, byte in enumerate(noise):
        if 4 + at + k < len(data):
            data[4 + at + k] = byte
    try:
        decode_frame(bytes(data))
    except RemoteProtocolError:
        pass
