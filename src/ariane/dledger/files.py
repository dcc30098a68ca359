"""The data and index files of one DLedger node (DLedger ``DLedgerMmapFileStore``), built on
the store's file primitives (:class:`~ariane.store.mapped_file_queue.MappedFileQueue`).

How it works: an entry is placed by :meth:`DLedgerFiles.reserve` (which writes the BLANK and
rolls to the next file when the entry plus 8 bytes does not fit), written into the map by the
caller or copied whole, and sealed by :meth:`DLedgerFiles.seal` (header, body CRC, the index
unit at ``index * 32``, positions). The index is a cache: recovery walks the data of the last
three files (or from the log's first entry), checks every entry (magic, index, position,
size, body CRC), rewrites missing or wrong index units, and cuts the log at the first entry
that does not check, keeping a copy of the bytes it cuts under ``cut/``. Truncation (the
leader's TRUNCATE, a conflicting push) and wiping (no overlap with the leader) keep copies the
same way. The first entry (index, position, term before it) lives in ``begin``; it moves when
old files are deleted and after a wipe. Not thread-safe: the owner serializes calls.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from dataclasses import dataclass

import numpy as np

from ariane.common.fileio import write_file_atomically
from ariane.common.javaprops import format_properties, parse_properties
from ariane.dledger.format import (
    BLANK_MAGIC,
    CRC_MASK,
    ENTRY_HEADER,
    ENTRY_HEADER_SIZE,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    MAGIC_NOOP,
    MAGIC_NORMAL,
    MIN_BLANK_LEN,
    EntryHeader,
    body_crc_ok,
    decode_header,
)
from ariane.errors import CorruptionError, StoreError
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue

__all__ = ["DLedgerFiles", "LogBegin", "RecoveryReport"]

logger = logging.getLogger(__name__)

_INDEX_DTYPE = np.dtype(
    [("magic", ">i4"), ("pos", ">i8"), ("size", ">i4"), ("index", ">i8"), ("term", ">i8")]
)
_BLANK = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class LogBegin:
    """Where the log starts: its first index, that entry's data offset (-1 until a wiped log
    receives its first entry) and the term of the entry before it (-1 when unknown)."""

    index: int
    pos: int
    base_term: int


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found."""

    entries_checked: int
    cut_at: int | None
    reason: str | None


class DLedgerFiles:
    """Data and index files under ``base_dir``.

    Args:
        base_dir: ``<storePathRootDir>/dledger-<selfId>``.
        data_file_size: size of each data file (``mappedFileSizeCommitLog``).
        index_file_size: size of each index file (a multiple of 32).
        first_pos: data offset of the first entry of a new log (the end of an old CommitLog
            when upgrading from master/slave, else 0).
    """

    def __init__(
        self, base_dir: str, data_file_size: int, index_file_size: int, *, first_pos: int = 0
    ) -> None:
        if index_file_size % INDEX_UNIT_SIZE:
            raise StoreError(f"index file size {index_file_size} is not a multiple of 32")
        self.base_dir = base_dir
        self.data = MappedFileQueue(os.path.join(base_dir, "data"), data_file_size, populate=True)
        self.index = MappedFileQueue(os.path.join(base_dir, "index"), index_file_size)
        self.data_file_size = data_file_size
        self.index_file_size = index_file_size
        self.begin = LogBegin(0, first_pos, -1)
        self.end = -1
        #: data offset where the next entry goes (-1: taken from the next entry after a wipe)
        self.next_pos = first_pos
        #: data offset just past the last entry
        self.end_pos = first_pos

    # -- paths ------------------------------------------------------------------------------
    @property
    def begin_path(self) -> str:
        return os.path.join(self.base_dir, "begin")

    @property
    def cut_dir(self) -> str:
        return os.path.join(self.base_dir, "cut")

    # -- loading ----------------------------------------------------------------------------
    def load(self) -> RecoveryReport:
        """Map the files, walk the tail of the data and make the index agree with it.

        Raises:
            OSError: files cannot be read or written.
        """
        self._load_begin()
        data_report = self.data.load()
        if data_report.damaged:
            for path in [p for p in [data_report.bad_file, *data_report.set_aside] if p]:
                self._keep_file(path, "unloadable data file")
        index_report = self.index.load()
        if index_report.damaged:
            for path in [p for p in [index_report.bad_file, *index_report.set_aside] if p]:
                logger.warning("dropping damaged DLedger index file %s (rebuilt)", path)
                os.unlink(path)
        return self._recover()

    def _load_begin(self) -> None:
        try:
            with open(self.begin_path, "rb") as f:
                props = parse_properties(f.read().decode("utf-8"))
            self.begin = LogBegin(
                int(props["index"]), int(props["pos"]), int(props.get("baseTerm", "-1"))
            )
        except FileNotFoundError:
            pass
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise CorruptionError(
                f"unreadable DLedger begin file: {exc}", path=self.begin_path
            ) from None

    def _save_begin(self) -> None:
        b = self.begin
        props = {"index": str(b.index), "pos": str(b.pos), "baseTerm": str(b.base_term)}
        write_file_atomically(self.begin_path, format_properties(props).encode())

    def _recover(self) -> RecoveryReport:
        files = self.data.files
        begin = self.begin
        if not files:
            self._reset_positions(begin.index - 1, begin.pos)
            self._trim_index(begin.index - 1)
            return RecoveryReport(0, None, None)
        if begin.pos < 0 or begin.pos < files[0].file_from_offset:
            # a wiped log that got no entry, or files older than the begin record: start at
            # the first entry found
            first = self._first_entry_in(files[0], 0)
            begin = self.begin = LogBegin(
                first.index if first else begin.index,
                files[0].file_from_offset if first else -1,
                begin.base_term,
            )
        index_whole = bool(self.index.files) and (
            self.index.files[0].file_from_offset <= begin.index * INDEX_UNIT_SIZE
        )
        start = max(0, len(files) - 3) if index_whole else 0
        mf = files[start]
        at = begin.pos - mf.file_from_offset if begin.pos >= mf.file_from_offset else 0
        head = self._first_entry_in(mf, at)
        expected = head.index if head is not None else begin.index
        checked = 0
        reason: str | None = None
        for k in range(start, len(files)):
            mf = files[k]
            while True:
                result = self._check_at(mf, at, expected)
                if isinstance(result, str):
                    break
                self._fix_index_unit(result, mf.file_from_offset + at)
                at += result.size
                expected += 1
                checked += 1
            if result != "blank":
                reason = result
                break
            at = self.data_file_size
            if k + 1 < len(files):
                at = 0
        end_pos = mf.file_from_offset + at
        if mf is not files[-1] or (reason is not None and self._nonzero_after(end_pos)):
            reason = reason or "the log ends before the last data file"
            logger.warning("DLedger log valid data ends at %d: %s", end_pos, reason)
        else:
            reason = None
        self._cut_data(end_pos, keep=True)
        self._reset_positions(expected - 1, end_pos)
        self._trim_index(expected - 1)
        return RecoveryReport(checked, end_pos if reason else None, reason)

    def _first_entry_in(self, mf: MappedFile, at: int) -> EntryHeader | None:
        try:
            return decode_header(mf.mm, at)
        except CorruptionError:
            return None

    def _check_at(self, mf: MappedFile, at: int, expected: int) -> EntryHeader | str:
        """The entry at ``at`` if it is entry ``expected`` and sound; otherwise "blank" (the
        file ends), or why the log ends here."""
        size = self.data_file_size
        if at + MIN_BLANK_LEN > size:
            return "blank" if at >= size else "no room for an entry"
        magic, rest = _BLANK.unpack_from(mf.mm, at)
        if magic == BLANK_MAGIC:
            return "blank" if rest == size - at else f"bad blank size {rest} at {at}"
        try:
            head = decode_header(mf.mm, at)
        except CorruptionError as exc:
            return str(exc)
        pos = mf.file_from_offset + at
        if head.index != expected or head.pos != pos or at + head.size + MIN_BLANK_LEN > size:
            return f"entry {head.index} at {pos} is not entry {expected} at its place"
        body = mf.mm[at + ENTRY_HEADER_SIZE : at + head.size]
        if not body_crc_ok(head, body):
            return f"body CRC mismatch of entry {head.index} at {pos}"
        return head

    def _nonzero_after(self, pos: int) -> bool:
        mf = self.data.find_mapped_file_by_offset(pos)
        if mf is None:
            return False
        at = pos - mf.file_from_offset
        return mf.nonzero_end(at) > at or mf is not self.data.files[-1]

    def _fix_index_unit(self, head: EntryHeader, pos: int) -> None:
        unit = INDEX_UNIT.pack(head.magic, pos, head.size, head.index, head.term)
        offset = head.index * INDEX_UNIT_SIZE
        mf = self.index.find_mapped_file_by_offset(offset)
        while mf is None:
            self._index_file_for(offset)
            mf = self.index.find_mapped_file_by_offset(offset)
        at = offset - mf.file_from_offset
        if mf.mm[at : at + INDEX_UNIT_SIZE] != unit:
            mf.mm[at : at + INDEX_UNIT_SIZE] = unit
        mf.wrote_position = max(mf.wrote_position, at + INDEX_UNIT_SIZE)

    def _reset_positions(self, end: int, end_pos: int) -> None:
        self.end = end
        self.end_pos = end_pos
        self.next_pos = end_pos

    def _trim_index(self, end: int) -> None:
        """Zero index units after ``end`` and drop later index files."""
        offset = (end + 1) * INDEX_UNIT_SIZE
        mf = self.index.find_mapped_file_by_offset(offset)
        if mf is not None:
            at = offset - mf.file_from_offset
            stop = mf.nonzero_end(at)
            if stop > at:
                mf.mm[at:stop] = bytes(stop - at)
        self.index.truncate_dirty_files(offset)
        for mf in self.index.files:
            mf.flushed_position = min(mf.flushed_position, mf.wrote_position)

    # -- what is held ---------------------------------------------------------------------------
    def unit(self, index: int) -> tuple[int, int, int, int, int] | None:
        """(magic, pos, size, index, term) of entry ``index``, None when not held."""
        if not self.begin.index <= index <= self.end:
            return None
        offset = index * INDEX_UNIT_SIZE
        mf = self.index.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        value: tuple[int, int, int, int, int] = INDEX_UNIT.unpack_from(
            mf.mm, offset - mf.file_from_offset
        )
        return value

    def term_at(self, index: int) -> int:
        """Term of entry ``index`` (``base_term`` for ``begin - 1``; -1 when unknown)."""
        if index == self.begin.index - 1:
            return self.begin.base_term
        unit = self.unit(index)
        return -1 if unit is None else unit[4]

    def entry(self, index: int) -> bytes | None:
        """The whole entry ``index`` (header and body), None when not held."""
        unit = self.unit(index)
        if unit is None:
            return None
        pos, size = unit[1], unit[2]
        mf = self.data.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return mf.read(pos - mf.file_from_offset, size)

    def entries(self, first: int, last: int) -> list[bytes] | None:
        """The whole entries ``first .. last`` (a push): one read when they lie in one data
        file, else entry by entry. None when one is not held."""
        head, tail = self.unit(first), self.unit(last)
        if head is None or tail is None:
            return None
        start, stop = head[1], tail[1] + tail[2]
        mf = self.data.find_mapped_file_by_offset(start)
        if (
            mf is None
            or stop - start > self.data_file_size
            or stop > mf.file_from_offset + (self.data_file_size)
        ):
            return self._entries_one_by_one(first, last)
        data = mf.read(start - mf.file_from_offset, stop - start)
        if data is None:
            return None
        out: list[bytes] = []
        for index in range(first, last + 1):
            unit = head if index == first else self.unit(index)
            if unit is None:
                return None
            at = unit[1] - start
            out.append(data[at : at + unit[2]])
        return out

    def _entries_one_by_one(self, first: int, last: int) -> list[bytes] | None:
        out: list[bytes] = []
        for index in range(first, last + 1):
            data = self.entry(index)
            if data is None:
                return None
            out.append(data)
        return out

    def term_runs(self) -> list[tuple[int, int]]:
        """Term runs of entries ``begin .. end`` (from the index, vectorized)."""
        runs: list[tuple[int, int]] = []
        first, last = self.begin.index, self.end
        if last < first:
            return runs
        for mf in self.index.files:
            lo = mf.file_from_offset // INDEX_UNIT_SIZE
            hi = lo + self.index_file_size // INDEX_UNIT_SIZE - 1
            a, b = max(first, lo), min(last, hi)
            if a > b:
                continue
            units = np.frombuffer(
                mf.mm, dtype=_INDEX_DTYPE, count=b - a + 1, offset=(a - lo) * INDEX_UNIT_SIZE
            )
            terms = units["term"]
            cuts = np.flatnonzero(np.diff(terms)) + 1
            for k in (0, *cuts.tolist()):
                term = int(terms[k])
                if not runs or runs[-1][1] != term:
                    runs.append((a + k, term))
            del units, terms  # release the view of the map
        return runs

    # -- writing --------------------------------------------------------------------------------
    def reserve(self, body_size: int, pos: int | None = None) -> tuple[MappedFile, int]:
        """The file and in-file position for the next entry of ``body_size`` bytes: BLANK and
        roll when it does not fit with 8 bytes to spare. ``pos`` is where the entry must go
        (a follower copying the leader's entry); after a wipe it starts the files there.

        Raises:
            CorruptionError: ``pos`` is not where the entry goes here (different file sizes).
            OSError: a data file cannot be created.
        """
        size = ENTRY_HEADER_SIZE + body_size
        if size + MIN_BLANK_LEN > self.data_file_size:
            raise CorruptionError(f"entry of {size} bytes cannot fit in a data file")
        if self.next_pos < 0:  # the first entry of a wiped log decides where files start
            if pos is None:
                raise CorruptionError("the first entry after a wipe must carry its position")
            self.next_pos = self.end_pos = pos
            self.begin = LogBegin(self.begin.index, pos, self.begin.base_term)
            self._save_begin()
        mf = self._data_file_for(self.next_pos)
        at = self.next_pos - mf.file_from_offset
        file_end = mf.file_from_offset + self.data_file_size
        # roll when the entry does not fit, or when the leader did (it may roll for an entry
        # it then did not append, so followers take its word for a file start)
        if size + MIN_BLANK_LEN > self.data_file_size - at or pos == file_end:
            _BLANK.pack_into(mf.mm, at, BLANK_MAGIC, self.data_file_size - at)
            mf.wrote_position = self.data_file_size
            self.next_pos = file_end
            mf = self._data_file_for(self.next_pos)
            at = 0
        if pos is not None and pos != mf.file_from_offset + at:
            raise CorruptionError(
                f"entry goes to {mf.file_from_offset + at} here, the leader put it at {pos} "
                "(mappedFileSizeCommitLog must be the same on every node)"
            )
        return mf, at

    def _data_file_for(self, pos: int) -> MappedFile:
        last = self.data.last
        if (
            last is not None
            and last.file_from_offset <= pos < last.file_from_offset + self.data_file_size
        ):
            return last
        mf = self.data.get_last_mapped_file(pos)
        if mf is None or mf.file_from_offset > pos:  # pragma: no cover - defensive
            raise StoreError(f"no data file for offset {pos}")
        if not self.data.files[:-1] and mf.wrote_position == 0:
            mf.wrote_position = mf.flushed_position = pos - mf.file_from_offset
        return mf

    def _index_file_for(self, offset: int) -> MappedFile:
        mf = self.index.get_last_mapped_file(offset)
        if mf is None:  # pragma: no cover - defensive
            raise StoreError(f"no index file for offset {offset}")
        if len(self.index.files) == 1 and mf.wrote_position == 0:
            mf.wrote_position = mf.flushed_position = offset - mf.file_from_offset
        return mf

    def seal(
        self, mf: MappedFile, at: int, index: int, term: int, body_size: int, *, noop: bool = False
    ) -> int:
        """Finish entry ``index`` whose body the caller wrote at ``at + 48`` of ``mf``: write
        the header (with the body CRC) and the index unit, advance. Returns the entry's data
        offset.

        Raises:
            StoreError: ``index`` does not follow the log's end.
        """
        if index != self.end + 1:
            raise StoreError(f"entry {index} does not follow the log end {self.end}")
        pos = mf.file_from_offset + at
        body_at = at + ENTRY_HEADER_SIZE
        size = ENTRY_HEADER_SIZE + body_size
        crc = 0
        if body_size:
            crc = zlib.crc32(mf.mm[body_at : body_at + body_size]) & CRC_MASK
        magic = MAGIC_NOOP if noop else MAGIC_NORMAL
        ENTRY_HEADER.pack_into(mf.mm, at, magic, size, index, term, pos, 0, 0, crc, body_size)
        self._finish(mf, at, magic, pos, size, index, term)
        return pos

    def append_copy(self, data: bytes) -> tuple[EntryHeader, int]:
        """Write a whole entry received from the leader at its place. Returns its header and
        data offset.

        Raises:
            CorruptionError: the bytes are not a sound entry, or it is not the next one here.
        """
        head = decode_header(data)
        if head.size != len(data) or not body_crc_ok(head, memoryview(data)[ENTRY_HEADER_SIZE:]):
            raise CorruptionError(f"entry {head.index} from the leader does not check")
        if head.index != self.end + 1:
            raise CorruptionError(f"entry {head.index} does not follow the log end {self.end}")
        mf, at = self.reserve(head.body_size, head.pos)
        mf.mm[at : at + head.size] = data
        self._finish(mf, at, head.magic, head.pos, head.size, head.index, head.term)
        return head, head.pos

    def append_copies(
        self, payloads: tuple[object, ...], first_index: int, terms: tuple[int, ...]
    ) -> list[tuple[MappedFile, int, int, int]]:
        """Write the whole entries of a push, in order: :meth:`append_copy` for each, in one
        loop and without a header object per entry. Each must also be the entry the push
        names (its index and term) before it is written.

        Returns:
            (data file, in-file position, index, body size) of each NORMAL entry with a
            body: the records to dispatch.

        Raises:
            CorruptionError: an entry does not check or does not follow the log end.
            StoreError: a payload is not bytes, or not the entry the push names.
        """
        records: list[tuple[MappedFile, int, int, int]] = []
        unpack = ENTRY_HEADER.unpack_from
        crc32 = zlib.crc32
        for k, data in enumerate(payloads):
            if type(data) is not bytes:
                raise StoreError(f"entry {first_index + k}: unexpected payload {type(data)}")
            size = len(data)
            if size > ENTRY_HEADER_SIZE:
                magic, head_size, index, term, pos, _, _, crc, body_size = unpack(data)
                sound = (
                    magic == MAGIC_NORMAL
                    and head_size == size == ENTRY_HEADER_SIZE + body_size
                    and index >= 0
                    and pos >= 0
                    and crc32(memoryview(data)[ENTRY_HEADER_SIZE:]) & CRC_MASK == crc
                )
            else:
                sound = False
            if not sound:  # a NOOP, an empty body, or what does not check: the full checks
                head = decode_header(data)
                if head.size != size or not body_crc_ok(head, memoryview(data)[ENTRY_HEADER_SIZE:]):
                    raise CorruptionError(f"entry {head.index} from the leader does not check")
                magic, index, term, pos, body_size = (
                    head.magic, head.index, head.term, head.pos, head.body_size,
                )  # fmt: skip
            if index != self.end + 1:
                raise CorruptionError(f"entry {index} does not follow the log end {self.end}")
            if index != first_index + k or term != terms[k]:
                raise StoreError(f"entry {index}/{term} came as {first_index + k}")
            mf, at = self.reserve(body_size, pos)
            mf.mm[at : at + size] = data
            self._finish(mf, at, magic, pos, size, index, term)
            if magic == MAGIC_NORMAL and body_size:
                records.append((mf, at, index, body_size))
        return records

    def _finish(
        self, mf: MappedFile, at: int, magic: int, pos: int, size: int, index: int, term: int
    ) -> None:
        mf.wrote_position = at + size
        offset = index * INDEX_UNIT_SIZE
        imf = self.index.last
        if (
            imf is None
            or not imf.file_from_offset <= offset < imf.file_from_offset + self.index_file_size
        ):
            imf = self._index_file_for(offset)
        iat = offset - imf.file_from_offset
        INDEX_UNIT.pack_into(imf.mm, iat, magic, pos, size, index, term)
        imf.wrote_position = iat + INDEX_UNIT_SIZE
        self.end = index
        self.end_pos = self.next_pos = pos + size

    # -- cutting ----------------------------------------------------------------------------------
    def truncate_after(self, index: int) -> None:
        """Drop entries after ``index`` (keeping a copy of their bytes under ``cut/``)."""
        if index >= self.end:
            return
        if index < self.begin.index - 1:
            raise StoreError(f"cannot truncate at {index}, the log begins at {self.begin.index}")
        if index < self.begin.index:
            cut_pos = self.begin.pos
        else:
            unit = self.unit(index)
            assert unit is not None
            cut_pos = unit[1] + unit[2]
        self._cut_data(cut_pos, keep=True)
        self._reset_positions(index, cut_pos)
        self._trim_index(index)
        logger.warning(
            "DLedger log truncated after entry %d (cut bytes kept in %s)", index, self.cut_dir
        )

    def reset(self, begin: int, base_term: int) -> None:
        """Wipe the log (keeping copies) and restart it at ``begin``; the first entry that
        arrives decides its data offset."""
        first = self.data.first
        if first is not None:
            self._cut_data(
                self.begin.pos if self.begin.pos >= 0 else first.file_from_offset, keep=True
            )
        for mf in list(self.data.files):
            mf.destroy()
        self.data.files = []
        self.data.flushed_where = 0
        for mf in list(self.index.files):
            mf.destroy()
        self.index.files = []
        self.index.flushed_where = 0
        self.begin = LogBegin(begin, -1, base_term)
        self._save_begin()
        self.end = begin - 1
        self.end_pos = self.next_pos = -1
        logger.warning(
            "DLedger log wiped; it restarts at entry %d (old bytes kept in %s)", begin, self.cut_dir
        )

    def _cut_data(self, pos: int, *, keep: bool) -> None:
        """Remove data from ``pos`` on, saving what is not zero under ``cut/``."""
        for mf in list(self.data.files):
            end = mf.file_from_offset + self.data_file_size
            if end <= pos:
                continue
            at = max(0, pos - mf.file_from_offset)
            stop = mf.nonzero_end(at)
            if keep and stop > at:
                self._save_cut(mf.file_from_offset + at, bytes(mf.mm[at:stop]))
            if stop > at:
                mf.mm[at:stop] = bytes(stop - at)
                mf.sync()
        self.data.truncate_dirty_files(pos)

    def _save_cut(self, pos: int, data: bytes) -> None:
        os.makedirs(self.cut_dir, exist_ok=True)
        n = 0
        while os.path.exists(path := os.path.join(self.cut_dir, f"{pos:020d}.{n}")):
            n += 1
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        logger.warning("kept %d cut DLedger bytes from offset %d in %s", len(data), pos, path)

    def _keep_file(self, path: str, why: str) -> None:
        os.makedirs(self.cut_dir, exist_ok=True)
        target = os.path.join(self.cut_dir, f"{os.path.basename(path)}.{int(time.time())}")
        os.replace(path, target)
        logger.error("%s %s moved to %s", why, path, target)

    # -- cleanup ----------------------------------------------------------------------------------
    def delete_files_before(self, keep_from_pos: int, committed: int) -> int:
        """Delete data files ending at or below ``keep_from_pos`` whose entries are all
        committed (never the last file), and the index files no longer needed. Returns the
        new first index."""
        doomed: list[MappedFile] = []
        files = self.data.files
        new_begin = self.begin
        for k, mf in enumerate(files[:-1]):
            nxt = files[k + 1]
            if nxt.file_from_offset > keep_from_pos:
                break
            head = self._first_entry_in(nxt, 0)
            first_index = head.index if head is not None else self.end + 1
            if first_index - 1 > committed:
                break
            doomed.append(mf)
            new_begin = LogBegin(first_index, nxt.file_from_offset, self.term_at(first_index - 1))
        if not doomed:
            return self.begin.index
        self.begin = new_begin
        self._save_begin()
        for mf in doomed:
            mf.destroy()
        self.data.remove_files(doomed)
        limit = new_begin.index * INDEX_UNIT_SIZE
        stale = [
            m for m in self.index.files[:-1] if m.file_from_offset + self.index_file_size <= limit
        ]
        for mf in stale:
            mf.destroy()
        self.index.remove_files(stale)
        return new_begin.index

    # -- durability -------------------------------------------------------------------------------
    def flush(self) -> None:
        """Force written data and index to disk."""
        self.data.flush_all()
        self.index.flush_all()

    def shutdown(self) -> None:
        """Unmap everything."""
        self.data.shutdown()
        self.index.shutdown()
