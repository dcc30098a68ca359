"""A dispatch batch's ConsumeQueue groups (issue 18: the reput thread's per-record work).

How it works. The reput thread writes each record of a batch into the ConsumeQueue of its
(topic, queue id) and then calls the arriving listener once per (topic, queue id, tagsCode)
(``store/dispatch.py``). :func:`cq_groups_py` (compiled: ``_speedups.cq_groups``) reads the
batch's columns once and returns one :data:`CqGroup` per (topic, queue id), in order of first
appearance, for the records that enter a ConsumeQueue (not PREPARED or ROLLBACK transaction
records): how many, the first and last physical offsets, the first queue offset, the batch row
of the last one, their ConsumeQueue units back to back when the group is a run (consecutive
queue offsets, increasing physical offsets: ``ConsumeQueue.put_run`` writes them at once), and
whether they share one tags code (then the group is one listener call). So a batch of single
sends over four queues is four block writes and four listener calls, with no numpy call and no
Python work per record. ``None``: a value the groups do not take (the caller then dispatches
as before, which decides or raises).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from ariane.common import native
from ariane.store.format import CQ_UNIT

__all__ = ["MAX_GROUPS", "CqGroup", "cq_groups", "cq_groups_py"]

#: (topic, queue_id, count, first_phys, last_phys, first_offset, last_row, units, same_tags)
CqGroup: TypeAlias = tuple[str, int, int, int, int, int, int, bytes | None, bool]

#: more (topic, queue id) groups than this in one batch: None (the reference path)
MAX_GROUPS = 256

_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _int(value: object, bounds: tuple[int, int]) -> bool:
    return type(value) is int and bounds[0] <= value <= bounds[1]


def cq_groups_py(columns: tuple[Any, ...]) -> list[CqGroup] | None:
    """The ConsumeQueue groups of a batch given as its columns (the pure twin of
    ``_speedups.cq_groups``; see the module docs)."""
    if len(columns) < 10:
        return None
    cols = columns[:10]
    if any(type(c) not in (tuple, list) for c in cols) or len({len(c) for c in cols}) != 1:
        return None
    topics, queue_ids, phys_col, size_col, tags_col, _ts, offset_col, _k, _u, flags = cols
    groups: dict[tuple[str, int], list[Any]] = {}
    for i, flag in enumerate(flags):
        if not _int(flag, _I32):
            return None
        if flag & 0xC in (0x4, 0xC):  # PREPARED / ROLLBACK: no ConsumeQueue entry
            continue
        topic, qid, phys = topics[i], queue_ids[i], phys_col[i]
        size, tags, offset = size_col[i], tags_col[i], offset_col[i]
        if not (
            type(topic) is str
            and _int(qid, _I32)
            and _int(phys, _I64)
            and _int(size, _I32)
            and _int(tags, _I64)
            and _int(offset, _I64)
        ):
            return None
        g = groups.get((topic, qid))
        if g is None:
            if len(groups) == MAX_GROUPS:
                return None
            # count, first_phys, last_phys, first_offset, last_offset, last_row, run, tags,
            # same_tags, units
            groups[(topic, qid)] = [1, phys, phys, offset, offset, i, True, tags, True, [i]]
            continue
        if offset != g[4] + 1 or phys <= g[2]:
            g[6] = False
        if tags != g[7]:
            g[8] = False
        g[0] += 1
        g[2], g[4], g[5] = phys, offset, i
        g[9].append(i)
    out: list[CqGroup] = []
    for (topic, qid), g in groups.items():
        units = (
            b"".join(CQ_UNIT.pack(phys_col[i], size_col[i], tags_col[i]) for i in g[9])
            if g[6]
            else None
        )
        out.append((topic, qid, g[0], g[1], g[2], g[3], g[5], units, g[8]))
    return out


#: the compiled twin when the extension has it, else None (the dispatcher then keeps its
#: numpy / record-by-record path)
cq_groups: Callable[[tuple[Any, ...]], list[CqGroup] | None] | None = getattr(
    native.speedups, "cq_groups", None
)
