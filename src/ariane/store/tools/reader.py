"""Read-only access to a store directory for the tools (no mmap, no writes, no recovery)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ariane.store.format import (
    Corrupt,
    Decoded,
    EndOfSegment,
    check_record,
    parse_file_name,
)

__all__ = ["LogFile", "RecordEvent", "commit_log_files", "iter_commit_log"]


@dataclass(frozen=True, slots=True)
class LogFile:
    """One CommitLog file on disk."""

    path: str
    start: int
    size: int


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """What the walk found at ``offset``: a record, a blank filler, or the end/corruption."""

    offset: int
    kind: str  # "record", "blank", "end", "corrupt"
    size: int
    record: bytes | None = None
    reason: str | None = None
    file: LogFile | None = None


def commit_log_files(root: str) -> list[LogFile]:
    """The CommitLog files of store ``root`` in offset order."""
    directory = os.path.join(root, "commitlog")
    out: list[LogFile] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return out
    for name in names:
        start = parse_file_name(name)
        if start is None:
            continue
        path = os.path.join(directory, name)
        out.append(LogFile(path, start, os.path.getsize(path)))
    return out


def iter_commit_log(root: str, *, check_crc: bool) -> Iterator[RecordEvent]:
    """Walk every file record by record; each file ends with "blank", "end" or "corrupt".

    "end" means the rest of the file is zeros (never written); "corrupt" means non-zero
    bytes that are not a valid record (a torn tail or damage).
    """
    for lf in commit_log_files(root):
        with open(lf.path, "rb") as f:
            data = f.read()
        pos = 0
        while True:
            res = check_record(data, pos, len(data), check_crc=check_crc, want_dispatch=False)
            if isinstance(res, Decoded):
                yield RecordEvent(
                    lf.start + pos, "record", res.size, data[pos : pos + res.size], file=lf
                )
                pos += res.size
                continue
            if isinstance(res, EndOfSegment):
                yield RecordEvent(lf.start + pos, "blank", res.size, file=lf)
                break
            assert isinstance(res, Corrupt)
            rest = data[pos:]
            if not rest.strip(b"\0"):
                yield RecordEvent(lf.start + pos, "end", len(rest), file=lf)
            else:
                yield RecordEvent(lf.start + pos, "corrupt", len(rest), reason=res.reason, file=lf)
            break
