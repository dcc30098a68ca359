"""Java ``Properties`` text and RocketMQ-style config objects built from it.

RocketMQ reads its config files with ``java.util.Properties`` and copies every property onto the
config bean with the matching setter (``MixAll.properties2Object``); the admin commands
UPDATE_*_CONFIG / GET_*_CONFIG carry the same text. ``parse_properties`` and
``format_properties`` handle that text (comments, ``=``/``:``/blank separators, continuation
lines, backslash escapes). ``config_from_properties`` fills a frozen config dataclass whose
fields name their RocketMQ property in ``field(metadata={"property": ...})`` and raises
``ConfigError`` naming the property for any bad value.

No I/O here: callers read the file and pass its text.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ariane.errors import ConfigError

__all__ = [
    "PROPERTY",
    "config_from_properties",
    "config_to_properties",
    "format_properties",
    "parse_properties",
]

#: Metadata key naming the RocketMQ property of a config field.
PROPERTY = "property"

C = TypeVar("C")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Java's line ends only (not str.splitlines')


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current: str | None = None
    for raw in _LINE_BREAK.split(text):
        line = raw.lstrip(" \t\f")
        if current is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        piece = line[:-1] if continued else line
        current = piece if current is None else current + piece
        if not continued:
            lines.append(current)
            current = None
    if current is not None:
        lines.append(current)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            try:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``java.util.Properties`` text; later duplicates win, as in Java."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        limit = len(line)
        key_end = 0
        value_start = limit
        has_separator = False
        escaped = False
        while key_end < limit:
            c = line[key_end]
            if not escaped and c in "=:":
                value_start = key_end + 1
                has_separator = True
                break
            if not escaped and c in " \t\f":
                value_start = key_end + 1
                break
            escaped = not escaped if c == "\\" else False
            key_end += 1
        while value_start < limit:
            c = line[value_start]
            if c not in " \t\f":
                if has_separator or c not in "=:":
                    break
                has_separator = True
            value_start += 1
        result[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return result


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!" and is_key:
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c < " ":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: Mapping[str, str]) -> str:
    """``key=value`` lines that ``Properties.load`` reads back unchanged."""
    return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in props.items())


def _kind(hint: Any) -> type:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0]
    if hint in (bool, int, float, str):
        return typing.cast(type, hint)
    raise TypeError(f"unsupported config field type {hint!r}")


def _convert(prop: str, raw: str, kind: type) -> Any:
    value = raw.strip()
    if kind is bool:
        lowered = value.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ConfigError(prop, f"must be true or false, got {raw!r}")
    if kind is int:
        try:
            return int(value)
        except ValueError:
            raise ConfigError(prop, f"must be an integer, got {raw!r}") from None
    if kind is float:
        try:
            return float(value)
        except ValueError:
            raise ConfigError(prop, f"must be a number, got {raw!r}") from None
    return raw


def config_from_properties(
    cls: type[C],
    props: Mapping[str, str],
    base: C | None = None,
    *,
    ignored: frozenset[str] = frozenset(),
) -> tuple[C, list[str]]:
    """Build (or update) a config dataclass from RocketMQ properties.

    Args:
        cls: a dataclass whose fields carry ``metadata={"property": name}``.
        props: property name -> text value.
        base: the config to start from (defaults to ``cls()``).
        ignored: property names that are known but have no effect here.

    Returns:
        The new config and the property names that matched no field (neither ignored).

    Raises:
        ConfigError: a value does not convert, or the dataclass rejects it (names the key).
    """
    hints = typing.get_type_hints(cls)
    by_property: dict[str, tuple[str, type]] = {}
    for f in dataclasses.fields(typing.cast(Any, cls)):
        prop = f.metadata.get(PROPERTY)
        if prop:
            by_property[prop] = (f.name, _kind(hints[f.name]))
    changes: dict[str, Any] = {}
    unknown: list[str] = []
    for prop, raw in props.items():
        target = by_property.get(prop)
        if target is None:
            if prop not in ignored:
                unknown.append(prop)
            continue
        name, kind = target
        changes[name] = _convert(prop, raw, kind)
    start = base if base is not None else cls()
    try:
        return dataclasses.replace(typing.cast(Any, start), **changes), unknown
    except (TypeError, ValueError) as exc:
        raise ConfigError("config", str(exc)) from None


def config_to_properties(config: Any) -> dict[str, str]:
    """The RocketMQ properties of a config dataclass (booleans as ``true``/``false``)."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(config):
        prop = f.metadata.get(PROPERTY)
        if not prop:
            continue
        value = getattr(config, f.name)
        if value is None:
            continue
        if isinstance(value, bool):
            out[prop] = "true" if value else "false"
        else:
            out[prop] = str(value)
    return out
