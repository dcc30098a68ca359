"""The frame codec: golden frames, three ways of feeding, limits, and property tests."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import LocalProtocolError, RemoteProtocolError
from ariane.remoting.protocol.codec import (
    MAX_FRAME_BYTES,
    FrameDecodeError,
    FrameDecoder,
    decode_frame,
    encode,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import (
    CURRENT_VERSION,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    make_response_for,
)


def _json_frame(header: dict[str, object], body: bytes = b"", type_byte: int = 0) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack(">iI", 4 + len(text) + len(body), (type_byte << 24) | len(text)) + (
        text + body
    )


def feed_three_ways(data: bytes) -> list[list[RemotingCommand]]:
    """Decode ``data`` whole, one byte at a time, and followed by a partial frame."""
    whole = FrameDecoder().feed(data)

    bytewise: list[RemotingCommand] = []
    decoder = FrameDecoder()
    for i in range(len(data)):
        bytewise.extend(decoder.feed(data[i : i + 1]))
    assert decoder.buffered == 0

    junk = encode(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"x" * 10))[:-3]
    decoder = FrameDecoder()
    trailing = decoder.feed(data + junk)
    assert decoder.buffered == len(junk)
    return [whole, bytewise, trailing]


def test_java_style_response_header_decodes() -> None:
    header = {
        "code": 0,
        "extFields": {"msgId": "0A00000500002A9F000000000001E240", "queueId": "3"},
        "flag": 1,
        "language": "JAVA",
        "opaque": 42,
        "serializeTypeCurrentRPC": "JSON",
        "version": 479,
    }
    for decoded in feed_three_ways(_json_frame(header, b"payload")):
        assert len(decoded) == 1
        cmd = decoded[0]
        assert cmd.code == 0
        assert cmd.opaque == 42
        assert cmd.is_response
        assert not cmd.is_oneway
        assert cmd.language is LanguageCode.JAVA
        assert cmd.version == 479
        assert cmd.ext_fields["queueId"] == "3"
        assert cmd.body == b"payload"
        assert cmd.remark is None


def test_cpp_request_quirks_are_accepted() -> None:
    # C++ 1.2.4 writes some ext values as JSON numbers, booleans as "1", and always a remark.
    header = {
        "code": 10,
        "language": "CPP",
        "version": 63,
        "opaque": 7,
        "flag": 0,
        "remark": "",
        "extFields": {"queueId": 2, "sysFlag": 0, "batch": "1", "AccessKey": "", "x": None},
    }
    (cmd,) = FrameDecoder().feed(_json_frame(header, b"body"))
    assert cmd.language is LanguageCode.CPP
    assert cmd.version == 63
    assert cmd.ext_fields == {"queueId": "2", "sysFlag": "0", "batch": "1", "AccessKey": ""}
    assert cmd.remark == ""


def test_cpp_answer_with_flag_3_is_a_response() -> None:
    (cmd,) = FrameDecoder().feed(_json_frame({"code": 0, "flag": 3, "opaque": 9}))
    assert cmd.is_response
    assert cmd.is_oneway


def test_lenient_header_values() -> None:
    header = {"code": "17", "language": 3, "opaque": 5.0, "flag": 0, "remark": 12}
    (cmd,) = FrameDecoder().feed(_json_frame(header))
    assert cmd.code == 17
    assert cmd.language is LanguageCode.PYTHON
    assert cmd.opaque == 5
    assert cmd.remark == "12"
    (cmd,) = FrameDecoder().feed(_json_frame({"code": 1, "language": "KLINGON"}))
    assert cmd.language is LanguageCode.OTHER
    (cmd,) = FrameDecoder().feed(_json_frame({}))
    assert cmd.language is LanguageCode.JAVA
    assert cmd.code == 0
    assert cmd.ext_fields == {}


def test_fastjson_style_header_falls_back_to_lenient_parser() -> None:
    text = b"{code:105,'opaque':3,extFields:{topic:'T'},flag:0}"
    frame = struct.pack(">iI", 4 + len(text), len(text)) + text
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.code == 105
    assert cmd.opaque == 3
    assert cmd.ext_fields == {"topic": "T"}


def test_json_encoding_matches_java_shape() -> None:
    cmd = RemotingCommand(code=105, opaque=11, ext_fields={"topic": "T"}, body=b"B")
    frame = encode(cmd)
    length, word = struct.unpack(">iI", frame[:8])
    assert length == len(frame) - 4
    assert word >> 24 == 0
    header = json.loads(frame[8 : 8 + (word & 0xFFFFFF)])
    assert header == {
        "code": 105,
        "extFields": {"topic": "T"},
        "flag": 0,
        "language": "PYTHON",
        "opaque": 11,
        "serializeTypeCurrentRPC": "JSON",
        "version": CURRENT_VERSION,
    }
    assert frame.endswith(b"B")


def test_rocketmq_binary_golden_bytes() -> None:
    remark = b"oops"
    ext = struct.pack(">h", 1) + b"k" + struct.pack(">i", 2) + b"vv"
    header = (
        struct.pack(">hbhiii", 17, 0, 479, 1234, 1, len(remark))
        + remark
        + struct.pack(">i", len(ext))
        + ext
    )
    frame = struct.pack(">iI", 4 + len(header) + 3, (1 << 24) | len(header)) + header + b"abc"
    for decoded in feed_three_ways(frame):
        (cmd,) = decoded
        assert cmd.serialize_type is SerializeType.ROCKETMQ
        assert (cmd.code, cmd.version, cmd.opaque, cmd.flag) == (17, 479, 1234, 1)
        assert cmd.language is LanguageCode.JAVA
        assert cmd.remark == "oops"
        assert cmd.ext_fields == {"k": "vv"}
        assert cmd.body == b"abc"
        assert encode(cmd) == frame


def test_several_frames_in_one_chunk_keep_order() -> None:
    cmds = [RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=bytes([i])) for i in range(5)]
    data = b"".join(encode(c) for c in cmds)
    for decoded in feed_three_ways(data):
        assert [c.body for c in decoded] == [bytes([i]) for i in range(5)]
        assert [c.opaque for c in decoded] == [c.opaque for c in cmds]


@pytest.mark.parametrize(
    "prefix",
    [
        struct.pack(">i", MAX_FRAME_BYTES - 3),  # one byte over the limit, length field included
        struct.pack(">i", 3),
        struct.pack(">i", -1),
        struct.pack(">iI", 4, 2 << 24),  # unknown serialise type
        struct.pack(">iI", 4, 10),  # header longer than the frame
        struct.pack(">iI", 5, 1 << 24) + b"x",  # binary header too short
        struct.pack(">iI", 6, 2) + b"[]",  # JSON header that is not an object
        struct.pack(">iI", 7, 3) + b"{x}",  # not JSON at all
    ],
)
def test_bad_frames_raise_protocol_error(prefix: bytes) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameDecodeError):
        decoder.feed(prefix + b"\x00" * 8)
    with pytest.raises(FrameDecodeError, match="already failed"):
        decoder.feed(b"")


def test_largest_legal_frame_is_accepted_by_length() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", MAX_FRAME_BYTES - 4)) == []
    assert decoder.buffered == 4


def test_good_commands_before_a_bad_frame_are_reported() -> None:
    good = encode(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    with pytest.raises(FrameDecodeError) as info:
        FrameDecoder().feed(good + good + struct.pack(">i", 1) + b"\x00" * 4)
    assert [c.code for c in info.value.decoded] == [RequestCode.GET_BROKER_CLUSTER_INFO] * 2


def test_encode_refuses_what_the_wire_cannot_carry() -> None:
    with pytest.raises(LocalProtocolError, match="str"):
        encode(RemotingCommand(code=1, ext_fields={"a": 1}))  # type: ignore[dict-item]
    pop = RemotingCommand(code=RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(LocalProtocolError):
        encode(pop)
    with pytest.raises(LocalProtocolError, match="exceeds"):
        encode(RemotingCommand(code=1, body=b"x" * 100), max_frame_bytes=64)
    with pytest.raises(LocalProtocolError):
        encode(RemotingCommand(code=1, remark="\ud800", serialize_type=SerializeType.ROCKETMQ))


def test_make_response_for_copies_opaque_and_serialisation() -> None:
    request = RemotingCommand.request(
        RequestCode.PULL_MESSAGE, serialize_type=SerializeType.ROCKETMQ
    )
    response = make_response_for(request, ResponseCode.PULL_NOT_FOUND, "none")
    assert response.opaque == request.opaque
    assert response.is_response
    assert response.serialize_type is SerializeType.ROCKETMQ
    assert request.make_response(ResponseCode.SUCCESS).opaque == request.opaque
    assert RemotingCommand.request(1).opaque != RemotingCommand.request(1).opaque


def test_decode_frame_without_length_field() -> None:
    frame = encode(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"hb"))
    assert decode_frame(frame[4:]).body == b"hb"
    with pytest.raises(RemoteProtocolError):
        decode_frame(b"\x00\x00")


# -- property tests -----------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=20)
_int32 = st.integers(-(2**31), 2**31 - 1)
_short = st.integers(-(2**15), 2**15 - 1)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize_type = draw(st.sampled_from(SerializeType))
    binary = serialize_type is SerializeType.ROCKETMQ
    number = _short if binary else _int32
    remark = draw(st.none() | (_text.filter(bool) if binary else _text))
    return RemotingCommand(
        code=draw(number),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(number),
        opaque=draw(_int32),
        flag=draw(st.integers(0, 3)),
        remark=remark,
        ext_fields=draw(st.dictionaries(_text, _text, max_size=6)),
        body=draw(st.none() | st.binary(min_size=1, max_size=64)),
        serialize_type=serialize_type,
    )


@given(st.lists(commands(), min_size=1, max_size=4))
def test_round_trip(cmds: list[RemotingCommand]) -> None:
    data = b"".join(encode(c) for c in cmds)
    for decoded in feed_three_ways(data):
        assert decoded == cmds


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_protocol_error(data: bytes) -> None:
    try:
        FrameDecoder().feed(data)
    except RemoteProtocolError:
        pass


@given(st.integers(0, 3), st.binary(max_size=120), st.binary(max_size=16))
def test_arbitrary_headers_raise_only_protocol_error(kind: int, header: bytes, body: bytes) -> None:
    frame = struct.pack(">iI", 4 + len(header) + len(body), (kind << 24) | len(header))
    try:
        FrameDecoder().feed(frame + header + body)
    except RemoteProtocolError:
        pass


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.sampled_from(
            ["code", "flag", "opaque", "version", "language", "remark", "extFields", "x"]
        ),
        _json_values,
    )
)
def test_arbitrary_json_headers_raise_only_protocol_error(header: dict[str, object]) -> None:
    try:
        text = json.dumps(header).encode()
    except ValueError:
        return
    frame = struct.pack(">iI", 4 + len(text), len(text)) + text
    try:
        (cmd,) = FrameDecoder().feed(frame)
    except RemoteProtocolError:
        return
    assert all(isinstance(v, str) for v in cmd.ext_fields.values())


def fed_in_pieces(
    decoder: FrameDecoder, cmds: list[RemotingCommand], cuts: list[int]
) -> list[RemotingCommand]:
    """What ``decoder`` gives for the frames of ``cmds`` fed in pieces cut at ``cuts``."""
    data = b"".join(encode(c) for c in cmds)
    points = sorted({min(c, len(data)) for c in cuts})
    decoded: list[RemotingCommand] = []
    start = 0
    for point in [*points, len(data)]:
        decoded.extend(decoder.feed(data[start:point]))
        start = point
    return decoded


@given(st.lists(commands(), min_size=1, max_size=4), st.lists(st.integers(0, 2000), max_size=8))
def test_any_chunking_gives_the_same_commands(cmds: list[RemotingCommand], cuts: list[int]) -> None:
    decoder = FrameDecoder()
    assert fed_in_pieces(decoder, cmds, cuts) == cmds
    assert decoder.buffered == 0


@given(
    st.lists(commands(), max_size=3),
    st.integers(-(1 << 31), 3) | st.integers(MAX_FRAME_BYTES - 3, 1 << 31 - 1),
    st.lists(st.integers(0, 2000), max_size=8),
)
def test_a_bad_length_after_any_chunking_keeps_the_frames_before_it(
    cmds: list[RemotingCommand], bad: int, cuts: list[int]
) -> None:
    """Kept chunks, frames completed across reads and the frames after them in one read: every
    good command comes out once, in order, then the bad length breaks the decoder; while it
    waits, ``buffered`` is the bytes after the last complete frame."""
    frames = [encode(c) for c in cmds]
    data = b"".join(frames) + struct.pack(">i", bad) + b"rest"
    ends = [sum(map(len, frames[: i + 1])) for i in range(len(frames))]
    points = sorted({min(c, len(data)) for c in cuts})
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    start = 0
    error: FrameDecodeError | None = None
    for point in [*points, len(data)]:
        try:
            decoded.extend(decoder.feed(data[start:point]))
        except FrameDecodeError as exc:
            decoded.extend(exc.decoded)
            error = exc
            break
        assert decoder.buffered == point - max([0, *(e for e in ends if e <= point)])
        start = point
    assert error is not None
    assert "bad frame length" in str(error)
    assert decoded == cmds
    with pytest.raises(FrameDecodeError):
        decoder.feed(b"")


def test_a_frame_trickled_a_byte_per_read_is_kept_in_few_pieces() -> None:
    """A peer sending a large frame a byte at a time: the decoder merges the small reads (a
    list of one object per byte would cost ~50 bytes of memory per byte buffered), and the
    command and the frame after it come out whole."""
    big = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=bytes(range(256)) * 400)
    after = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"next")
    data = encode(big) + encode(after)
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    most_pieces = 0
    for i in range(len(data)):
        decoded.extend(decoder.feed(data[i : i + 1]))
        most_pieces = max(most_pieces, len(decoder._chunks))
    assert decoded == [big, after]
    assert decoder.buffered == 0
    assert most_pieces <= 2


@given(
    st.lists(commands(), min_size=1, max_size=4),
    st.lists(st.integers(0, 2000), max_size=8),
    st.integers(1, 80),
)
def test_bodies_joined_apart_from_their_headers_give_the_same_commands(
    cmds: list[RemotingCommand], cuts: list[int], split: int
) -> None:
    """With ``split_body_bytes`` small, every frame completed across reads whose body reaches
    it takes the split join (head and body joined apart): same commands, in order."""
    decoder = FrameDecoder(split_body_bytes=split)
    assert fed_in_pieces(decoder, cmds, cuts) == cmds
    assert decoder.buffered == 0


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("read", [1000, 65536, 100_003])
def test_a_big_body_across_reads_is_that_body_byte_for_byte(
    serialize_type: SerializeType, read: int
) -> None:
    """A 1 MiB answer after a small one, read in pieces of ``read`` bytes (the header itself
    split across reads with 1000): the default threshold splits it; every command exact."""
    body = bytes(range(256)) * 4096
    small = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"hb")
    big = RemotingCommand(
        code=ResponseCode.SUCCESS,
        opaque=7,
        flag=1,
        remark="r" * 1500,
        ext_fields={"nextBeginOffset": "42", "k": "v" * 600},
        body=body,
        serialize_type=serialize_type,
    )
    data = encode(small) + encode(big) + encode(small)
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    for at in range(0, len(data), read):
        decoded.extend(decoder.feed(data[at : at + read]))
    assert decoded == [small, big, small]
    assert decoded[1].body == body
    assert decoder.buffered == 0


def test_a_bad_header_of_a_split_frame_keeps_the_commands_before_it() -> None:
    good = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"ok")
    bad = _json_frame({"code": "not a number"}, b"b" * 200_000)
    data = encode(good) + bad
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    error: FrameDecodeError | None = None
    for at in range(0, len(data), 4096):
        try:
            decoded.extend(decoder.feed(data[at : at + 4096]))
        except FrameDecodeError as exc:
            error = exc
            break
    assert error is not None
    assert at + 4096 >= len(data)  # the frame's last read breaks the decoder
    assert decoded + error.decoded == [good]
    assert decoder.buffered == 0
    with pytest.raises(FrameDecodeError):
        decoder.feed(b"")
