"""Java ``String.hashCode`` and the hashes RocketMQ derives from it.

The ConsumeQueue stores ``tagsCode`` = the sign-extended Java hash of the TAGS property, and the
IndexFile stores ``abs(hash)`` of ``topic#key`` (with ``Integer.MIN_VALUE`` mapped to 0). Python's
``hash()`` is unrelated; these functions reproduce Java's arithmetic over UTF-16 code units with
32-bit wrap-around.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from functools import lru_cache
from operator import mul

from ariane.common import native

__all__ = [
    "consistent_hash",
    "index_key_hash",
    "index_key_hash_with_prefix",
    "java_string_hash",
    "tags_code",
    "unsigned_hash_and_units",
    "unsigned_hash_and_units_py",
]

_MASK = 0xFFFFFFFF
_MAX_CACHED_POWERS = 4096
# _POWERS[i] = 31**(_MAX_CACHED_POWERS - 1 - i) mod 2**32, so the last n entries are the weights
# of an n-unit string: h = sum(c[i] * 31**(n-1-i)).
_POWERS: list[int] = [
    pow(31, _MAX_CACHED_POWERS - 1 - i, 1 << 32) for i in range(_MAX_CACHED_POWERS)
]
# _WEIGHTS[n] = the weights of an n-unit string as a tuple (no slicing on the hot path).
_SHORT = 256
_WEIGHTS: list[tuple[int, ...]] = [tuple(_POWERS[_MAX_CACHED_POWERS - n :]) for n in range(_SHORT)]


def _code_units(s: str) -> bytes | array[int]:
    if s.isascii():
        return s.encode("ascii")
    units = array("H")
    units.frombytes(s.encode("utf-16-be", "surrogatepass"))  # a lone surrogate: one unit, as Java
    if units.itemsize == 2 and array("H", [1]).tobytes() != b"\x00\x01":
        units.byteswap()  # machine is little-endian: the bytes were big-endian
    return units


def java_string_hash(s: str) -> int:
    """Return Java's ``s.hashCode()`` as a signed 32-bit int."""
    h = unsigned_hash_and_units(s)[0]
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tag hash: Java hash of the tag string, 0 when there is no tag."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, 0 for ``Integer.MIN_VALUE``."""
    h = java_string_hash(key)
    if h == -(1 << 31):
        return 0
    return -h if h < 0 else h


def unsigned_hash_and_units_py(s: str) -> tuple[int, int]:
    """Java ``s.hashCode()`` as an unsigned 32-bit int, and the number of UTF-16 units (the
    pure twin of ``ariane._speedups.java_hash_units``)."""
    units = _code_units(s)
    n = len(units)
    if n < _SHORT:
        return sum(map(mul, units, _WEIGHTS[n])) & _MASK, n
    if n <= _MAX_CACHED_POWERS:
        return int(sum(map(mul, units, _POWERS[_MAX_CACHED_POWERS - n :]))) & _MASK, n
    h = 0
    for c in units:
        h = (31 * h + c) & _MASK
    return h, n


_compiled_hash: Callable[[str], tuple[int, int]] | None = getattr(
    native.speedups, "java_hash_units", None
)  # absent: the pure build, or a stale compiled one
#: Java ``s.hashCode()`` as an unsigned 32-bit int, and the number of UTF-16 units (the compiled
#: twin when built).
unsigned_hash_and_units: Callable[[str], tuple[int, int]] = (
    _compiled_hash if _compiled_hash is not None else unsigned_hash_and_units_py
)


@lru_cache(maxsize=1024)
def _prefix_hash(prefix: str) -> int:
    return unsigned_hash_and_units(prefix)[0]


def index_key_hash_with_prefix(prefix: str, key: str) -> int:
    """``index_key_hash(prefix + key)``, caching the prefix's hash (e.g. ``"topic#"``) on the
    pure build."""
    if _compiled_hash is not None:
        h = _compiled_hash(prefix + key)[0]
        if h == 0x80000000:
            return 0
        return (1 << 32) - h if h & 0x80000000 else h
    hk, n = unsigned_hash_and_units(key)
    p = _POWERS[_MAX_CACHED_POWERS - 1 - n] if n < _MAX_CACHED_POWERS else pow(31, n, 1 << 32)
    h = (_prefix_hash(prefix) * p + hk) & _MASK
    if h == 0x80000000:
        return 0
    return (1 << 32) - h if h & 0x80000000 else h


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash`` (how RocketMQ 5's proxy maps a message group's
    Java hash to one of ``buckets`` queues; few keys move when ``buckets`` changes)."""
    state = key & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        high = (state >> 33) & 0xFFFFFFFF
        as_int = high - (1 << 32) if high & 0x80000000 else high
        next_double = (as_int + 1) / 2.0**31
        nxt = int((candidate + 1) / next_double) if next_double > 0 else -1
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate
