"""The Spark sink's SEND_BATCH entries of a run of rows, straight from an Arrow body column.

How it works: a batch entry is what ``ariane.common.batch.encode_batch`` writes for a message
(RocketMQ ``MessageDecoder.encodeMessage``): TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG 0 and
BODYLENGTH as big-endian int32s, the body, PROPERTIESLENGTH as a big-endian int16, the
properties. For the sink's fast path (``RowSender.add_batch``) a row's properties are its
TAGS/KEYS pairs (``heads``), ``UNIQ_KEY`` = its id and, for idempotent writes, the dedup
property = the id again. :func:`sink_entries` reads the bodies from the column's buffers
(``offsets``, little-endian int32 or int64 when ``wide``, from index ``start``; ``data``),
with no bytes object per body; it is the compiled ``_speedups.sink_entries``
(``_speedups_sink.h``) when built, else :func:`sink_entries_py`, the reference.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import pairwise, repeat
from operator import add, le
from typing import Any

from ariane.common import native
from ariane.common.batch import ENTRY_FIXED, ENTRY_HEAD, ENTRY_PROPS_LEN

__all__ = ["sink_entries", "sink_entries_py"]

_MAX_PROPS = 0x7FFF


def sink_entries_py(
    offsets: Any,
    data: Any,
    wide: bool,
    start: int,
    n: int,
    heads: Sequence[bytes] | None,
    ids: Sequence[str],
    uniq: bytes,
    dedup: bytes | None,
) -> list[bytes] | None:
    """Rows ``start .. start + n`` as batch entries (see the module docstring).

    Returns:
        None when a row's properties exceed 0x7FFF bytes.

    Raises:
        ValueError: offsets out of range or outside ``data``, an id that is not ASCII.
        TypeError: ``ids`` or ``heads`` not of ``n`` rows.
    """
    if len(ids) != n or (heads is not None and len(heads) != n):
        raise TypeError("sink_entries: ids (and heads) lists of n, uniq and dedup bytes")
    width = 8 if wide else 4
    if start < 0 or n < 0 or len(memoryview(offsets).cast("B")) // width < start + n + 1:
        raise ValueError("sink_entries: offsets out of range")
    offs = struct.unpack_from(f"<{n + 1}{'q' if wide else 'i'}", offsets, start * width)
    view = memoryview(b"" if data is None else data).cast("B")
    if n and (offs[0] < 0 or offs[-1] > len(view) or not all(map(le, offs, offs[1:]))):
        raise ValueError("sink_entries: a body outside the data buffer")
    if not all(map(str.isascii, ids)):
        raise ValueError("sink_entries: ids must be ASCII str")
    bodies = [view[lo:hi] for lo, hi in pairwise(offs)]  # no copy: joined below
    u = uniq.decode("latin-1")
    if dedup is None:
        texts = [f"{u}{m}\x02" for m in ids]
    else:
        d = dedup.decode("latin-1")
        texts = [f"{u}{m}{d}{m}\x02" for m in ids]
    raws = [t.encode("latin-1") for t in texts]  # the bytes of uniq and dedup, ASCII ids
    if heads is not None:
        raws = list(map(add, heads, raws))
    raw_lens = list(map(len, raws))
    if raws and max(raw_lens) > _MAX_PROPS:
        return None
    body_lens = list(map(len, bodies))
    # every entry in C-level maps: head, body, properties length, properties
    totals = map(add, map(add, body_lens, raw_lens), repeat(ENTRY_FIXED))
    fixed = map(ENTRY_HEAD.pack, totals, repeat(0), repeat(0), repeat(0), body_lens)
    parts = zip(fixed, bodies, map(ENTRY_PROPS_LEN.pack, raw_lens), raws, strict=True)
    return list(map(b"".join, parts))


_Entries = Callable[
    [Any, Any, bool, int, int, "Sequence[bytes] | None", Sequence[str], bytes, "bytes | None"],
    "list[bytes] | None",
]
sink_entries: _Entries = getattr(native.speedups, "sink_entries", None) or sink_entries_py
