"""The compiled frame decoder (``_speedups.decode_json_frame``) against the pure codec.

For any bytes, the compiled decoder either returns ``None`` (the pure decoder then decides) or
exactly the command the pure ``_decode_frame_at`` returns: equal fields, the same
``LanguageCode`` and ``SerializeType`` members, str/bytes types. It never returns a command
where the pure decoder raises. Headers are written by hand with orjson so that odd but legal
values (absent keys, nulls, numbers in ``extFields``, out-of-range ints, unknown languages,
unicode) and damaged frames are covered. The round-trip tests run in both builds (this file
is in the Makefile's PURE_TESTS).
"""

from __future__ import annotations

import struct
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import codec
from ariane.remoting.protocol.codec import FrameDecoder, decode_frame, encode
from ariane.remoting.protocol.command import LanguageCode, RemotingCommand, SerializeType

compiled = pytest.mark.skipif(codec._FAST_FRAME is None, reason="pure build")

_INT = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([2**31, -(2**31) - 1, 2**63, 0]),
    st.sampled_from([True, None, 1.0, 1.5, "7", "x"]),
)
_TEXT = st.text(max_size=12)
_SCALAR = st.one_of(_TEXT, st.integers(-5, 5), st.booleans(), st.none(), st.just(1.5))
_EXT: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(_TEXT, _TEXT, max_size=5),
    st.dictionaries(_TEXT, _SCALAR, max_size=4),
    st.just([]),
    st.none(),
    st.just("x"),
)
_LANG = st.one_of(st.sampled_from(["JAVA", "PYTHON", "GO", "CPP", "nope", ""]), _INT)
_ABSENT = object()


_I32 = st.integers(-(2**31), 2**31 - 1)
_PLAIN = {
    "code": _I32,
    "language": st.sampled_from(list(LanguageCode.__members__)),
    "version": _I32,
    "opaque": _I32,
    "flag": _I32,
    "remark": st.one_of(_TEXT, st.none()),
    "extFields": st.one_of(st.dictionaries(_TEXT, _TEXT, max_size=5), st.none()),
    "serializeTypeCurrentRPC": st.just("JSON"),
}
_ODD = {
    "code": _INT,
    "language": _LANG,
    "version": _INT,
    "opaque": _INT,
    "flag": _INT,
    "remark": st.one_of(_TEXT, st.none(), st.integers(0, 3)),
    "extFields": _EXT,
    "serializeTypeCurrentRPC": st.just("JSON"),
}


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    """Half plain headers (the compiled case, some keys absent), half with odd values."""
    fields = _PLAIN if draw(st.booleans()) else _ODD
    out: dict[str, Any] = {}
    for key, strategy in fields.items():
        value = draw(st.one_of(st.just(_ABSENT), strategy, strategy, strategy))
        if value is not _ABSENT:
            out[key] = value
    return out


def _frame(header: bytes, body: bytes, serialize_type: int = 0) -> bytes:
    """A frame without its length field: header word, header, body."""
    return struct.pack(">I", (serialize_type << 24) | len(header)) + header + body


def _pure(source: bytes) -> RemotingCommand | str:
    try:
        return codec._decode_frame_at(source, 0, len(source))
    except RemoteProtocolError as exc:
        return f"error: {exc}"


def _same(fast: RemotingCommand, pure: RemotingCommand | str) -> None:
    assert isinstance(pure, RemotingCommand), pure
    assert fast == pure
    assert fast.language is pure.language
    assert fast.serialize_type is SerializeType.JSON
    assert type(fast.body) is type(pure.body)
    assert all(type(k) is str and type(v) is str for k, v in fast.ext_fields.items())


def _check(source: bytes) -> RemotingCommand | None:
    fast = codec._FAST_FRAME
    assert fast is not None
    got = fast(source, 0, len(source))
    if got is not None:
        _same(got, _pure(source))
    return got


@compiled
@settings(max_examples=400, deadline=None)
@given(headers(), st.binary(max_size=40))
def test_generated_headers_decode_as_the_pure_codec_does(
    header: dict[str, Any], body: bytes
) -> None:
    _check(_frame(orjson.dumps(header), body))


@compiled
@settings(max_examples=300, deadline=None)
@given(headers(), st.binary(max_size=20), st.data())
def test_damaged_frames_never_decode_where_the_pure_codec_refuses(
    header: dict[str, Any], body: bytes, data: st.DataObject
) -> None:
    source = bytearray(_frame(orjson.dumps(header), body))
    cut = data.draw(st.integers(0, len(source)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3))
    for where, value in flips:
        if source:
            source[where % len(source)] = value
    _check(bytes(source[:cut]))
    _check(bytes(source))


@compiled
def test_the_plain_case_is_compiled_and_the_rest_handed_back() -> None:
    plain = encode(RemotingCommand.request(310, {"a": "G", "b": "T"}, b"body"))[4:]
    assert _check(plain) is not None
    handed_back = [
        _frame(b'{"code":1,"language":"JAVA",}', b""),  # fastjson-ism: the pure reader's
        _frame(b'{"code":1,"extFields":{"k":1}}', b""),  # no language: JAVA, pure
        _frame(b'{"code":1,"language":"JAVA","extFields":{"k":1}}', b""),  # number value
        _frame(b'{"code":true,"language":"JAVA"}', b""),  # a bool is not an int
        _frame(b'{"code":2147483648,"language":"JAVA"}', b""),  # out of range
        _frame(b'{"code":1,"language":"KLINGON"}', b""),  # unknown language: OTHER
        _frame(b'{"code":1,"language":"JAVA","remark":5}', b""),
        _frame(b"[1]", b""),
        _frame(b'{"code":1,"language":"JAVA"}', b"", serialize_type=1),
        _frame(b'{"code":1,"language":"JAVA"}', b"", serialize_type=2),
        b"\x00\x00\x00",
        b"\x00\x00\x00\x09{}",  # header longer than the frame
    ]
    for source in handed_back:
        assert _check(source) is None, source
    fast = codec._FAST_FRAME
    assert fast is not None
    assert fast(bytearray(plain), 0, len(plain)) is None  # type: ignore[arg-type]  # bytes only
    assert fast(b"xx" + plain, 2, len(plain) + 2) == _pure(plain)  # an offset in the source
    assert fast(plain, 0, len(plain) + 1) is None  # past the end
    assert fast(plain, -1, len(plain)) is None


@compiled
def test_odd_but_legal_headers() -> None:
    for header in (
        b'{"language":"PYTHON"}',  # every int absent: 0, no extFields: {}
        b'{"language":"GO","extFields":null,"remark":null,"code":-5}',
        '{"language":"JAVA","extFields":{"t\u00e9":"\U0001f600","":""},"remark":"\u00e9"}'.encode(),
        b'{"language":"JAVA","code":-2147483648,"flag":2147483647,"version":0,"opaque":7}',
    ):
        for body in (b"", b"\x00" * 3):
            cmd = _check(_frame(header, body))
            assert cmd is not None, header
    cmd = _check(_frame(b'{"language":"PYTHON"}', b""))
    assert cmd is not None
    assert (cmd.code, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (0, 0, 0, 0, None)
    assert (cmd.ext_fields, cmd.body, cmd.language) == ({}, None, LanguageCode.PYTHON)


# -- both builds -----------------------------------------------------------------------------


def _command(code: int, ext: dict[str, str], body: bytes | None, remark: str | None) -> Any:
    return RemotingCommand(
        code, LanguageCode.GO, 479, 123, 1, remark, ext, body, SerializeType.JSON
    )


@settings(max_examples=150, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(_TEXT, _TEXT, max_size=6),
    st.one_of(st.none(), st.binary(min_size=1, max_size=64)),
    st.one_of(st.none(), _TEXT),
)
def test_round_trip_in_this_build(
    code: int, ext: dict[str, str], body: bytes | None, remark: str | None
) -> None:
    """What ``encode`` writes, ``decode_frame`` and ``FrameDecoder`` read back (the build's
    decoder: compiled or pure), fed whole or split in two."""
    cmd = _command(code, ext, body, remark)
    wire = encode(cmd)
    assert decode_frame(wire[4:]) == cmd
    decoder = FrameDecoder()
    half = len(wire) // 2
    assert decoder.feed(wire + wire[:half]) == [cmd]
    assert decoder.buffered == half
    assert decoder.feed(wire[half:]) == [cmd]
    assert decoder.buffered == 0


def test_build_in_use() -> None:
    """The compiled decoder runs exactly when the compiled build does (and it has one)."""
    has = getattr(native.speedups, "decode_json_frame", None) is not None
    assert (codec._FAST_FRAME is not None) == has
    if native.PURE_REQUESTED:
        assert codec._FAST_FRAME is None


# -- the encoder -----------------------------------------------------------------------------


class _Str(str):
    """A str subclass: the pure encoder refuses it as an extFields value."""


_VALUE = st.one_of(_TEXT, _TEXT, st.integers(0, 3), st.builds(_Str, _TEXT), st.none())


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    plain = draw(st.booleans())
    ext_values = _TEXT if plain else _VALUE
    number = _I32 if plain else st.one_of(_I32, st.integers(-(2**70), 2**70), st.just(True))
    # odd values on purpose (the encoder must hand them back): built untyped
    make: Any = RemotingCommand
    return cast(
        RemotingCommand,
        make(
            draw(number),
            draw(st.sampled_from(list(LanguageCode)) | st.sampled_from([99, 0, -1])),
            draw(number),
            draw(number),
            draw(number),
            draw(st.one_of(st.none(), _TEXT) if plain else st.one_of(st.none(), _TEXT, st.just(5))),
            draw(st.dictionaries(_TEXT, ext_values, max_size=5)),
            draw(st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=40)))
            if plain
            else draw(st.one_of(st.none(), st.binary(max_size=8), st.just(bytearray(b"ba")))),
            draw(st.just(SerializeType.JSON) if plain else st.sampled_from([*SerializeType, 0])),
        ),
    )


def _pure_parts(cmd: RemotingCommand, limit: int) -> tuple[bytes, bytes | None] | str:
    fast, codec._FAST_ENCODE = codec._FAST_ENCODE, None
    try:
        return codec.encode_parts(cmd, max_frame_bytes=limit)
    except Exception as exc:  # the pure encoder's error, whatever its kind
        return f"{type(exc).__name__}: {exc}"
    finally:
        codec._FAST_ENCODE = fast


@compiled
@settings(max_examples=500, deadline=None)
@given(commands(), st.sampled_from([codec.MAX_FRAME_BYTES, 64, 90, 2**40]))
def test_generated_commands_encode_as_the_pure_codec_does(cmd: RemotingCommand, limit: int) -> None:
    fast = codec._FAST_ENCODE
    assert fast is not None
    got = fast(cmd, limit)
    if got is not None:
        pure = _pure_parts(cmd, limit)
        assert got == pure
        assert type(got[0]) is bytes
        assert got[1] is None or got[1] is cmd.body


@compiled
def test_the_answer_of_a_send_is_compiled_byte_for_byte() -> None:
    ext = {
        "msgId": "7F00000100002A9F0000000000100000",
        "queueId": "1",
        "queueOffset": "12345",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
        "transactionId": 'odd "\\ \u00e9\U0001f600\x01',
    }
    fast = codec._FAST_ENCODE
    assert fast is not None
    for remark in (None, "r\u00e9mark"):
        for body in (None, b"", b"xyz"):
            cmd = RemotingCommand(0, LanguageCode.PYTHON, 479, 77, 1, remark, ext, body)
            got = fast(cmd, codec.MAX_FRAME_BYTES)
            assert got is not None
            assert got == _pure_parts(cmd, codec.MAX_FRAME_BYTES)
            assert decode_frame(got[0][4:] + (got[1] or b"")) == RemotingCommand(
                0, LanguageCode.PYTHON, 479, 77, 1, remark, ext, body or None
            )
    handed_back = [
        RemotingCommand(0, ext_fields={"k": _Str("v")}),
        RemotingCommand(0, ext_fields={"k": 1}),  # type: ignore[dict-item]
        RemotingCommand(0, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(0, body=bytearray(b"x")),  # type: ignore[arg-type]
        RemotingCommand(2**64),  # orjson refuses it
        RemotingCommand(0, body=b"x" * 100),  # over the frame limit below
    ]
    for cmd in handed_back:
        assert fast(cmd, 100) is None
    odd = RemotingCommand(0, language=cast(LanguageCode, 99))  # no name: "OTHER"
    assert fast(odd, codec.MAX_FRAME_BYTES) == _pure_parts(odd, codec.MAX_FRAME_BYTES)
