"""Vectorised pieces of dispatch: whole batches of ConsumeQueue entries and index keys.

How it works: the reput thread dispatches thousands of records per batch; doing the per-record
arithmetic in numpy instead of the interpreter is what lets dispatch keep up with the writer
under the GIL. Three kernels live here, each exactly equal to the per-record code it replaces:

* ConsumeQueue entries of one queue as one structured array (``tobytes()`` gives the 20-byte
  big-endian units back to back);
* Java ``String.hashCode`` of many strings of one length: the UTF-16 units as a matrix times
  the weights ``31**(n-1-i) mod 2**32`` in uint64 (wrap-around keeps the low 32 bits exact),
  then RocketMQ's ``indexKeyHashMethod`` (absolute value, ``Integer.MIN_VALUE`` -> 0);
* the IndexFile slot chains of a run of new entries in batch order: entry ``i`` links to the
  last earlier entry of the run with the same slot, else to the slot's value in the file.

Pure: no I/O, no logging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ariane.common.hashing import unsigned_hash_and_units

__all__ = [
    "CQ_DTYPE",
    "I64",
    "INDEX_ENTRY_DTYPE",
    "VECTOR_MIN",
    "chain_links",
    "consume_queue_units",
    "index_key_hashes",
]

I64 = npt.NDArray[np.int64]

#: One ConsumeQueue unit: physical offset, size, tagsCode (20 bytes, big-endian).
CQ_DTYPE: Final = np.dtype([("phys", ">i8"), ("size", ">i4"), ("tags", ">i8")])
#: One IndexFile entry: keyHash, phyOffset, timeDiff, prevIndex (20 bytes, big-endian).
INDEX_ENTRY_DTYPE: Final = np.dtype(
    [("hash", ">i4"), ("phys", ">i8"), ("diff", ">i4"), ("prev", ">i4")]
)

#: Batches (and per-queue runs) shorter than this are dispatched record by record: below it
#: numpy's fixed cost per call outweighs the per-record interpreter cost it saves.
VECTOR_MIN: Final = 48

_MASK = 0xFFFFFFFF
_MIN_INT = 0x80000000
#: Longest key hashed as a matrix row (longer ones go through the scalar hash).
_MAX_VECTOR_LEN = 512
_WEIGHTS: dict[int, npt.NDArray[np.uint64]] = {}


def _weights(n: int) -> npt.NDArray[np.uint64]:
    w = _WEIGHTS.get(n)
    if w is None:
        w = np.array([pow(31, n - 1 - i, 1 << 32) for i in range(n)], dtype=np.uint64)
        _WEIGHTS[n] = w
    return w


def consume_queue_units(phys: I64, sizes: I64, tags: I64) -> bytes:
    """The ConsumeQueue units of these records, back to back (20 bytes each)."""
    units = np.empty(len(phys), dtype=CQ_DTYPE)
    units["phys"] = phys
    units["size"] = sizes
    units["tags"] = tags
    return units.tobytes()


def _group_hashes(
    keys: Sequence[str], n: int
) -> tuple[npt.NDArray[Any] | list[int], int | list[int]]:
    """Unsigned Java hashes of keys of ``n`` characters each, and ``31**units`` of each (the
    factor that shifts a prefix's hash past the key; units differ from characters only for
    characters outside the BMP)."""
    joined = "".join(keys)
    if 0 < n <= _MAX_VECTOR_LEN and joined.isascii():
        units = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).reshape(len(keys), n)
        return (units @ _weights(n)) & _MASK, pow(31, n, 1 << 32)
    pairs = [unsigned_hash_and_units(k) for k in keys]
    return [h for h, _ in pairs], [pow(31, u, 1 << 32) for _, u in pairs]


def index_key_hashes(prefix_hashes: npt.NDArray[np.uint64] | int, keys: Sequence[str]) -> I64:
    """``index_key_hash(prefix + key)`` of every key, given each prefix's unsigned hash.

    ``hash(p + k) = hash(p) * 31**units(k) + hash(k)`` (mod 2**32), so a prefix (``topic#``)
    is hashed once per topic, not once per key.
    """
    count = len(keys)
    hashes = np.empty(count, dtype=np.uint64)
    powers = np.empty(count, dtype=np.uint64)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=count)
    distinct = np.unique(lengths).tolist()
    for n in distinct:
        if len(distinct) == 1:
            hashes[:], powers[:] = _group_hashes(keys, n)
            continue
        rows = np.flatnonzero(lengths == n)
        hashes[rows], powers[rows] = _group_hashes([keys[i] for i in rows.tolist()], n)
    full = (np.asarray(prefix_hashes, dtype=np.uint64) * powers + hashes) & _MASK
    signed = full.astype(np.int64)
    return np.where(signed == _MIN_INT, 0, np.where(signed > _MIN_INT, (1 << 32) - signed, signed))


def chain_links(slots: I64, entry_no: I64, slot_values: I64) -> tuple[I64, I64, I64]:
    """Link a run of new index entries into their slot chains, in order.

    Args:
        slots: each new entry's slot number.
        entry_no: each new entry's number (consecutive, ascending).
        slot_values: each slot's value in the file before the run.

    Returns:
        ``(prev, last_slots, last_entries)``: each entry's prevIndex (0 = none; a slot value
        that is not a plausible earlier entry counts as none, as in ``putKey``), and the
        final value (``last_entries``) of every slot the run touched (``last_slots``).
    """
    order = np.argsort(slots, kind="stable")
    s_sorted = slots[order]
    e_sorted = entry_no[order]
    first_of_slot = np.empty(len(slots), dtype=bool)
    last_of_slot = np.empty(len(slots), dtype=bool)
    if len(slots):
        first_of_slot[0] = True
        first_of_slot[1:] = s_sorted[1:] != s_sorted[:-1]
        last_of_slot[-1] = True
        last_of_slot[:-1] = first_of_slot[1:]
    old = slot_values[order]
    old = np.where((old > 0) & (old <= e_sorted), old, 0)
    prev_sorted = np.empty(len(slots), dtype=np.int64)
    prev_sorted[0:1] = 0
    prev_sorted[1:] = e_sorted[:-1]
    prev_sorted = np.where(first_of_slot, old, prev_sorted)
    prev = np.empty(len(slots), dtype=np.int64)
    prev[order] = prev_sorted
    return prev, s_sorted[last_of_slot], e_sorted[last_of_slot]
