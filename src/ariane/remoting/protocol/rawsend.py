"""A read's plain single sends left as frame bytes (issue 18: the broker's CPU per single send;
RocketMQ decodes every frame into a ``RemotingCommand`` with its extFields map, then the send
header out of it: ``RemotingCommand.decode``, ``decodeCommandCustomHeader``).

How it works. While the broker's send pass takes a read's single sends (``SendRun``: the
dispatcher's ``raw_sends``), a channel's decoder leaves every SEND_MESSAGE / SEND_MESSAGE_V2
frame whose JSON header has the exact plain shape the clients write (see
:func:`scan_send_header`) as a :class:`RawSend`: code, flag, opaque and body, the read's bytes
and where the frame and its extFields are in them; no orjson parse, no header or extFields
dict, no ``RemotingCommand``. The pass's compiled prepare reads the send header's fields
straight from those bytes (``_speedups_sendraw.h``). Whatever else needs the request (the
dispatcher, the reference prepare, an answer other than the pass's SUCCESS) calls
:meth:`RawSend.command`, which decodes the frame as the decoder would have: a header of that
shape is one orjson reads into the same values, so the command is the one the eager decode
makes. The decoding is compiled only (``decode_json_frames``); :func:`scan_send_header` is the
pure twin of its header scan (``send_header_scan``, ``_speedups_sendscan.h``), with the same
decisions, and the reference the tests compare both with is orjson.
"""

from __future__ import annotations

from typing import Final

from ariane.common import native
from ariane.remoting.protocol import codec
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import LanguageCode, RemotingCommand

__all__ = [
    "RAW_CLASS", "RAW_CODES", "RawSend", "as_command", "scan_send_header", "send_header_scan",
]  # fmt: skip

#: the most extFields keys a plain header has, and the longest key
MAX_PAIRS: Final = 24
MAX_KEY: Final = 32
_LANGUAGES = dict(LanguageCode.__members__)


class RawSend:
    """A plain single send's frame, not decoded (made by the compiled decoder only).

    Attributes:
        code: SEND_MESSAGE (10) or SEND_MESSAGE_V2 (310).
        flag: 0 (a request, not one-way).
        opaque: the request id.
        body: the message body (None when the frame has none).
        source: the read's bytes; ``source[start:end]`` is the frame without its length field.
        ext_at, ext_end: where the header's extFields object is in ``source``.
        spans: the decoder's scan of the extFields pairs (offsets into ``source``, the
            compiled prepare reads the header fields through them instead of scanning the
            extFields again); unset with an extension built before it.
    """

    __slots__ = (
        "body", "code", "end", "ext_at", "ext_end", "flag", "opaque", "source", "spans", "start",
    )  # fmt: skip

    code: int
    flag: int
    opaque: int
    body: bytes | None
    source: bytes
    start: int
    end: int
    ext_at: int
    ext_end: int
    spans: bytes

    def command(self) -> RemotingCommand:
        """The command the frame decodes into (the eager decoder's)."""
        return codec.decode_frame_in(self.source, self.start, self.end)

    def describe(self) -> str:
        """The command's one-line summary for logs."""
        return self.command().describe()


#: RawSend's class for an identity check on a request typed as a command
RAW_CLASS: Final[type] = RawSend
#: the request codes a RawSend has (the decoder leaves no other frame raw)
RAW_CODES: Final = frozenset((RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2))
#: the slots in the order the compiled decoder sets them (``_speedups_sendscan.h``; an
#: extension built before ``spans`` takes the first nine)
_SLOT_ORDER = (
    "code", "flag", "opaque", "body", "source", "start", "end", "ext_at", "ext_end", "spans",
)  # fmt: skip


def as_command(request: RemotingCommand | RawSend) -> RemotingCommand:
    """``request`` itself, or the command a :class:`RawSend` decodes into."""
    if isinstance(request, RawSend):
        return request.command()
    return request


# -- the header scan: pure twin ---------------------------------------------------------------

_ESCAPES = {
    ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f",
    ord("n"): "\n", ord("r"): "\r", ord("t"): "\t",
}  # fmt: skip
_HEX = frozenset(b"0123456789abcdefABCDEF")


class _NotPlain(Exception):
    """The header is not the plain shape (the scan returns None)."""


def _utf8_len(h: bytes, p: int) -> int:
    """The length of the valid UTF-8 sequence at ``h[p]`` (>= 0x80); raises _NotPlain."""
    c = h[p]
    lo, hi = 0x80, 0xBF
    if 0xC2 <= c <= 0xDF:
        n = 2
    elif 0xE0 <= c <= 0xEF:
        n = 3
        lo = 0xA0 if c == 0xE0 else 0x80
        hi = 0x9F if c == 0xED else 0xBF
    elif 0xF0 <= c <= 0xF4:
        n = 4
        lo = 0x90 if c == 0xF0 else 0x80
        hi = 0x8F if c == 0xF4 else 0xBF
    else:
        raise _NotPlain
    if len(h) - p < n or not lo <= h[p + 1] <= hi:
        raise _NotPlain
    if any(not 0x80 <= h[p + k] <= 0xBF for k in range(2, n)):
        raise _NotPlain
    return n


def _string(h: bytes, p: int, key: bool) -> tuple[str, int, bool]:
    """The JSON string at ``h[p]`` (its opening quote): (text, position after it, escaped)."""
    if p >= len(h) or h[p] != 0x22:
        raise _NotPlain
    p += 1
    out: list[str] = []
    start = p
    escaped = False
    end = len(h)
    while p < end:
        ch = h[p]
        if ch == 0x22:
            out.append(h[start:p].decode())
            return "".join(out), p + 1, escaped
        if ch < 0x20:
            raise _NotPlain
        if ch == 0x5C:
            if key or end - p < 2:
                raise _NotPlain
            escaped = True
            out.append(h[start:p].decode())
            ch = h[p + 1]
            if ch == 0x75:  # \uXXXX
                digits = h[p + 2 : p + 6]
                if len(digits) < 4 or not _HEX.issuperset(digits):
                    raise _NotPlain
                cp = int(digits, 16)
                if 0xD800 <= cp <= 0xDFFF:
                    raise _NotPlain
                out.append(chr(cp))
                p += 6
            elif ch in _ESCAPES:
                out.append(_ESCAPES[ch])
                p += 2
            else:
                raise _NotPlain
            start = p
            continue
        if ch >= 0x80:
            if key:
                raise _NotPlain
            p += _utf8_len(h, p)
            continue
        p += 1
    raise _NotPlain


def _ext(h: bytes, p: int) -> tuple[dict[str, str], int]:
    """The extFields object at ``h[p]``: (its pairs, the position after it)."""
    if p >= len(h) or h[p] != 0x7B:
        raise _NotPlain
    p += 1
    pairs: dict[str, str] = {}
    if p < len(h) and h[p] == 0x7D:
        return pairs, p + 1
    while True:
        if len(pairs) == MAX_PAIRS:
            raise _NotPlain
        key, p, _ = _string(h, p, True)
        if not key or len(key) > MAX_KEY or p >= len(h) or h[p] != 0x3A:
            raise _NotPlain
        value, p, _ = _string(h, p + 1, False)
        if key in pairs:
            raise _NotPlain  # a key twice
        pairs[key] = value
        if p >= len(h):
            raise _NotPlain
        if h[p] == 0x7D:
            return pairs, p + 1
        if h[p] != 0x2C:
            raise _NotPlain
        p += 1


def _int(h: bytes, p: int) -> tuple[int, int]:
    """The JSON integer in the int32 range at ``h[p]``: (value, position after it)."""
    end = len(h)
    start = p
    if p < end and h[p] == 0x2D:
        p += 1
    if p >= end or not 0x30 <= h[p] <= 0x39:
        raise _NotPlain
    if h[p] == 0x30:
        p += 1
    else:
        digits = p
        while p < end and 0x30 <= h[p] <= 0x39:
            p += 1
        if p - digits > 10:
            raise _NotPlain
    if p < end and h[p] in b".eE":
        raise _NotPlain
    value = int(h[start:p])
    if not -(2**31) <= value < 2**31:
        raise _NotPlain
    return value, p


def _lit(h: bytes, p: int, lit: bytes) -> int:
    if not h.startswith(lit, p):
        raise _NotPlain
    return p + len(lit)


def scan_send_header(header: bytes) -> tuple[int, int, int, int, dict[str, str]] | None:
    """(code, opaque, extFields' start, its end, extFields) of a single send's JSON header of
    the exact plain shape (``_speedups_sendscan.h`` says which), else None. The pure twin of
    the compiled ``send_header_scan``."""
    h = header
    try:
        p = _lit(h, 0, b'{"code":')
        code, p = _int(h, p)
        if code not in (10, 310):
            return None
        p = _lit(h, p, b',"extFields":')
        ext_at = p
        ext, p = _ext(h, p)
        ext_end = p
        p = _lit(h, p, b',"flag":')
        flag, p = _int(h, p)
        if flag:
            return None
        p = _lit(h, p, b',"language":')
        language, p, escaped = _string(h, p, False)
        if escaped or not language.isascii() or language not in _LANGUAGES:
            return None
        p = _lit(h, p, b',"opaque":')
        opaque, p = _int(h, p)
        p = _lit(h, p, b',"serializeTypeCurrentRPC":"JSON","version":')
        _version, p = _int(h, p)
        p = _lit(h, p, b"}")
    except (_NotPlain, UnicodeDecodeError):
        return None
    if p != len(h) or len(language) > 16:
        return None
    return code, opaque, ext_at, ext_end, ext


_SCAN = getattr(native.speedups, "send_header_scan", None)
#: the compiled scan when built, else the twin
send_header_scan = _SCAN if _SCAN is not None else scan_send_header

_CONFIGURE = getattr(native.speedups, "configure_raw_send", None)
if _CONFIGURE is not None:
    _SLOTS_TAKEN = getattr(native.speedups, "RAW_SEND_SLOTS", 9)
    _CONFIGURE(
        RawSend, tuple(getattr(RawSend, name) for name in _SLOT_ORDER[:_SLOTS_TAKEN]), _LANGUAGES
    )
