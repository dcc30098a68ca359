"""A dispatch batch's IndexFile keys in two steps: list them, then put them into one file.

How it works (the pure twins of ``ariane._speedups.index_key_entries`` / ``index_write``, which
run when the extension is built; issue 15: a trace message carries ~400 keys and the reput
thread indexes them holding the GIL the broker's event loop needs for pulls).

* :func:`index_key_entries_py` walks a batch given as its columns (``zip(*requests)``: topics,
  physical offsets, store times, KEYS, UNIQ_KEYs, sysflags) and lists the keys of every record
  the index does not cover yet (``phys >= end_phy``) that is not a ROLLBACK, in the order
  ``IndexService.build_index_each`` puts them (UNIQ_KEY, then each non-empty space-separated
  KEYS item), as :data:`ITEM` items: ``index_key_hash(topic + "#" + key)``, offset, store time.
  None when a column holds a value of an unexpected type (the caller takes another path).
* :func:`index_write_py` puts items from ``start`` into one file's map exactly as
  ``IndexFile.put_key`` does, key by key (entry, then slot), until the file is full; it returns
  ``(written, new_slots, begin_phy, begin_ts)`` (entries written, how many started an empty
  slot chain, the file's begin offset and time, set by its first entry).

Pure: no I/O, no logging.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from ariane.common import native
from ariane.common.hashing import index_key_hash_with_prefix
from ariane.common.sysflag import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK
from ariane.store.format import INDEX_ENTRY, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT

__all__ = ["COMPILED", "ITEM", "index_key_entries", "index_key_entries_py", "index_write",
           "index_write_py"]  # fmt: skip

#: One listed key: keyHash (int32), physical offset, store time (int64), native order.
ITEM: Final = struct.Struct("=iqq")
_INT_MAX = 0x7FFFFFFF

Columns = tuple[tuple[Any, ...], ...]


def index_key_entries_py(
    topics: tuple[Any, ...],
    phys: tuple[Any, ...],
    stamps: tuple[Any, ...],
    keys: tuple[Any, ...],
    uniqs: tuple[Any, ...],
    flags: tuple[Any, ...],
    end_phy: int,
) -> bytes | None:
    """The index items of a batch's keys (module docstring), or None for unexpected types."""
    out = bytearray()
    pack = ITEM.pack
    for topic, p, ts, spaced, uniq, flag in zip(topics, phys, stamps, keys, uniqs, flags,
                                                strict=True):  # fmt: skip
        if not _plain(topic, p, ts, spaced, uniq, flag):
            return None
        if (not uniq and not spaced) or p < end_phy:
            continue
        if flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
            continue
        prefix = topic + "#"
        if uniq:
            out += pack(index_key_hash_with_prefix(prefix, uniq), p, ts)
        if spaced:
            for k in spaced.split(" "):
                if k:
                    out += pack(index_key_hash_with_prefix(prefix, k), p, ts)
    return bytes(out)


def _plain(
    topic: object, p: object, ts: object, spaced: object, uniq: object, flag: object
) -> bool:
    """The types the compiled twin accepts (exact ints that fit 64 bits, str or None)."""
    for v in (p, ts, flag):
        if type(v) is not int or not -(1 << 63) <= v < (1 << 63):
            return False
    return (
        type(topic) is str
        and (spaced is None or type(spaced) is str)
        and (uniq is None or type(uniq) is str)
    )


def index_write_py(
    mm: Any,
    slot_num: int,
    index_num: int,
    count: int,
    begin_phy: int,
    begin_ts: int,
    entries: bytes,
    start: int,
) -> tuple[int, int, int, int]:
    """Put items from ``start`` into one IndexFile's map (module docstring)."""
    entries_at = INDEX_HEADER_SIZE + slot_num * 4
    if (
        slot_num <= 0 or index_num <= 0 or count < 0 or start < 0
        or entries_at + index_num * INDEX_ENTRY_SIZE > len(mm)
        or len(entries) % ITEM.size or start * ITEM.size > len(entries)
    ):  # fmt: skip
        raise ValueError("index_write: layout does not fit the map or items")
    written = new_slots = 0
    for key_hash, phys, ts in ITEM.iter_unpack(memoryview(entries)[start * ITEM.size :]):
        if count >= index_num:
            break
        at = INDEX_HEADER_SIZE + (key_hash % slot_num) * 4
        (prev,) = INDEX_SLOT.unpack_from(mm, at)
        if prev <= 0 or prev > count:
            prev = 0
            new_slots += 1
        if count <= 1:
            begin_phy, begin_ts = phys, ts
        diff = 0 if begin_ts <= 0 else min(max(ts - begin_ts, 0) // 1000, _INT_MAX)
        INDEX_ENTRY.pack_into(mm, entries_at + count * INDEX_ENTRY_SIZE, key_hash, phys, diff, prev)
        INDEX_SLOT.pack_into(mm, at, count)
        count += 1
        written += 1
    return written, new_slots, begin_phy, begin_ts


_compiled_entries: Callable[..., bytes | None] | None = getattr(
    native.speedups, "index_key_entries", None
)  # absent: the pure build, or a stale compiled one
_compiled_write: Callable[..., tuple[int, int, int, int]] | None = getattr(
    native.speedups, "index_write", None
)
#: True when both compiled twins run (``IndexService`` then lists and puts keys this way; the
#: pure build keeps its numpy path, faster than these twins in the interpreter).
COMPILED: Final = _compiled_entries is not None and _compiled_write is not None
index_key_entries: Callable[..., bytes | None] = (
    _compiled_entries if _compiled_entries is not None else index_key_entries_py
)
index_write: Callable[..., tuple[int, int, int, int]] = (
    _compiled_write if _compiled_write is not None else index_write_py
)
