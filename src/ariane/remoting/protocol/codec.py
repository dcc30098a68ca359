"""Sans-IO frame codec for RemotingCommand (RocketMQ ``RemotingCommand.encode/decode``,
``RocketMQSerializable``, ``NettyDecoder``).

Frame layout (all big-endian)::

    int length            bytes after this field = 4 + headerLength + bodyLength
    int headerWord        (serializeType << 24) | headerLength
    byte[headerLength]    header: JSON object (type 0) or ROCKETMQ binary (type 1)
    byte[...]             body, the rest of the frame

``encode`` builds one frame with a single ``bytes.join``. ``FrameDecoder.feed`` takes whatever
the transport delivered and returns every complete command; partial frames wait in its buffer.
A frame whose length is below 4 or above ``max_frame_bytes`` (16 MiB, counted with the length
field as Netty does), an unknown serialisation type or an undecodable header raises
``FrameDecodeError`` (a ``RemoteProtocolError``); commands decoded before the bad frame travel
on the exception so a server can still answer them before closing. In the compiled build the
plain case of a JSON frame is decoded by ``_speedups.decode_json_frame`` and a JSON-header
command encoded by ``_speedups.encode_json_parts`` (issue 18), and the plain frames of one read
(a producer's pipelined sends: ~100 a read) in one ``decode_json_frames`` call that stops at
the first frame it cannot take; anything else they hand back to the pure decoder and encoder
here, which stay the reference and own every error. With ``FrameDecoder.raw_sends`` (a broker
channel while the send pass takes a read's single sends) that call leaves a plain single send's
frame as a ``rawsend.RawSend`` (no header parse), decoded by ``decode_frame_in`` when needed.

Reader leniency (peers differ): JSON ``extFields`` values may be numbers or booleans (C++ 1.2.4)
and become strings; an unknown language name becomes ``OTHER``; missing header keys take
RocketMQ's defaults. Writers always emit ``extFields`` values as JSON strings.

Nothing here does I/O or logs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, cast

import orjson

from ariane.common import native
from ariane.errors import LocalProtocolError, RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.command import LanguageCode, RemotingCommand, SerializeType

__all__ = [
    "MAX_FRAME_BYTES",
    "SPLIT_BODY_BYTES",
    "FrameDecodeError",
    "FrameDecoder",
    "decode_frame",
    "encode",
    "encode_parts",
]

#: Largest whole frame (length field included) either side accepts, as RocketMQ's
#: ``com.rocketmq.remoting.frameMaxLength`` default.
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: reads of an incomplete frame shorter than this are merged into one buffer (FrameDecoder)
_SMALL_READ = 4096
#: a completed frame's body at least this long is joined apart from its header (FrameDecoder)
SPLIT_BODY_BYTES = 64 * 1024

_HEADER_LENGTH_MASK = 0xFFFFFF
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1

_PREFIX = struct.Struct(">iI")  # length, header word
_LENGTH = struct.Struct(">i")
_WORD = struct.Struct(">I")
_BIN_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remark length
_SHORT = struct.Struct(">h")
_INT = struct.Struct(">i")

_LANGUAGE_BY_NAME: dict[str, LanguageCode] = dict(LanguageCode.__members__)
_LANGUAGE_NAME: dict[int, str] = {lang.value: lang.name for lang in LanguageCode}
_LANGUAGE_BY_VALUE: dict[int, LanguageCode] = {lang.value: lang for lang in LanguageCode}
_SERIALIZE_NAME = {SerializeType.JSON: "JSON", SerializeType.ROCKETMQ: "ROCKETMQ"}
# Enum members as module constants: ``SerializeType.JSON`` costs a slow class-attribute lookup
# in CPython 3.11 (about 50 ns), once or twice per frame (hot path)
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ


class FrameDecodeError(RemoteProtocolError):
    """A frame does not decode; the connection must be closed.

    Attributes:
        decoded: commands that decoded cleanly before the bad frame in the same ``feed`` call.
    """

    def __init__(self, message: str, decoded: list[RemotingCommand] | None = None) -> None:
        super().__init__(message)
        self.decoded: list[RemotingCommand] = decoded if decoded is not None else []


# --------------------------------------------------------------------------------------------
# encoding


def encode(cmd: RemotingCommand, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Serialise one command into a complete frame.

    Args:
        cmd: the command; its ``serialize_type`` picks the header format.
        max_frame_bytes: refuse frames the peer would reject (length field included).

    Raises:
        LocalProtocolError: a value cannot be carried (non-string ext value, code outside a
            short in ROCKETMQ format, header over 16 MiB, frame over ``max_frame_bytes``).
    """
    head, body = encode_parts(cmd, max_frame_bytes=max_frame_bytes)
    return head + body if body else head


def encode_parts(
    cmd: RemotingCommand, *, max_frame_bytes: int = MAX_FRAME_BYTES
) -> tuple[bytes, bytes | None]:
    """Like ``encode`` but returns ``(length + header, body)`` so a transport can write both
    with one vectored write instead of copying a large body.

    Raises:
        LocalProtocolError: as ``encode``.
    """
    if _FAST_ENCODE is not None:
        parts = _FAST_ENCODE(cmd, max_frame_bytes)
        if parts is not None:
            return parts
    ext = cmd.ext_fields
    for value in ext.values():
        if value.__class__ is not str:
            raise LocalProtocolError(f"extFields values must be str, got {type(value).__name__}")
    serialize_type = cmd.serialize_type
    if serialize_type == _JSON:
        header = _encode_json_header(cmd)
        type_bits = 0
    elif serialize_type == _ROCKETMQ:
        header = _encode_binary_header(cmd)
        type_bits = 1 << 24
    else:
        raise LocalProtocolError(f"unknown serialize type {cmd.serialize_type!r}")
    header_length = len(header)
    if header_length > _HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header of {header_length} bytes exceeds 16 MiB")
    body = cmd.body
    length = 4 + header_length + (len(body) if body else 0)
    if length + 4 > max_frame_bytes:
        raise LocalProtocolError(f"frame of {length + 4} bytes exceeds {max_frame_bytes}")
    return _PREFIX.pack(length, type_bits | header_length) + header, body or None


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, Any] = {
        "code": cmd.code,
        "extFields": cmd.ext_fields,
        "flag": cmd.flag,
        "language": _LANGUAGE_NAME.get(cmd.language, "OTHER"),
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    try:
        return orjson.dumps(header)
    except TypeError as exc:  # orjson.JSONEncodeError: non-str keys, out-of-range ints...
        raise LocalProtocolError(f"cannot encode header as JSON: {exc}") from None


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    try:
        remark = cmd.remark.encode("utf-8") if cmd.remark else b""
        parts: list[bytes] = []
        for key, value in cmd.ext_fields.items():
            key_bytes = key.encode("utf-8")
            value_bytes = value.encode("utf-8")
            parts.append(_SHORT.pack(len(key_bytes)))
            parts.append(key_bytes)
            parts.append(_INT.pack(len(value_bytes)))
            parts.append(value_bytes)
        ext = b"".join(parts)
        fixed = _BIN_FIXED.pack(
            cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag, len(remark)
        )
    except struct.error as exc:
        raise LocalProtocolError(f"value does not fit the ROCKETMQ header: {exc}") from None
    except (UnicodeEncodeError, AttributeError) as exc:
        raise LocalProtocolError(f"cannot encode header text: {exc}") from None
    return b"".join((fixed, remark, _INT.pack(len(ext)), ext))


# --------------------------------------------------------------------------------------------
# decoding


class FrameDecoder:
    """Incremental frame decoder; feed it bytes, get complete commands back.

    The bytes of an incomplete frame are kept as the chunks they came in (no copy) and joined
    once, when the chunk completing the frame arrives; the frames after it are decoded from
    that chunk itself (a 64 KiB SEND_BATCH frame spanning reads is copied once, not four
    times). A completed frame whose body is at least ``split_body_bytes`` (a bulk pull's
    answer, a big SEND_BATCH) is not joined whole: its body is joined on its own, the command's
    ``body`` as it is (one copy of the body instead of two: the frame's join, then its body's
    slice), and the header is decoded from a join of its few bytes.

    Args:
        max_frame_bytes: largest acceptable frame, length field included.
        split_body_bytes: smallest body joined apart from its header.
    """

    __slots__ = (
        "_broken", "_chunks", "_max_frame_bytes", "_need", "_pending", "_split_body", "raw_sends",
    )  # fmt: skip

    def __init__(
        self, max_frame_bytes: int = MAX_FRAME_BYTES, split_body_bytes: int = SPLIT_BODY_BYTES
    ) -> None:
        #: the bytes after the last complete frame, in arrival order; reads shorter than
        #: ``_SMALL_READ`` in a row share one bytearray, so a peer trickling a large frame a
        #: few bytes per read cannot make a list of millions of tiny objects
        self._chunks: list[bytes | bytearray | memoryview] = []
        #: their length
        self._pending = 0
        #: the first frame's end in them (its length field + 4), -1 while that field is split
        self._need = -1
        self._max_frame_bytes = max_frame_bytes
        self._split_body = max(1, split_body_bytes)
        self._broken: str | None = None
        #: leave a plain single send's frame as a ``rawsend.RawSend`` (set by a server channel
        #: while the broker's send pass takes them; compiled build only)
        self.raw_sends = False

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame waiting for more data."""
        return self._pending

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add received bytes and return every command they complete, in order.

        Raises:
            FrameDecodeError: a frame is malformed; ``decoded`` holds the good commands before
                it. The decoder stays broken afterwards.
        """
        if self._broken is not None:
            raise FrameDecodeError(f"decoder already failed: {self._broken}")
        source = data if data.__class__ is bytes else bytes(data)
        chunks = self._chunks
        commands: list[RemotingCommand] = []
        pos = 0
        if chunks:
            need = self._need
            if need >= 0 and self._pending + len(source) < need:
                self._keep(source)  # the first frame is still incomplete: copy nothing
                self._pending += len(source)
                return commands
            if need < 0:  # its length field was split: join the few bytes there are
                chunks.append(source)
                source = b"".join(chunks)
            else:  # the first frame whole, in one copy; the rest decoded from `source`
                pos = need - self._pending
                chunks.append(memoryview(source)[:pos])
                self._first(need, commands)
            chunks.clear()
            self._pending = 0
        pos = self._run(source, pos, commands)
        if pos < len(source):
            chunks.append(memoryview(source)[pos:] if pos else source)
            self._pending = rest = len(source) - pos
            self._need = _LENGTH.unpack_from(source, pos)[0] + 4 if rest >= 4 else -1
        return commands

    def _keep(self, piece: bytes) -> None:
        """Queue a read of an incomplete frame: a large one as it is, small ones merged."""
        chunks = self._chunks
        if len(piece) >= _SMALL_READ:
            chunks.append(piece)
            return
        last = chunks[-1]
        if last.__class__ is bytearray:
            last += piece
        else:
            chunks.append(bytearray(piece))

    def _first(self, need: int, commands: list[RemotingCommand]) -> None:
        """Decode the frame that ``_chunks`` hold whole (``need`` bytes, length included)."""
        chunks = self._chunks
        first = chunks[0]
        if need - 8 >= self._split_body and len(first) >= 8:
            body_at = 8 + (_WORD.unpack_from(first, 4)[0] & _HEADER_LENGTH_MASK)
            if need - body_at >= self._split_body:
                head, body = _cut(chunks, body_at)
                fast = _FAST_FRAME
                try:
                    cmd = None if fast is None else fast(head, 4, body_at)
                    if cmd is None:
                        cmd = _decode_frame_at(head, 4, body_at)
                except RemoteProtocolError as exc:
                    self._broken = str(exc)
                    chunks.clear()
                    self._pending = 0
                    raise FrameDecodeError(str(exc), commands) from None
                cmd.body = body
                commands.append(cmd)
                return
        self._run(b"".join(chunks), 0, commands)

    def _run(self, source: bytes, pos: int, commands: list[RemotingCommand]) -> int:
        """Decode the complete frames of ``source`` from ``pos`` into ``commands``; where the
        first incomplete one starts (its length field checked when present)."""
        limit = self._max_frame_bytes
        fast = _FAST_FRAME
        frames = _FAST_FRAMES
        total = len(source)
        error: str | None = None
        while True:
            if frames is not None:  # the plain frames in one C call; it stops at any other
                if self.raw_sends and _RAW_FRAMES:
                    pos = frames(source, pos, limit, commands, True)
                else:  # four arguments: an extension built before raw frames takes them too
                    pos = frames(source, pos, limit, commands)
            if total - pos < 4:
                break
            (length,) = _LENGTH.unpack_from(source, pos)
            if length < 4 or length + 4 > limit:
                error = f"bad frame length {length} (limit {limit})"
                break
            end = pos + 4 + length
            if end > total:
                break
            try:
                # after `frames`, this frame is one the compiled decoder hands back
                cmd = None if fast is None or frames is not None else fast(source, pos + 4, end)
                commands.append(cmd if cmd is not None else _decode_frame_at(source, pos + 4, end))
            except RemoteProtocolError as exc:
                error = str(exc)
                break
            pos = end
        if error is not None:
            self._broken = error
            self._chunks.clear()
            self._pending = 0
            raise FrameDecodeError(error, commands)
        return pos


def _cut(chunks: list[bytes | bytearray | memoryview], at: int) -> tuple[bytes, bytes]:
    """The bytes of ``chunks`` before ``at`` and from ``at`` on, each joined once (a single
    whole ``bytes`` chunk is not copied)."""
    head: list[bytes | bytearray | memoryview] = []
    tail: list[bytes | bytearray | memoryview] = []
    pos = 0
    for chunk in chunks:
        size = len(chunk)
        if pos + size <= at:
            head.append(chunk)
        elif pos >= at:
            tail.append(chunk)
        else:
            view = memoryview(chunk)
            head.append(view[: at - pos])
            tail.append(view[at - pos :])
        pos += size
    return b"".join(head), b"".join(tail)


def decode_frame_in(source: bytes, start: int, end: int) -> RemotingCommand:
    """Decode the frame ``source[start:end]`` (without its length field), as the decoder does.

    Raises:
        RemoteProtocolError: the bytes are not a valid frame.
    """
    if _FAST_FRAME is not None:
        cmd = _FAST_FRAME(source, start, end)
        if cmd is not None:
            return cmd
    return _decode_frame_at(source, start, end)


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame *without* its leading length field (header word, header, body).

    Raises:
        RemoteProtocolError: the bytes are not a valid frame.
    """
    data = bytes(frame)
    return decode_frame_in(data, 0, len(data))


_Decode = Callable[[bytes, int, int], RemotingCommand | None]
_Encode = Callable[[RemotingCommand, int], tuple[bytes, bytes | None] | None]


def _fast_frame() -> tuple[_Decode, _Encode] | None:
    """The compiled decoder of plain JSON frames and encoder of JSON-header commands
    (``_speedups_frame.h``), or None: the pure build, or a module built before them."""
    fast = native.speedups
    decode = getattr(fast, "decode_json_frame", None)
    encode = getattr(fast, "encode_json_parts", None)
    if fast is None or decode is None or encode is None:
        return None
    fast.configure_frame(
        RemotingCommand, orjson.loads, orjson.dumps, _LANGUAGE_BY_NAME, _LANGUAGE_NAME, _JSON
    )
    return cast(_Decode, decode), cast(_Encode, encode)


_FAST = _fast_frame()
#: ``decode_json_frame(source, start, end)``: the plain case of ``_decode_frame_at`` compiled
#: (a command, or None and this module's pure decoder decides); None in the pure build
_FAST_FRAME = None if _FAST is None else _FAST[0]
#: ``decode_json_frames(source, pos, max_frame_bytes, commands) -> pos``: ``_FAST_FRAME`` of
#: every complete plain frame from ``pos`` on in one call; None in the pure build (or an
#: extension built before it)
_FAST_FRAMES: Callable[..., int] | None = (
    None if _FAST is None else getattr(native.speedups, "decode_json_frames", None)
)
#: whether ``_FAST_FRAMES`` can leave plain single sends raw (``rawsend.py``): False with an
#: extension built before it
_RAW_FRAMES = getattr(native.speedups, "configure_raw_send", None) is not None
#: ``encode_json_parts(cmd, max_frame_bytes)``: ``encode_parts`` of a JSON-header command
#: compiled (the parts, or None and the pure encoder decides); None in the pure build
_FAST_ENCODE = None if _FAST is None else _FAST[1]


def _decode_frame_at(source: bytes, start: int, end: int) -> RemotingCommand:
    if end - start < 4:
        raise RemoteProtocolError("frame shorter than its header word")
    (word,) = _WORD.unpack_from(source, start)
    serialize_type = word >> 24
    header_start = start + 4
    header_end = header_start + (word & _HEADER_LENGTH_MASK)
    if header_end > end:
        raise RemoteProtocolError("header length exceeds the frame")
    if serialize_type == 0:
        cmd = _decode_json_header(source[header_start:header_end])
    elif serialize_type == 1:
        cmd = _decode_binary_header(source, header_start, header_end)
    else:
        raise RemoteProtocolError(f"unknown serialize type {serialize_type}")
    if header_end < end:
        cmd.body = source[header_end:end]
    return cmd


def _decode_json_header(header: bytes) -> RemotingCommand:
    try:
        obj = orjson.loads(header)
        lenient = False
    except orjson.JSONDecodeError:
        obj = fastjson.loads(header)  # fastjson-isms; raises RemoteProtocolError
        lenient = True
    if obj.__class__ is not dict:
        raise RemoteProtocolError("JSON header is not an object")
    get = obj.get
    language = get("language")
    lang = _LANGUAGE_BY_NAME.get(language) if language.__class__ is str else None
    if lang is None:
        lang = _language(language)
    remark = get("remark")
    if remark is not None and remark.__class__ is not str:
        remark = _scalar_text(remark, "remark")
    ext = get("extFields")
    if ext is None:
        ext = {}
    elif ext.__class__ is not dict:
        raise RemoteProtocolError("header extFields is not an object")
    elif lenient:
        ext = _normalize_ext(ext)
    else:
        for value in ext.values():  # orjson keys are always str; check the values
            if value.__class__ is not str:
                ext = _normalize_ext(ext)
                break
    code = get("code", 0)
    version = get("version", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    # fast path: four plain ints in range; anything else goes through the checked reader
    if not (
        code.__class__ is int
        and version.__class__ is int
        and opaque.__class__ is int
        and flag.__class__ is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):
        code = _int_field(obj, "code")
        version = _int_field(obj, "version")
        opaque = _int_field(obj, "opaque")
        flag = _int_field(obj, "flag")
    return RemotingCommand(code, lang, version, opaque, flag, remark, ext, None, _JSON)


def _language(value: Any) -> LanguageCode:
    if value is None:
        return LanguageCode.JAVA
    if value.__class__ is str:
        return LanguageCode.OTHER
    if value.__class__ is int:
        return _LANGUAGE_BY_VALUE.get(value, LanguageCode.OTHER)
    raise RemoteProtocolError("header language is neither a name nor a number")


def _int_field(obj: dict[str, Any], key: str) -> int:
    value = obj.get(key)
    if value is None:
        return 0
    if value.__class__ is not int:
        if value.__class__ is float and value.is_integer():
            value = int(value)
        elif value.__class__ is str:
            try:
                value = int(value)
            except ValueError:
                raise RemoteProtocolError(f"header {key} is not an integer") from None
        else:
            raise RemoteProtocolError(f"header {key} is not an integer")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise RemoteProtocolError(f"header {key} is out of the int range")
    return int(value)


def _normalize_ext(ext: dict[Any, Any]) -> dict[str, str]:
    for key, value in ext.items():
        if value.__class__ is not str or key.__class__ is not str:
            break
    else:
        return ext
    out: dict[str, str] = {}
    for key, value in ext.items():
        if key.__class__ is not str:
            raise RemoteProtocolError("extFields key is not a string")
        if value is not None:
            out[key] = value if value.__class__ is str else _scalar_text(value, key)
    return out


def _scalar_text(value: Any, key: str) -> str:
    """The string fastjson would put in a ``Map<String, String>`` for a JSON scalar."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (dict, list)):
        try:
            return fastjson.dumps(value).decode("utf-8")
        except LocalProtocolError:
            pass
    raise RemoteProtocolError(f"header field {key} has an unusable value")


def _decode_binary_header(view: bytes, start: int, end: int) -> RemotingCommand:
    if end - start < _BIN_FIXED.size + 4:
        raise RemoteProtocolError("ROCKETMQ header too short")
    code, language, version, opaque, flag, remark_length = _BIN_FIXED.unpack_from(view, start)
    pos = start + _BIN_FIXED.size
    if remark_length < 0 or pos + remark_length + 4 > end:
        raise RemoteProtocolError("ROCKETMQ header remark length out of bounds")
    remark = None
    if remark_length:
        remark = view[pos : pos + remark_length].decode("utf-8", "replace")
        pos += remark_length
    (ext_length,) = _INT.unpack_from(view, pos)
    pos += 4
    if ext_length < 0 or pos + ext_length > end:
        raise RemoteProtocolError("ROCKETMQ header extFields length out of bounds")
    ext: dict[str, str] = {}
    ext_end = pos + ext_length
    while pos < ext_end:
        if pos + 2 > ext_end:
            raise RemoteProtocolError("ROCKETMQ header truncated extFields key length")
        (key_length,) = _SHORT.unpack_from(view, pos)
        pos += 2
        if key_length < 0 or pos + key_length + 4 > ext_end:
            raise RemoteProtocolError("ROCKETMQ header extFields key out of bounds")
        key = view[pos : pos + key_length].decode("utf-8", "replace")
        pos += key_length
        (value_length,) = _INT.unpack_from(view, pos)
        pos += 4
        if value_length < 0 or pos + value_length > ext_end:
            raise RemoteProtocolError("ROCKETMQ header extFields value out of bounds")
        ext[key] = view[pos : pos + value_length].decode("utf-8", "replace")
        pos += value_length
    return RemotingCommand(
        code=code,
        language=_LANGUAGE_BY_VALUE.get(language, LanguageCode.OTHER),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )
