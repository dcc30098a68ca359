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
#: the largest frame accepted (a push of up to ``max_push_batch`` 4 MiB messages fits)
MAX_FRAME: Final = 512 * 1024 * 1024

_I8 = struct.Struct(">b")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NONE = 0xFFFF


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
        if text is None:
            self.parts.append(_U16.pack(_NONE))
            return
        raw = text.encode()
        if len(raw) >= _NONE:
            raise ValueError(f"string of {len(raw)} bytes is too long for a frame")
        self.parts.append(_U16.pack(len(raw)) + raw)

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
        try:
            return bytes(self.buf[at : at + n]).decode()
        except UnicodeDecodeError:
            raise RemoteProtocolError("string is not UTF-8") from None

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
    elif isinstance(frame, PushRequest):
        _encode_push(w, frame)
    elif isinstance(frame, PushResponse):
        w.q(frame.seq)
        w.b(int(frame.kind))
        w.i(int(frame.code))
        w.q(
            frame.index,
            frame.begin_index,
            frame.end_index,
            frame.conflict_index,
            frame.conflict_term,
        )
    else:
        w.s(frame.leader_id)
        w.s(frame.transfer_id)
        w.s(frame.transferee_id)
        w.q(frame.take_leadership_ledger_index, frame.seq)
    return w.done()


def _encode_push(w: _Writer, frame: PushRequest) -> None:
    w.s(frame.leader_id)
    w.b(int(frame.kind))
    w.q(frame.index, frame.check_term, frame.commit_index, frame.seq)
    w.b(1 if frame.wipe else 0)
    terms = frame.terms
    w.i(len(terms))
    if terms:
        w.q(*terms)
    payloads = frame.payloads
    if len(payloads) not in (0, len(terms)):
        raise ValueError("a push carries one payload per term")
    w.i(len(payloads))
    for payload in payloads:
        if payload is None:
            w.i(-1)
        elif isinstance(payload, bytes | bytearray | memoryview):
            data = bytes(payload)
            w.i(len(data))
            w.raw(data)
        else:
            raise ValueError(f"cannot encode a payload of type {type(payload).__name__}")


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
        seq = r.q()
        push_kind = _push_type(r.b())
        code = _code(r.i())
        return PushResponse(
            group, local, remote, term, seq, push_kind, code, r.q(), r.q(), r.q(), r.q(), r.q()
        )
    return TransferRequest(group, local, remote, term, r.s(), r.s(), r.s(), r.q(), r.q())


def _decode_push(r: _Reader, group: str, local: str, remote: str, term: int) -> PushRequest:
    leader = r.s()
    kind = _push_type(r.b())
    index, check_term, commit, seq = r.q(), r.q(), r.q(), r.q()
    wipe = r.b() != 0
    count = r.i()
    if count < 0 or count * 8 > r.end - r.pos:
        raise RemoteProtocolError(f"bad term count {count}")
    terms = struct.unpack_from(f">{count}q", r.buf, r._take(8 * count)) if count else ()
    n = r.i()
    if n not in (0, count):
        raise RemoteProtocolError(f"{n} payloads for {count} terms")
    payloads: list[object] = []
    for _ in range(n):
        size = r.i()
        payloads.append(None if size == -1 else r.raw(size))
    return PushRequest(
        group, local, remote, term, leader, kind, index, check_term, commit, seq,
        tuple(terms), tuple(payloads), wipe,
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
