"""A single send's JSON header read straight from its bytes: the compiled scan
(``_speedups.send_header_scan``, ``_speedups_sendscan.h``), its pure twin
(``rawsend.scan_send_header``) and orjson (the reference: what the eager decoder reads).

On headers our encoder writes with odd but legal extFields (escapes, quotes, backslashes,
control characters, non-ASCII and non-BMP text, keys in any order, extra keys), and on those
headers damaged or reshaped (whitespace, keys moved, a key twice, numbers for strings, the
top-level keys in another order, trailing junk, truncated, bytes changed), both scans give the
same answer; when they take a header, orjson reads it into exactly the code, opaque and
extFields (same order) they give, the flag is 0 and the extFields' span is that object. A
frame with such a header, decoded by the decoder's raw mode, is a ``RawSend`` whose command is
the eager decoder's. Runs in both builds (in PURE_TESTS; the pure build checks the twin alone).
"""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native
from ariane.remoting.protocol import codec, rawsend
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.command import RemotingCommand

_C = getattr(native.speedups, "send_header_scan", None)


def _header(frame: bytes) -> bytes:
    (hl,) = struct.unpack_from(">I", frame, 4)
    return frame[8 : 8 + hl]


def _frame(header: bytes, body: bytes = b"body") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def _plain(ext: dict[str, str], code: int = 310, opaque: int = 7) -> bytes:
    cmd = RemotingCommand.request(code, ext, b"body")
    cmd.opaque = opaque
    return _header(encode(cmd))


def _check(header: bytes) -> object:
    """Both scans agree; a taken header is what orjson reads. The scan's answer."""
    got = rawsend.scan_send_header(header)
    if _C is not None:
        assert _C(header) == got
    if got is None:
        return None
    code, opaque, ext_at, ext_end, ext = got
    obj = orjson.loads(header)
    assert list(obj) == [
        "code", "extFields", "flag", "language", "opaque", "serializeTypeCurrentRPC", "version",
    ]  # fmt: skip
    assert (obj["code"], obj["opaque"], obj["flag"]) == (code, opaque, 0)
    assert list(obj["extFields"].items()) == list(ext.items())
    assert all(type(v) is str for v in ext.values())
    assert orjson.loads(header[ext_at:ext_end]) == obj["extFields"]
    assert header[ext_at] == ord("{")
    assert header[ext_end - 1] == ord("}")
    return got


BASE = {
    "a": "group", "b": "Topic", "c": "TBW102", "d": "4", "e": "1", "f": "0",
    "g": "1796000000000", "h": "0", "i": "TAGS\x01a\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",
}  # fmt: skip


def _with(**kw: str) -> dict[str, str]:
    out = dict(BASE)
    out.update(kw)
    return out


TAKEN = [
    _plain(BASE),
    _plain(BASE, code=10, opaque=-(2**31)),
    _plain(BASE, opaque=2**31 - 1),
    _plain(dict(reversed(list(BASE.items())))),  # keys in another order
    _plain(_with(zz="extra", Q_1="x")),  # extra keys
    _plain(_with(b="Topicé", i='K\x01a"b\\c\x02UNIQ_KEY\x01é键\x02')),  # escapes, non-ASCII
    _plain(_with(b="T/\b\f\n\r\t", i="\x00\x1f\x7f\U0001f600")),  # every short escape, non-BMP
    _plain({}),  # no extFields at all: taken (the prepare then hands it to the reference)
    # escapes orjson would not write but reads: \u00e9, \/, \" and upper-case hex
    _plain(BASE).replace(b'"Topic"', b'"T\\u00e9\\/\\"\\u00C9"'),
    _plain(BASE).replace(b'"PYTHON"', b'"JAVA"'),
    _plain(BASE).replace(b'"opaque":7', b'"opaque":-0'),
]

DECLINED = [
    _plain(BASE).replace(b'"code":310', b'"code":311'),  # another request code
    _plain(BASE).replace(b'"flag":0', b'"flag":2'),  # one-way
    _plain(BASE).replace(b'"flag":0', b'"flag":1'),  # a response
    _plain(BASE).replace(b',"flag":0', b', "flag":0'),  # whitespace
    _plain(BASE).replace(b'{"code"', b' {"code"'),
    _plain(BASE).replace(b'"opaque":7,', b'"opaque":7 ,'),  # whitespace after a number
    _plain(BASE).replace(b'"code":310,', b'"code":310\n,'),
    _plain(BASE).replace(b'"e":"1"', b'"e": "1"'),
    _plain(BASE).replace(b'"e":"1"', b'"e" :"1"'),
    _plain(BASE) + b" ",  # trailing whitespace
    _plain(BASE) + b"x",  # trailing junk
    _plain(BASE)[:-1],  # truncated
    _plain(BASE)[:40],
    _plain(BASE).replace(b'"e":"1"', b'"e":1'),  # a number for a string
    _plain(BASE).replace(b'"e":"1"', b'"e":null'),
    _plain(BASE).replace(b'"e":"1"', b'"e":true'),
    _plain(BASE).replace(b'"e":"1"', b'"e":"1","e":"2"'),  # a key twice
    _plain(BASE).replace(b'"e":"1"', b'"\\u0065":"1"'),  # an escape in a key
    _plain(BASE).replace(b'"e":"1"', b'"\xc3\xa9":"1"'),  # a non-ASCII key
    _plain(BASE).replace(b'"opaque":7', b'"opaque":"7"'),  # a string for a number
    _plain(BASE).replace(b'"opaque":7', b'"opaque":07'),  # not JSON
    _plain(BASE).replace(b'"opaque":7', b'"opaque":7.0'),
    _plain(BASE).replace(b'"opaque":7', b'"opaque":7e0'),
    _plain(BASE).replace(b'"opaque":7', b'"opaque":2147483648'),  # out of the int32 range
    _plain(BASE).replace(b'"version":479', b'"version":12345678901'),
    _plain(BASE).replace(b'"PYTHON"', b'"KLINGON"'),  # a language not in the table
    _plain(BASE).replace(b'"PYTHON"', b'"PYTHO\\u004e"'),
    _plain(BASE).replace(b'"JSON"', b'"ROCKETMQ"'),
    _plain(BASE).replace(b'"code":310,', b"").replace(b'"flag"', b'"code":310,"flag"'),
    _plain(BASE).replace(b'"serializeTypeCurrentRPC"', b'"remark":"r","serializeTypeCurrentRPC"'),
    _plain(BASE).replace(b'"Topic"', b'"T\\x"'),  # a bad escape
    _plain(BASE).replace(b'"Topic"', b'"T\\u12"'),
    _plain(BASE).replace(b'"Topic"', b'"T\\ud83d\\ude00"'),  # a surrogate pair (orjson's)
    _plain(BASE).replace(b'"Topic"', b'"T\\udc00"'),  # a lone surrogate
    _plain(BASE).replace(b'"Topic"', b'"T\x01"'),  # a raw control character
    _plain(BASE).replace(b'"Topic"', b'"T\xff"'),  # not UTF-8
    _plain(BASE).replace(b'"Topic"', b'"T\xc3"'),  # a cut sequence
    _plain(BASE).replace(b'"Topic"', b'"T\xe0\x80\x80"'),  # overlong
    _plain(BASE).replace(b'"Topic"', b'"T\xed\xa0\x80"'),  # an encoded surrogate
    _plain(BASE).replace(b'"Topic"', b'"T\xf4\x90\x80\x80"'),  # above U+10FFFF
    _plain(BASE).replace(b'"Topic"', b'{"x":"y"}'),  # an object for a string
    _plain({f"k{i}": "v" for i in range(rawsend.MAX_PAIRS + 1)}),  # too many keys
    _plain({"k" * (rawsend.MAX_KEY + 1): "v"}),  # a key too long
    _plain({"": "v"}),  # an empty key
    b"",
    b"{}",
    b"[]",
]


@pytest.mark.parametrize("header", TAKEN)
def test_plain_headers_are_taken_as_orjson_reads_them(header: bytes) -> None:
    assert _check(header) is not None


@pytest.mark.parametrize("header", DECLINED)
def test_other_shapes_are_declined(header: bytes) -> None:
    assert _check(header) is None


_TEXT = st.text(
    st.one_of(
        st.characters(max_codepoint=0x7F),
        st.characters(min_codepoint=0x80, exclude_categories=("Cs",)),
        st.sampled_from('"\\/\x00\x01\x02\x1f\u00e9\u4e2d\U0001f600'),
    ),
    max_size=40,
)
_KEY = st.text(st.characters(max_codepoint=0x7E, exclude_characters='"\\'), max_size=6)


@st.composite
def _headers(draw: st.DrawFn) -> bytes:
    ext = draw(st.dictionaries(_KEY, _TEXT, max_size=rawsend.MAX_PAIRS + 2))
    code = draw(st.sampled_from([10, 310, 11, 320]))
    opaque = draw(st.integers(-(2**31) - 2, 2**31 + 1))
    header = _plain(ext, code=code, opaque=opaque) if -(2**31) <= opaque < 2**31 else None
    if header is None:
        header = orjson.dumps({"code": code, "extFields": ext, "opaque": opaque})
    kind = draw(st.integers(0, 5))
    if kind == 1:  # a byte inserted, removed or replaced
        at = draw(st.integers(0, len(header)))
        piece = draw(st.sampled_from([b" ", b"\\", b'"', b"}", b",", b"0", b"\xc3", b"\n"]))
        cut = draw(st.integers(0, 1))
        header = header[:at] + piece + header[at + cut :]
    elif kind == 2:  # truncated
        header = header[: draw(st.integers(0, len(header)))]
    elif kind == 3:  # a string written with \u escapes
        header = header.replace(b"a", b"\\u0061").replace(b"\xc3\xa9", b"\\u00e9")
    return header


@settings(max_examples=600, deadline=None)
@given(_headers())
def test_the_scans_agree_with_each_other_and_orjson(header: bytes) -> None:
    _check(header)


@pytest.mark.parametrize("header", TAKEN[:7])
def test_the_raw_frame_decodes_into_the_eager_command(header: bytes) -> None:
    if codec._FAST_FRAMES is None:
        pytest.skip("pure build: the decoder leaves nothing raw")
    stream = b"".join(_frame(header, bytes([i]) * i) for i in range(3))
    eager = FrameDecoder().feed(stream)
    decoder = FrameDecoder()
    decoder.raw_sends = True
    raw = decoder.feed(stream)
    assert [type(r) for r in raw] == [rawsend.RawSend] * 3
    for r, e in zip(raw, eager, strict=True):
        assert isinstance(r, rawsend.RawSend)
        assert (r.code, r.flag, r.opaque, r.body) == (e.code, e.flag, e.opaque, e.body)
        assert r.command() == e
        assert r.describe() == e.describe()
        assert rawsend.as_command(r) == e
        assert orjson.loads(r.source[r.ext_at : r.ext_end]) == e.ext_fields


def test_other_frames_in_a_raw_read_are_decoded_as_before() -> None:
    if codec._FAST_FRAMES is None:
        pytest.skip("pure build: the decoder leaves nothing raw")
    readable = []
    for header in DECLINED:  # the declined headers the decoder reads (not all are JSON)
        try:
            FrameDecoder().feed(_frame(header))
        except codec.FrameDecodeError:
            continue
        readable.append(header)
    assert len(readable) > 15
    stream = b"".join(_frame(h) for h in TAKEN[:3] + readable)
    eager = FrameDecoder().feed(stream)
    decoder = FrameDecoder()
    decoder.raw_sends = True
    raw = decoder.feed(stream)
    kinds = [type(r) is rawsend.RawSend for r in raw]
    assert kinds == [True] * 3 + [False] * (len(raw) - 3)
    assert [rawsend.as_command(r) for r in raw] == eager


def test_an_extension_built_before_raw_frames_decodes_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compiled module without raw frames (four arguments only) keeps decoding."""
    fast = codec._FAST_FRAMES
    if fast is None:
        pytest.skip("pure build: no compiled loop")

    def four(source: bytes, pos: int, limit: int, commands: list[object]) -> int:
        return fast(source, pos, limit, commands)

    monkeypatch.setattr(codec, "_FAST_FRAMES", four)
    monkeypatch.setattr(codec, "_RAW_FRAMES", False)
    decoder = FrameDecoder()
    decoder.raw_sends = True
    (cmd,) = decoder.feed(_frame(TAKEN[0]))
    assert type(cmd) is RemotingCommand
    assert cmd == FrameDecoder().feed(_frame(TAKEN[0]))[0]
