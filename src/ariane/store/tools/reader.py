"""Read-only access to a store directory for the tools (no mmap, no writes, no recovery).

A DLedger broker's store (a ``dledger-<selfId>`` directory with data files) is walked entry
by entry (:mod:`ariane.store.dledger_format`): each entry's body is a CommitLog record whose
offset is the body's; NOOP entries are reported as such, and records of entries above the
``committedIndex`` of the DLedger checkpoint are marked uncommitted. The CommitLog files of a
store upgraded from master/slave come first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ariane.common.javaprops import parse_properties
from ariane.errors import CorruptionError
from ariane.store.dledger_format import (
    BLANK_MAGIC,
    ENTRY_HEADER_SIZE,
    MAGIC_NOOP,
    body_crc_ok,
    decode_header,
)
from ariane.store.format import (
    Corrupt,
    Decoded,
    EndOfSegment,
    check_record,
    parse_file_name,
)

__all__ = [
    "LogFile",
    "RecordEvent",
    "commit_log_files",
    "dledger_dirs",
    "iter_commit_log",
    "log_files",
]


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
    kind: str  # "record", "blank", "end", "corrupt", "noop" (a DLedger NOOP entry)
    size: int
    record: bytes | None = None
    reason: str | None = None
    file: LogFile | None = None
    #: (index, term) of the DLedger entry holding the record
    entry: tuple[int, int] | None = None
    committed: bool = True


def commit_log_files(root: str) -> list[LogFile]:
    """The CommitLog files of store ``root`` in offset order."""
    return log_files(os.path.join(root, "commitlog"))


def dledger_dirs(root: str) -> list[str]:
    """The ``dledger-<selfId>`` directories of store ``root`` that hold data files."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    return [
        os.path.join(root, n)
        for n in names
        if n.startswith("dledger-") and os.path.isdir(os.path.join(root, n, "data"))
    ]


def log_files(directory: str) -> list[LogFile]:
    """The log files (20-digit names) of ``directory`` in offset order."""
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
    yield from _iter_plain(commit_log_files(root), check_crc)
    for directory in dledger_dirs(root)[:1]:
        yield from _iter_dledger(directory, check_crc)


def _iter_plain(files: list[LogFile], check_crc: bool) -> Iterator[RecordEvent]:
    for lf in files:
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


def _dledger_committed(directory: str) -> tuple[int, int]:
    """(committed index, data offset of the first entry) of a DLedger directory."""
    committed, begin = -1, 0
    for name, key in (("checkpoint", "committedIndex"), ("begin", "pos")):
        try:
            with open(os.path.join(directory, name), "rb") as f:
                value = int(parse_properties(f.read().decode("utf-8")).get(key, "-1"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if name == "checkpoint":
            committed = value
        else:
            begin = max(0, value)
    return committed, begin


def _iter_dledger(directory: str, check_crc: bool) -> Iterator[RecordEvent]:
    committed, begin = _dledger_committed(directory)
    for lf in log_files(os.path.join(directory, "data")):
        with open(lf.path, "rb") as f:
            data = f.read()
        pos = begin - lf.start if lf.start <= begin < lf.start + lf.size else 0
        while True:
            event = _dledger_event(lf, data, pos, committed, check_crc)
            yield event
            if event.kind in ("blank", "end", "corrupt"):
                break
            pos += event.size + (ENTRY_HEADER_SIZE if event.kind == "record" else 0)


def _dledger_event(
    lf: LogFile, data: bytes, pos: int, committed: int, check_crc: bool
) -> RecordEvent:
    """What the DLedger entry at ``pos`` of a data file holds."""
    rest = data[pos:]
    if len(rest) >= 8 and int.from_bytes(rest[:4], "big", signed=True) == BLANK_MAGIC:
        return RecordEvent(lf.start + pos, "blank", len(rest), file=lf)
    try:
        head = decode_header(data, pos)
    except CorruptionError as exc:
        kind = "end" if not rest.strip(b"\0") else "corrupt"
        return RecordEvent(lf.start + pos, kind, len(rest), reason=str(exc), file=lf)
    entry = (head.index, head.term)
    body_at = pos + ENTRY_HEADER_SIZE
    body = data[body_at : pos + head.size]
    bad = None
    if pos + head.size > len(data) or head.pos != lf.start + pos:
        bad = f"entry {head.index} is not at its place"
    elif check_crc and not body_crc_ok(head, body):
        bad = f"body CRC mismatch of entry {head.index}"
    if bad is not None:
        return RecordEvent(lf.start + pos, "corrupt", len(rest), reason=bad, file=lf, entry=entry)
    if head.magic == MAGIC_NOOP:
        return RecordEvent(lf.start + pos, "noop", head.size, file=lf, entry=entry)
    res = check_record(body, 0, len(body), check_crc=check_crc, want_dispatch=False)
    if not isinstance(res, Decoded) or res.size != len(body):
        why = res.reason if isinstance(res, Corrupt) else "not one whole record"
        return RecordEvent(lf.start + pos, "corrupt", len(rest), reason=why, file=lf, entry=entry)
    return RecordEvent(
        lf.start + body_at, "record", res.size, body, file=lf, entry=entry,
        committed=committed < 0 or head.index <= committed,
    )  # fmt: skip
