"""Frames on the Raft port: pure encode/decode functions over bytes (sans-IO).

Every frame is ``int32 length`` (of what follows) then ``int8 kind`` and the fields of that
kind, big-endian. Strings are ``uint16 length`` + UTF-8, optional strings use length 0xFFFF for
none; integers are ``int64`` except codes and counts (``int32``) and flags (``int8``).

====  ==================  =========================================================
kind  frame               fields after the kind
====  ==================  =========================================================
0     Hello               version, group, node id, peers (canonical ``dLegerPeers``)
1     HelloAck            ok (int8), reason
2     VoteRequest         group, local, remote, term, leader, ledger end index, end term, seq
3     VoteResponse        group, local, remote, term, seq, result (int32)
4     HeartBeatRequest    group, local, remote, term, leader, seq
5     HeartBeatResponse   group, local, remote, term, seq, code (int32)
6     PushRequest         group, local, remote, term, leader, kind (int8), index, check term,
                          commit index, seq, wipe (int8), count (int32), count x term,
                          count x (int32 length, bytes; -1 for none)
7     PushResponse        group, local, remote, term, seq, kind (int8), code (int32), index,
                          begin, end, conflict index, conflict term
8     TransferRequest     group, local, remote, term, leader, transfer id, transferee id,
                          take-leadership ledger index, seq
9     TransferResponse    group, local, remote, term, seq, code (int32)
====  ==================  =========================================================

A node opens one connection to each peer and sends everything it has for that peer on it
(requests and answers); the first frame is a Hello, answered by a HelloAck. Anything that
does not decode raises :class:`~ariane.errors.RemoteProtocolError`: the connection is closed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from ariane.errors import RemoteProtocolError
from ariane.raft import (
    Code,
    HeartBeatRequest,
    HeartBeatResponse,
    Message,
    PushRequest,
    PushResponse,
    PushType,
    TransferRequest,
    TransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

__all__ = [
    "MAX_FRAME",
    "PROTOCOL_VERSION",
    "Frame",
    "Hello",
    "HelloAck",
    "decode_frame",
    "encode_frame",
]

PROTOCOL_VERSION: Final = 1
#: the largest frame accepted (a push of up to ``max_push_batch`` (128) 4 MiB messages with
#: their headers and properties fits)
MAX_FRAME: Final = 1024 * 1024 * 1024

_I8 = struct.Struct(">b")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NONE = 0xFFFF
#: length and kind of a frame
_HEAD = struct.Struct(">ib")
#: a PushRequest after its leader: kind, index, check term, commit index, seq, wipe, count
_PUSH_FIXED = struct.Struct(">bqqqqbi")
#: a PushResponse after its term: seq, kind, code, index, begin, end, conflict index and term
_RESP_FIXED = struct.Struct(">qbiqqqqq")
#: encoded (length-prefixed) and decoded strings: a group and its node ids, met on every frame
_ENCODED: dict[str, bytes] = {}
_DECODED: dict[bytes, str] = {}
_CACHE_MAX = 256


def _string(text: str) -> bytes:
    """``text`` as a frame string (uint16 length + UTF-8), cached for the few names in use."""
    raw = _ENCODED.get(text)
    if raw is not None:
        return raw
    data = text.encode()
    if len(data) >= _NONE:
        raise ValueError(f"string of {len(data)} bytes is too long for a frame")
    raw = _U16.pack(len(data)) + data
    if len(_ENCODED) < _CACHE_MAX:
        _ENCODED[text] = raw
    return raw


@dataclass(frozen=True, slots=True)
class Hello:
    """The first frame on a connection: who connects, in which group, with which peers."""

    version: int
    group: str
    node_id: str
    peers: str


@dataclass(frozen=True, slots=True)
class HelloAck:
    """The answer to :class:`Hello`: accepted, or why not (the connection then closes)."""

    ok: bool
    reason: str


Frame = Message | Hello | HelloAck

_KINDS: dict[type, int] = {
    Hello: 0,
    HelloAck: 1,
    VoteRequest: 2,
    VoteResponse: 3,
    HeartBeatRequest: 4,
    HeartBeatResponse: 5,
    PushRequest: 6,
    PushResponse: 7,
    TransferRequest: 8,
    TransferResponse: 9,
}


class _Writer:
    __slots__ = ("parts",)

    def __init__(self, kind: int) -> None:
        self.parts: list[bytes] = [b"", _I8.pack(kind)]

    def s(self, text: str | None) -> None:
        self.parts.append(_U16.pack(_NONE) if text is None else _string(text))

    def q(self, *values: int) -> None:
        self.parts.append(struct.pack(f">{len(values)}q", *values))

    def i(self, value: int) -> None:
        self.parts.append(_I32.pack(value))

    def b(self, value: int) -> None:
        self.parts.append(_I8.pack(value))

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def done(self) -> bytes:
        length = sum(len(p) for p in self.parts)
        self.parts[0] = _I32.pack(length)
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def _take(self, n: int) -> int:
        at = self.pos
        if n < 0 or at + n > self.end:
            raise RemoteProtocolError("frame ends inside a field")
        self.pos = at + n
        return at

    def s(self) -> str:
        (n,) = _U16.unpack_from(self.buf, self._take(2))
        if n == _NONE:
            raise RemoteProtocolError("missing string")
        at = self._take(n)
        raw = bytes(self.buf[at : at + n])
        text = _DECODED.get(raw)
        if text is not None:
            return text
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise RemoteProtocolError("string is not UTF-8") from None
        if len(_DECODED) < _CACHE_MAX:
            _DECODED[raw] = text
        return text

    def q(self) -> int:
        return int(_I64.unpack_from(self.buf, self._take(8))[0])

    def i(self) -> int:
        return int(_I32.unpack_from(self.buf, self._take(4))[0])

    def b(self) -> int:
        return int(_I8.unpack_from(self.buf, self._take(1))[0])

    def raw(self, n: int) -> bytes:
        at = self._take(n)
        return bytes(self.buf[at : at + n])


def encode_frame(frame: Frame) -> bytes:
    """The bytes of ``frame``.

    Raises:
        ValueError: a string field is too long to encode.
    """
    if isinstance(frame, PushRequest):
        return _encode_push(frame)
    if isinstance(frame, PushResponse):
        head = (_string(frame.group), _string(frame.local_id), _string(frame.remote_id))
        fixed = _RESP_FIXED.pack(
            frame.seq, int(frame.kind), int(frame.code), frame.index, frame.begin_index,
            frame.end_index, frame.conflict_index, frame.conflict_term,
        )  # fmt: skip
        body = b"".join((*head, _I64.pack(frame.term), fixed))
        return _HEAD.pack(len(body) + 1, 7) + body
    w = _Writer(_KINDS[type(frame)])
    if isinstance(frame, Hello):
        w.i(frame.version)
        w.s(frame.group)
        w.s(frame.node_id)
        w.s(frame.peers)
        return w.done()
    if isinstance(frame, HelloAck):
        w.b(1 if frame.ok else 0)
        w.s(frame.reason)
        return w.done()
    w.s(frame.group)
    w.s(frame.local_id)
    w.s(frame.remote_id)
    w.q(frame.term)
    if isinstance(frame, VoteRequest):
        w.s(frame.leader_id)
        w.q(frame.ledger_end_index, frame.ledger_end_term, frame.seq)
    elif isinstance(frame, VoteResponse):
        w.q(frame.seq)
        w.i(int(frame.result))
    elif isinstance(frame, HeartBeatRequest):
        w.s(frame.leader_id)
        w.q(frame.seq)
    elif isinstance(frame, HeartBeatResponse | TransferResponse):
        w.q(frame.seq)
        w.i(int(frame.code))
    else:
        w.s(frame.leader_id)
        w.s(frame.transfer_id)
        w.s(frame.transferee_id)
        w.q(frame.take_leadership_ledger_index, frame.seq)
    return w.done()


def _encode_push(frame: PushRequest) -> bytes:
    terms, payloads = frame.terms, frame.payloads
    count = len(terms)
    if len(payloads) not in (0, count):
        raise ValueError("a push carries one payload per term")
    parts = [
        b"", _string(frame.group), _string(frame.local_id), _string(frame.remote_id),
        _I64.pack(frame.term), _string(frame.leader_id),
        _PUSH_FIXED.pack(
            int(frame.kind), frame.index, frame.check_term, frame.commit_index, frame.seq,
            1 if frame.wipe else 0, count,
        ),
    ]  # fmt: skip
    if count:
        parts.append(struct.pack(f">{count}q", *terms))
    pack = _I32.pack
    parts.append(pack(len(payloads)))
    for payload in payloads:
        if payload is None:
            parts.append(pack(-1))
        elif isinstance(payload, bytes):
            parts.append(pack(len(payload)))
            parts.append(payload)
        elif isinstance(payload, bytearray | memoryview):
            data = bytes(payload)
            parts.append(pack(len(data)))
            parts.append(data)
        else:
            raise ValueError(f"cannot encode a payload of type {type(payload).__name__}")
    parts[0] = _HEAD.pack(sum(map(len, parts)) + 1, 6)
    return b"".join(parts)


def decode_frame(data: bytes | bytearray | memoryview) -> tuple[Frame, int] | None:
    """Decode the first frame of ``data``.

    Returns:
        (frame, bytes used), or None when ``data`` does not hold a whole frame yet.

    Raises:
        RemoteProtocolError: the bytes are not a valid frame.
    """
    buf = memoryview(data)
    if len(buf) < 4:
        return None
    (length,) = _I32.unpack_from(buf, 0)
    if not 1 <= length <= MAX_FRAME:
        raise RemoteProtocolError(f"bad frame length {length}")
    if len(buf) < 4 + length:
        return None
    r = _Reader(buf, 4, 4 + length)
    try:
        frame = _decode_body(r, r.b())
    except (struct.error, ValueError) as exc:
        raise RemoteProtocolError(f"undecodable frame: {exc}") from None
    if r.pos != r.end:
        raise RemoteProtocolError(f"{r.end - r.pos} unexpected bytes at the end of a frame")
    return frame, 4 + length


def _decode_body(r: _Reader, kind: int) -> Frame:
    if kind == 0:
        return Hello(r.i(), r.s(), r.s(), r.s())
    if kind == 1:
        return HelloAck(r.b() != 0, r.s())
    if not 2 <= kind <= 9:
        raise RemoteProtocolError(f"unknown frame kind {kind}")
    group, local, remote, term = r.s(), r.s(), r.s(), r.q()
    if kind == 2:
        return VoteRequest(group, local, remote, term, r.s(), r.q(), r.q(), r.q())
    if kind == 3:
        seq = r.q()
        return VoteResponse(group, local, remote, term, seq, _vote_result(r.i()))
    if kind == 4:
        return HeartBeatRequest(group, local, remote, term, r.s(), r.q())
    if kind in (5, 9):
        seq = r.q()
        code = _code(r.i())
        cls = HeartBeatResponse if kind == 5 else TransferResponse
        return cls(group, local, remote, term, seq, code)
    if kind == 6:
        return _decode_push(r, group, local, remote, term)
    if kind == 7:
        seq, push_kind, code, *rest = _RESP_FIXED.unpack_from(r.buf, r._take(_RESP_FIXED.size))
        return PushResponse(
            group, local, remote, term, seq, _push_type(push_kind), _code(code), *rest
        )
    return TransferRequest(group, local, remote, term, r.s(), r.s(), r.s(), r.q(), r.q())


def _decode_push(r: _Reader, group: str, local: str, remote: str, term: int) -> PushRequest:
    leader = r.s()
    kind, index, check_term, commit, seq, wipe, count = _PUSH_FIXED.unpack_from(
        r.buf, r._take(_PUSH_FIXED.size)
    )
    if count < 0 or count * 8 > r.end - r.pos:
        raise RemoteProtocolError(f"bad term count {count}")
    terms = struct.unpack_from(f">{count}q", r.buf, r._take(8 * count)) if count else ()
    n = r.i()
    if n not in (0, count):
        raise RemoteProtocolError(f"{n} payloads for {count} terms")
    payloads: list[object] = []
    buf, pos, end = r.buf, r.pos, r.end
    unpack = _I32.unpack_from
    for _ in range(n):
        if pos + 4 > end:
            raise RemoteProtocolError("frame ends inside a field")
        (size,) = unpack(buf, pos)
        pos += 4
        if size == -1:
            payloads.append(None)
            continue
        if size < 0 or pos + size > end:
            raise RemoteProtocolError("frame ends inside a field")
        payloads.append(bytes(buf[pos : pos + size]))
        pos += size
    r.pos = pos
    return PushRequest(
        group, local, remote, term, leader, _push_type(kind), index, check_term, commit, seq,
        tuple(terms), tuple(payloads), wipe != 0,
    )  # fmt: skip


def _code(value: int) -> Code:
    code = Code.of(value)
    if code is Code.UNKNOWN and value != -1:
        raise RemoteProtocolError(f"unknown response code {value}")
    return code


def _vote_result(value: int) -> VoteResult:
    try:
        return VoteResult(value)
    except ValueError:
        raise RemoteProtocolError(f"unknown vote result {value}") from None


def _push_type(value: int) -> PushType:
    try:
        return PushType(value)
    except ValueError:
        raise RemoteProtocolError(f"unknown push type {value}") from None
