"""A slave's CommitLog: the master's bytes appended at the same offsets (RocketMQ
``DefaultMessageStore.appendToCommitLog`` / ``CommitLog.appendData``).

How it works: replication hands the store raw CommitLog bytes cut anywhere (a transfer frame
may end in the middle of a record) together with the offset they start at, which must be the
end of the local log. Before anything is written the bytes are checked: together with the
incomplete record already at the end of the log they must form valid records (magic, sizes,
body CRC, each record's PHYSICALOFFSET equal to where it lands, nothing straddling a file)
and BLANK fillers that end exactly at a file end; only the tail of an incomplete record is
taken on trust until the rest arrives. Bad bytes are refused whole, so garbage never reaches
the files. The complete records are then copied into the mapped files (creating the next file at a
file boundary) and each becomes a dispatch request for the reput
thread, exactly as if the record had been put here; the per-queue next offsets and the store
clock follow, so the log can later continue as a master.

Only complete records (and BLANK fillers) reach the files: the bytes of a record still
incomplete wait in memory (``received_offset`` counts them), so the log always ends at a
record boundary, acknowledges only whole records and can continue as a master at any time;
a new connection resends them. ``confirm`` compares bytes the master sends for a range the
slave already has (the history check of :mod:`ariane.ha`). Thread-safe through the
CommitLog's put lock. Synchronous, no I/O besides the mapped files.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from ariane.common.sysflag import enters_consume_queue
from ariane.store.commit_log import CommitLog
from ariane.store.format import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    SIZE_MAGIC,
    Decoded,
    DispatchRequest,
    check_record,
)

__all__ = ["ReplicaResult", "ReplicaStatus", "ReplicaWriter", "scan_replica_bytes"]

logger = logging.getLogger(__name__)


class ReplicaStatus(enum.Enum):
    """Outcome of a replicated append."""

    OK = "OK"
    #: the bytes do not start at the end of the log (nothing written)
    OFFSET_MISMATCH = "OFFSET_MISMATCH"
    #: the bytes are not valid CommitLog content (nothing written)
    CORRUPT = "CORRUPT"
    #: the store does not take replicated bytes now (not a replica, not running, I/O error)
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(frozen=True, slots=True)
class ReplicaResult:
    """What an append did: its status, the log's end afterwards, how many records it
    completed and, when refused, why."""

    status: ReplicaStatus
    max_offset: int
    records: int = 0
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when the bytes were written."""
        return self.status is ReplicaStatus.OK


@dataclass(frozen=True, slots=True)
class _Scan:
    """The records found in a run of bytes (see :func:`scan_replica_bytes`)."""

    requests: list[DispatchRequest]
    consumed: int
    error: str | None


def scan_replica_bytes(
    buf: bytes | bytearray,
    start: int,
    file_size: int,
    levels_ms: tuple[int, ...],
) -> _Scan:
    """Walk the records of ``buf``, whose first byte sits at CommitLog offset ``start``
    (a record boundary).

    Returns the dispatch requests of the complete records, how many bytes they (and complete
    BLANK fillers) cover, and an error text when the bytes cannot be CommitLog content. An
    incomplete record at the end is not an error once its 8-byte head is plausible (or
    shorter than that). Pure: no I/O, never raises on arbitrary bytes.
    """
    requests: list[DispatchRequest] = []
    i = 0
    end = len(buf)
    while end - i >= 8:
        here = start + i
        room = file_size - here % file_size
        total, magic = SIZE_MAGIC.unpack_from(buf, i)
        if magic == BLANK_MAGIC_CODE:
            if total != room:
                return _Scan(requests, i, f"BLANK record at {here} is {total} bytes, not {room}")
            if end - i < total:
                break
            i += total
            continue
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
            return _Scan(requests, i, f"bad magic code {magic & 0xFFFFFFFF:#010x} at {here}")
        if total < MIN_RECORD_SIZE or total + END_FILE_MIN_BLANK_LENGTH > room:
            return _Scan(requests, i, f"record at {here} has an impossible size {total}")
        if end - i < total:
            break
        res = check_record(
            buf, i, i + total, check_crc=True, want_dispatch=True, levels_ms=levels_ms
        )
        if not isinstance(res, Decoded) or res.dispatch is None:
            reason = getattr(res, "reason", "not a message record")
            return _Scan(requests, i, f"bad record at {here}: {reason}")
        request = res.dispatch
        if request[2] != here:
            return _Scan(requests, i, f"record at {here} says it is at {request[2]}")
        requests.append(request)
        i += total
    return _Scan(requests, i, None)


class ReplicaWriter:
    """Appends replicated bytes to a CommitLog.

    Args:
        commit_log: the log (its put lock guards every append).
        levels_ms: delay levels (the tagsCode of ``SCHEDULE_TOPIC_XXXX`` records).
    """

    def __init__(self, commit_log: CommitLog, levels_ms: tuple[int, ...]) -> None:
        self.commit_log = commit_log
        self.levels_ms = levels_ms
        #: bytes received after the last complete record, held until the record completes
        self._tail = bytearray()
        self.records = 0
        self.bytes = 0

    @property
    def received_offset(self) -> int:
        """Where the next replicated bytes must start: the log's end plus the incomplete
        record held in memory."""
        return self.commit_log.max_offset + len(self._tail)

    def reset(self) -> None:
        """Forget an incomplete record (a new connection resends it)."""
        with self.commit_log.put_lock:
            self._tail.clear()

    def append(self, offset: int, data: bytes) -> ReplicaResult:
        """Append ``data`` at CommitLog ``offset`` (see the module docstring).

        Raises:
            OSError: a new CommitLog file could not be created (what was written before it
                is complete records; the caller should stop replicating).
        """
        log = self.commit_log
        with log.put_lock:
            size = log.file_size
            end = log.max_offset
            if not log.queue.files and not self._tail:
                # an empty log starts wherever the master's data does, at a file boundary
                if offset % size:
                    return ReplicaResult(
                        ReplicaStatus.OFFSET_MISMATCH, end,
                        reason=f"an empty log must start at a file boundary, not at {offset}",
                    )  # fmt: skip
                end = offset
            expected = end + len(self._tail)
            if offset != expected:
                return ReplicaResult(
                    ReplicaStatus.OFFSET_MISMATCH, end,
                    reason=f"bytes for offset {offset}, expected {expected}",
                )  # fmt: skip
            if not data:
                return ReplicaResult(ReplicaStatus.OK, end)
            buf = self._tail + data
            scan = scan_replica_bytes(buf, end, size, self.levels_ms)
            if scan.error is not None:
                return ReplicaResult(ReplicaStatus.CORRUPT, end, reason=scan.error)
            if scan.consumed:
                self._write(end, memoryview(buf)[: scan.consumed])
                self._dispatch(scan.requests)
                del buf[: scan.consumed]
            self._tail = buf
            self.records += len(scan.requests)
            self.bytes += len(data)
            return ReplicaResult(ReplicaStatus.OK, log.max_offset, len(scan.requests))

    def confirm(self, offset: int, data: bytes) -> bool:
        """Whether the log holds exactly ``data`` at ``offset`` (False past its end)."""
        stop = offset + len(data)
        if offset < 0 or stop > self.commit_log.max_offset:
            return False
        return self._read(offset, stop) == data

    def _read(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of the log (may span files; missing files read as empty)."""
        parts = []
        pos = start
        while pos < stop:
            chunk = self.commit_log.get_data(pos, stop - pos)
            if not chunk:
                break
            parts.append(chunk)
            pos += len(chunk)
        return b"".join(parts)

    def _write(self, offset: int, data: memoryview) -> None:
        queue = self.commit_log.queue
        size = self.commit_log.file_size
        view = data
        pos = offset
        while view:
            mf = queue.get_last_mapped_file(pos)
            assert mf is not None
            at = pos - mf.file_from_offset
            if at != mf.wrote_position:
                raise AssertionError(f"replica write at {pos}, file position {at}")
            n = min(len(view), size - at)
            mf.mm[at : at + n] = view[:n]
            mf.wrote_position = at + n
            view = view[n:]
            pos += n
        # the next local put must look for its file again (CommitLog caches the last one)
        self.commit_log._current = None

    def _dispatch(self, requests: list[DispatchRequest]) -> None:
        if not requests:
            return
        log = self.commit_log
        table = log.topic_queue_table
        for req in requests:
            if enters_consume_queue(req[9]):
                key = (req[0], req[1])
                if req[6] + 1 > table.get(key, 0):
                    table[key] = req[6] + 1
        log.pending.extend(requests)
        last_ts = requests[-1][5]
        log.set_last_store_timestamp(last_ts)
        mf = log.queue.last
        if mf is not None:
            mf.store_timestamp = max(mf.store_timestamp, last_ts)
