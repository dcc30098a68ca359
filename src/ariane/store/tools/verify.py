"""``ariane store verify``: check CRCs and ConsumeQueue/CommitLog consistency (read-only).

Works on a DLedger broker's store too (records of uncommitted entries need no ConsumeQueue
entry). Reports, one line each: records that fail their checks (with file and offset), non-zero bytes
after the valid end of a file (a torn tail that recovery would cut), ConsumeQueue entries that
do not point at a record of their topic/queue/offset, and records missing from their
ConsumeQueue. Returns the list of problems (empty = consistent).
"""

from __future__ import annotations

import os

from ariane.common.sysflag import enters_consume_queue
from ariane.store.format import CQ_UNIT, Decoded, check_record, parse_file_name
from ariane.store.tools.reader import commit_log_files, dledger_dirs, iter_commit_log, log_files

__all__ = ["verify"]

_BLANK = 0x7FFFFFFF


def verify(root: str) -> tuple[list[str], dict[str, int]]:
    """Check store ``root``; returns (problems, counters)."""
    problems: list[str] = []
    stats = {"records": 0, "files": 0, "consume_queue_entries": 0}
    seen: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    files = commit_log_files(root)
    stats["files"] = len(files)
    dirs = dledger_dirs(root)
    if len(dirs) > 1:
        problems.append(f"more than one DLedger directory: {dirs}")
    sizes = {f.size for f in files}
    if len(sizes) > 1:
        problems.append(f"CommitLog files have different sizes: {sorted(sizes)}")
    ended = False
    for ev in iter_commit_log(root, check_crc=True):
        if ev.kind == "record":
            if ended:
                problems.append(f"record at {ev.offset} after the end of the log")
            assert ev.record is not None
            res = check_record(ev.record, 0, ev.size, check_crc=False, want_dispatch=True)
            assert isinstance(res, Decoded)
            assert res.dispatch is not None
            topic, qid, phys, size, _t, _ts, qoff, _k, _u, sys_flag, _p = res.dispatch
            if phys != ev.offset:
                problems.append(f"record at {ev.offset} says its offset is {phys}")
            if enters_consume_queue(sys_flag) and ev.committed:
                seen.setdefault((topic, qid), {})[qoff] = (phys, size)
            stats["records"] += 1
        elif ev.kind == "corrupt":
            assert ev.file is not None
            problems.append(
                f"{ev.file.path}: invalid data at offset {ev.offset} ({ev.reason}); "
                f"{ev.size} bytes to the end of the file"
            )
            ended = True
        elif ev.kind == "end":
            ended = True
    _check_consume_queues(root, seen, problems, stats)
    return problems, stats


def _read_queue(directory: str) -> tuple[int, bytes] | None:
    names = sorted(n for n in os.listdir(directory) if parse_file_name(n) is not None)
    if not names:
        return None
    first = parse_file_name(names[0])
    assert first is not None
    chunks = []
    expected = first
    for name in names:
        start = parse_file_name(name)
        if start != expected:
            break
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        chunks.append(data)
        expected += len(data)
    return first, b"".join(chunks)


def _check_consume_queues(
    root: str,
    seen: dict[tuple[str, int], dict[int, tuple[int, int]]],
    problems: list[str],
    stats: dict[str, int],
) -> None:
    cq_root = os.path.join(root, "consumequeue")
    have: set[tuple[str, int]] = set()
    starts = [f.start for f in commit_log_files(root)]
    for directory in dledger_dirs(root):
        starts.extend(f.start for f in log_files(os.path.join(directory, "data")))
    min_phy = min(starts, default=0)
    if os.path.isdir(cq_root):
        for topic in sorted(os.listdir(cq_root)):
            for q in sorted(os.listdir(os.path.join(cq_root, topic))):
                if not q.isdigit():
                    continue
                key = (topic, int(q))
                have.add(key)
                loaded = _read_queue(os.path.join(cq_root, topic, q))
                if loaded is None:
                    continue
                first, data = loaded
                records = seen.get(key, {})
                base = first // 20
                for i, (off, size, _tags) in enumerate(
                    CQ_UNIT.iter_unpack(data[: len(data) // 20 * 20])
                ):
                    if size <= 0 or off < 0:
                        break
                    if off == 0 and size == _BLANK:
                        continue
                    stats["consume_queue_entries"] += 1
                    if off < min_phy:
                        continue
                    rec = records.get(base + i)
                    if rec != (off, size):
                        problems.append(
                            f"consumequeue {topic}/{q} entry {base + i} -> ({off}, {size}) but the "
                            f"CommitLog has {rec}"
                        )
                max_entry = base + len(data) // 20
                for qoff, (phys, _size) in records.items():
                    if qoff >= max_entry or _missing(data, base, qoff):
                        problems.append(
                            f"record at {phys} ({topic}/{q} offset {qoff}) has no ConsumeQueue entry"
                        )
    for key, records in seen.items():
        if key not in have and records:
            problems.append(f"no ConsumeQueue for {key[0]}/{key[1]} ({len(records)} records)")


def _missing(data: bytes, base: int, qoff: int) -> bool:
    i = (qoff - base) * 20
    if i < 0:
        return False
    _off, size, _ = CQ_UNIT.unpack_from(data, i)
    return bool(size <= 0)
