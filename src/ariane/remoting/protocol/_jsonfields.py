"""Checked readers for JSON bodies: fastjson-style coercion, ``RemoteProtocolError`` otherwise.

fastjson fills Java beans leniently: a number may arrive as a string, a boolean as "true", an
absent property keeps the Java default. These helpers do the same for our body classes and
raise ``RemoteProtocolError`` naming the property when a value cannot be used.
"""

from __future__ import annotations

from typing import Any

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson

__all__ = [
    "as_object",
    "get_bool",
    "get_float",
    "get_int",
    "get_list",
    "get_object",
    "get_opt_str",
    "get_str",
    "parse_object",
    "pick",
]


def pick(obj: dict[Any, Any], short: str, long: str) -> Any:
    """A property written under its short name or, by older writers, its long one."""
    value = obj.get(short)
    return obj.get(long) if value is None else value


def parse_object(data: bytes | bytearray | memoryview | str, what: str) -> dict[Any, Any]:
    """Parse a body that must be one JSON object."""
    return as_object(fastjson.loads(data), what)


def as_object(value: Any, what: str) -> dict[Any, Any]:
    """``value`` if it is a JSON object, else an error naming ``what``."""
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def get_object(obj: dict[Any, Any], key: str, what: str) -> dict[Any, Any]:
    """A nested object; absent or null gives ``{}``."""
    value = obj.get(key)
    if value is None:
        return {}
    return as_object(value, f"{what}.{key}")


def get_list(obj: dict[Any, Any], key: str, what: str) -> list[Any]:
    """A nested array; absent or null gives ``[]``."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RemoteProtocolError(f"{what}.{key}: expected a JSON array")
    return value


def get_str(obj: dict[Any, Any], key: str, what: str, default: str = "") -> str:
    """A string property; numbers and booleans are turned into their text."""
    value = obj.get(key)
    if value is None:
        return default
    return _text(value, key, what)


def get_opt_str(obj: dict[Any, Any], key: str, what: str) -> str | None:
    """A string property that may be absent."""
    value = obj.get(key)
    if value is None:
        return None
    return _text(value, key, what)


def _text(value: Any, key: str, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise RemoteProtocolError(f"{what}.{key}: expected a string")


def get_int(obj: dict[Any, Any], key: str, what: str, default: int = 0) -> int:
    """An integer property; numeric strings are accepted, absent gives ``default``."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise RemoteProtocolError(f"{what}.{key}: expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise RemoteProtocolError(f"{what}.{key}: expected an integer, got {value!r}")


def get_bool(obj: dict[Any, Any], key: str, what: str, default: bool = False) -> bool:
    """A boolean property; "true"/"false" (any case), "1"/"0" and 1/0 are accepted."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0", ""):
            return False
    raise RemoteProtocolError(f"{what}.{key}: expected a boolean, got {value!r}")


def get_float(obj: dict[Any, Any], key: str, what: str, default: float = 0.0) -> float:
    """A number property (Java ``double``); numeric strings are accepted, absent gives
    ``default``."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RemoteProtocolError(f"{what}.{key}: expected a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise RemoteProtocolError(f"{what}.{key}: expected a number, got {value!r}") from None
