"""The JSON dialect of RocketMQ bodies (Alibaba fastjson 1.x, C.0 of the protocol notes).

Java peers write bodies with fastjson, which differs from standard JSON in a few ways that matter:

* maps with numeric keys are written with bare numbers as keys: ``{"brokerAddrs":{0:"h:p"}}``;
* maps keyed by an object (``MessageQueue``) are written with a JSON *object* in key position:
  ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}``;
* the reader also accepts single-quoted strings and unquoted field names.

``loads`` accepts all of that. It tries ``orjson`` first (standard JSON is the common case) and
falls back to a small tolerant parser. Bare numeric keys come back as ``str`` (exactly as if they
had been quoted) and object keys as ``ObjectKey``, a hashable tuple of ``(name, value)`` pairs.

``dumps`` writes standard JSON with quoted numeric keys by default, which every client parses
(jsoncpp with ``allowNumericKeys`` in C++ 1.2.4, fastjson in Java). Keys that are objects (anything
with ``to_json()``, or an ``ObjectKey``) are written in fastjson's object-key form, because Java
tools can only read ``MessageQueue`` keys that way. ``bare_int_keys=True`` reproduces fastjson's
default output byte-for-byte in spirit (``{0:"a"}``) for peers that insist on it.

Errors: ``loads`` raises only ``RemoteProtocolError``; ``dumps`` raises only
``LocalProtocolError``. Nothing here logs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import orjson

from ariane.errors import LocalProtocolError, RemoteProtocolError

__all__ = ["JsonConvertible", "ObjectKey", "dumps", "jsonable", "loads"]

_MAX_DEPTH = 200


@runtime_checkable
class JsonConvertible(Protocol):
    """Anything that turns itself into plain JSON data (dicts, lists, str, numbers...)."""

    def to_json(self) -> Any:
        """Return this object as plain JSON-compatible data."""
        ...


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A map key that fastjson wrote as a JSON object (e.g. a ``MessageQueue``).

    It is a tuple of ``(name, value)`` pairs in document order, so it can be a dict key.
    Nested objects inside it are ``ObjectKey`` too, nested arrays are tuples.
    """

    __slots__ = ()

    @classmethod
    def of(cls, mapping: dict[str, Any]) -> ObjectKey:
        """Build a key from a mapping (nested dicts/lists are frozen)."""
        return cls((str(k), _freeze(v)) for k, v in mapping.items())

    def as_dict(self) -> dict[str, Any]:
        """The key as a plain dict (nested keys and tuples thawed)."""
        return {k: _thaw(v) for k, v in self}

    def to_json(self) -> Any:
        return self.as_dict()


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ObjectKey.of(value)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value.as_dict()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# dumps


def _orjson_default(obj: Any) -> Any:
    if isinstance(obj, JsonConvertible):
        return obj.to_json()
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise TypeError(type(obj).__name__)


def dumps(obj: Any, *, bare_int_keys: bool = False) -> bytes:
    """Serialise ``obj`` as UTF-8 JSON in the dialect RocketMQ peers read.

    Args:
        obj: plain data; objects with ``to_json()`` and sets are converted, ``int`` map keys are
            written quoted (or bare with ``bare_int_keys``), object keys in fastjson's form.
        bare_int_keys: write ``int`` keys as bare numbers, as fastjson does by default.

    Raises:
        LocalProtocolError: ``obj`` holds something JSON cannot carry.
    """
    if not bare_int_keys:
        try:
            return orjson.dumps(obj, default=_orjson_default, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            pass  # object keys, huge ints, lone surrogates...: use the general writer
    out: list[str] = []
    try:
        _write(obj, out, bare_int_keys, 0)
    except RecursionError:
        raise LocalProtocolError("JSON value nested too deeply") from None
    return "".join(out).encode("utf-8")


def _write(obj: Any, out: list[str], bare: bool, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise LocalProtocolError("JSON value nested too deeply")
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(json.dumps(obj))
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        out.append(repr(obj) if math.isfinite(obj) else "null")
    elif isinstance(obj, dict):
        _write_dict(obj, out, bare, depth)
    elif isinstance(obj, ObjectKey):
        _write_dict(obj.as_dict(), out, bare, depth)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        _write_list(obj, out, bare, depth)
    elif isinstance(obj, JsonConvertible):
        _write(obj.to_json(), out, bare, depth + 1)
    else:
        raise LocalProtocolError(f"cannot serialise {type(obj).__name__} as JSON")


def _write_list(items: Iterable[Any], out: list[str], bare: bool, depth: int) -> None:
    out.append("[")
    first = True
    for item in items:
        if not first:
            out.append(",")
        first = False
        _write(item, out, bare, depth + 1)
    out.append("]")


def _write_dict(mapping: dict[Any, Any], out: list[str], bare: bool, depth: int) -> None:
    out.append("{")
    first = True
    for key, value in mapping.items():
        if not first:
            out.append(",")
        first = False
        _write_key(key, out, bare, depth)
        out.append(":")
        _write(value, out, bare, depth + 1)
    out.append("}")


def _write_key(key: Any, out: list[str], bare: bool, depth: int) -> None:
    if isinstance(key, str):
        out.append(json.dumps(key))
    elif key is None or isinstance(key, bool):
        out.append(json.dumps("null" if key is None else ("true" if key else "false")))
    elif isinstance(key, int):
        out.append(str(int(key)) if bare else f'"{int(key)}"')
    elif isinstance(key, float):
        out.append(json.dumps(repr(key)))
    elif isinstance(key, (ObjectKey, JsonConvertible)):
        _write(key, out, bare, depth + 1)
    else:
        raise LocalProtocolError(f"cannot use {type(key).__name__} as a JSON map key")


# --------------------------------------------------------------------------------------------
# loads


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON in fastjson's dialect.

    Args:
        data: UTF-8 bytes (invalid sequences are replaced, as Java does) or text.

    Returns:
        Plain data: dicts (keys ``str`` or ``ObjectKey``), lists, str, int, float, bool, None.

    Raises:
        RemoteProtocolError: the text is not JSON, not even in fastjson's lenient sense.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    try:
        return _Parser(text).parse_document()
    except RecursionError:
        raise RemoteProtocolError("JSON nested too deeply") from None


_WS = re.compile(r"[ \t\n\r\f\b\ufeff]*")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_CHUNK = {'"': re.compile(r'[^"\\]*'), "'": re.compile(r"[^'\\]*")}
_SIMPLE_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "0": "\0",
}
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    """Recursive-descent parser for fastjson's lenient JSON."""

    __slots__ = ("n", "pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.n = len(text)

    def fail(self, what: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"bad JSON at offset {self.pos}: {what}")

    def skip_ws(self) -> None:
        m = _WS.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()

    def parse_document(self) -> Any:
        self.skip_ws()
        value = self.value(0)
        self.skip_ws()
        # C writers sometimes leave a NUL terminator behind; anything else is an error.
        if self.text[self.pos :].strip("\x00"):
            raise self.fail("trailing characters after the JSON value")
        return value

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nested too deeply")
        if self.pos >= self.n:
            raise self.fail("unexpected end of input")
        c = self.text[self.pos]
        if c == "{":
            return self.object(depth)
        if c == "[":
            return self.array(depth)
        if c == '"' or c == "'":
            return self.string(c)
        m = _NUMBER.match(self.text, self.pos)
        if m is not None:
            try:
                number = _number(m.group())
            except ValueError:  # more digits than int() accepts
                raise self.fail("number too long") from None
            self.pos = m.end()
            return number
        m = _IDENT.match(self.text, self.pos)
        if m is not None and m.group() in _LITERALS:
            self.pos = m.end()
            return _LITERALS[m.group()]
        raise self.fail(f"unexpected character {c!r}")

    def object(self, depth: int) -> dict[Any, Any]:
        self.pos += 1  # '{'
        result: dict[Any, Any] = {}
        while True:
            self.skip_ws()
            if self.pos >= self.n:
                raise self.fail("unterminated object")
            if self.text[self.pos] == "}":
                self.pos += 1
                return result
            key = self.key(depth)
            self.skip_ws()
            if self.pos >= self.n or self.text[self.pos] != ":":
                raise self.fail("expected ':' after an object key")
            self.pos += 1
            self.skip_ws()
            result[key] = self.value(depth + 1)
            self.skip_ws()
            if self.pos >= self.n:
                raise self.fail("unterminated object")
            c = self.text[self.pos]
            if c == ",":
                self.pos += 1
            elif c != "}":
                raise self.fail("expected ',' or '}' in an object")

    def key(self, depth: int) -> Any:
        c = self.text[self.pos]
        if c == '"' or c == "'":
            return self.string(c)
        if c == "{":
            return ObjectKey.of(self.object(depth + 1))
        if c == "[":
            return _freeze(self.array(depth + 1))
        m = _NUMBER.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            return m.group()
        m = _IDENT.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            return m.group()
        raise self.fail(f"unexpected character {c!r} in key position")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1  # '['
        result: list[Any] = []
        while True:
            self.skip_ws()
            if self.pos >= self.n:
                raise self.fail("unterminated array")
            if self.text[self.pos] == "]":
                self.pos += 1
                return result
            result.append(self.value(depth + 1))
            self.skip_ws()
            if self.pos >= self.n:
                raise self.fail("unterminated array")
            c = self.text[self.pos]
            if c == ",":
                self.pos += 1
            elif c != "]":
                raise self.fail("expected ',' or ']' in an array")

    def string(self, quote: str) -> str:
        text = self.text
        chunk = _CHUNK[quote]
        i = self.pos + 1
        parts: list[str] = []
        surrogates = False
        while True:
            m = chunk.match(text, i)
            assert m is not None  # the pattern matches the empty string
            parts.append(m.group())
            i = m.end()
            if i >= self.n:
                self.pos = i
                raise self.fail("unterminated string")
            if text[i] == quote:
                self.pos = i + 1
                break
            # a backslash escape
            if i + 1 >= self.n:
                self.pos = i
                raise self.fail("unterminated escape")
            esc = text[i + 1]
            if esc in _SIMPLE_ESCAPES:
                parts.append(_SIMPLE_ESCAPES[esc])
                i += 2
            elif esc == "u" or esc == "x":
                width = 4 if esc == "u" else 2
                digits = text[i + 2 : i + 2 + width]
                if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    self.pos = i
                    raise self.fail("bad hex escape")
                code = int(digits, 16)
                surrogates = surrogates or 0xD800 <= code <= 0xDFFF
                parts.append(chr(code))
                i += 2 + width
            else:
                self.pos = i
                raise self.fail(f"bad escape \\{esc}")
        s = "".join(parts)
        if surrogates:
            # join surrogate pairs, replace lone halves (as Java's UTF-8 encoder would)
            s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return s


def _number(text: str) -> int | float:
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return int(text)


def jsonable(value: Any) -> Any:
    """``value`` with every map key turned into a string (fastjson writes object keys)."""
    if isinstance(value, dict):
        return {_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if hasattr(key, "broker_name") and hasattr(key, "queue_id"):
        return f"{getattr(key, 'topic', '')}@{key.broker_name}@{key.queue_id}"
    if isinstance(key, dict) and {"brokerName", "queueId"} <= key.keys():
        return f"{key.get('topic', '')}@{key['brokerName']}@{key['queueId']}"
    return str(key)
