"""Start-up recovery of the CommitLog (RocketMQ ``recoverNormally``/``recoverAbnormally``).

How it works:

1. *Validity walk*: from the third-last file (clean shutdown) or from the newest file whose
   first record is older than the checkpoint (abnormal exit), records are checked one by one
   (magic, lengths, CRC). The first invalid record marks the end of the log.
2. *Cut*: the bytes after the end in that file are copied to ``<file>.tr<N>`` and zeroed; later
   files are renamed to ``<name>.tr<N>``. Nothing is deleted silently.
3. *Re-dispatch*: records from the dispatch start to the end are handed to the ConsumeQueue and
   index builders again (they skip what they already have). The dispatch start is the walk
   start after an abnormal exit, and in any case the first record whose ConsumeQueue entry or
   index keys are missing (deleted or damaged files) or an earlier point the caller asks for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from ariane.common import faults
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.commit_log import CommitLog
from ariane.store.commit_log_files import free_tr_name
from ariane.store.format import (
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    SIZE_MAGIC,
    STORE_TIMESTAMP_POS,
    Corrupt,
    Decoded,
    DispatchRequest,
    EndOfSegment,
    check_record,
    record_route,
)
from ariane.store.mapped_file import MappedFile

__all__ = ["RecoveryResult", "choose_abnormal_start", "redispatch", "truncate_tail", "walk"]

logger = logging.getLogger(__name__)

_I64_AT = 8

#: Called with ``(topic, queue id, physical offset, sysflag)`` of valid records seen by the
#: walk (to find missing dispatch work); returns False once it has seen enough.
Observer = Callable[[str, int, int, int], bool]


@dataclass(slots=True)
class RecoveryResult:
    """Where the valid log ends and what the walk saw."""

    process_offset: int
    start_offset: int
    last_store_timestamp_ms: int
    records: int
    stop_reason: str | None


def choose_abnormal_start(commit_log: CommitLog, checkpoint: StoreCheckpoint) -> int:
    """Index of the newest file whose first record was stored before the checkpoint."""
    files = commit_log.queue.files
    limit = checkpoint.min_timestamp
    for index in range(len(files) - 1, -1, -1):
        head = files[index].mm[:64]
        magic = SIZE_MAGIC.unpack_from(head, 0)[1]
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
            continue
        store_ts = int.from_bytes(head[STORE_TIMESTAMP_POS : STORE_TIMESTAMP_POS + _I64_AT], "big")
        if store_ts == 0:
            continue
        if store_ts <= limit:
            return index
    return 0


def walk(
    commit_log: CommitLog,
    start_index: int,
    *,
    check_crc: bool,
    levels_ms: tuple[int, ...],
    observe: Observer | None,
) -> RecoveryResult:
    """Walk records from file ``start_index`` to the first invalid one."""
    files = commit_log.queue.files
    if not files:
        return RecoveryResult(0, 0, 0, 0, None)
    index = start_index
    mf = files[index]
    start = mf.file_from_offset
    pos = 0
    last: tuple[MappedFile, int] | None = None
    records = 0
    reason: str | None = None
    size = commit_log.file_size
    watching = observe is not None
    while True:
        res = check_record(
            mf.mm, pos, size, check_crc=check_crc, want_dispatch=False, want_route=watching
        )
        if isinstance(res, Decoded):
            if res.route is not None:
                assert observe is not None
                topic, queue_id, sys_flag, _ts = res.route
                watching = observe(topic, queue_id, mf.file_from_offset + pos, sys_flag)
            last = (mf, pos)
            pos += res.size
            records += 1
            continue
        if isinstance(res, EndOfSegment):
            index += 1
            if index >= len(files):
                pos = size
                break
            mf = files[index]
            pos = 0
            continue
        assert isinstance(res, Corrupt)
        if mf.mm[pos : pos + 8] != bytes(8):
            reason = f"{res.reason} at {mf.file_from_offset + pos}"
        break
    return RecoveryResult(mf.file_from_offset + pos, start, _store_time(last), records, reason)


def _store_time(last: tuple[MappedFile, int] | None) -> int:
    """The store time of the record at ``last`` (0 for none)."""
    return record_route(last[0].mm, last[1])[3] if last is not None else 0


def truncate_tail(commit_log: CommitLog, offset: int) -> None:
    """Cut the log at ``offset``: save and zero the torn bytes, set aside later files."""
    queue = commit_log.queue
    mf = queue.find_mapped_file_by_offset(offset)
    if mf is not None:
        pos = offset - mf.file_from_offset
        end = mf.nonzero_end(pos)
        if end > pos:
            disk = commit_log.disk
            saved = free_tr_name(disk, mf.path)
            disk.write_file(saved, bytes(mf.mm[pos:end]), sync=True)
            disk.sync_dir(os.path.dirname(saved) or ".")
            logger.warning(
                "recovery cut %d bytes at offset %d of %s; saved them in %s",
                end - pos, offset, mf.path, saved,
            )  # fmt: skip
            faults.point("recovery.after_save_tail")
            mf.mm[pos:end] = bytes(end - pos)
            mf.sync()
            faults.point("recovery.after_zero_tail")
    queue.truncate_dirty_files(offset, commit_log.set_aside)
    queue.flushed_where = offset


def redispatch(
    commit_log: CommitLog,
    dispatch: Callable[[list[DispatchRequest]], object],
    from_offset: int,
    to_offset: int,
    levels_ms: tuple[int, ...],
    *,
    from_record: bool = False,
) -> int:
    """Re-dispatch records in [from_offset, to_offset); return how many were dispatched.

    Records are decoded from the start of the file holding ``from_offset``, or from
    ``from_offset`` itself when the caller knows a record starts there (``from_record``).
    Damaged records (in files older than the validity walk) make the walk skip to the next
    file, with an error log.
    """
    files = commit_log.queue.files
    if not files or from_offset >= to_offset:
        return 0
    size = commit_log.file_size
    from_offset = max(from_offset, files[0].file_from_offset)
    batch: list[DispatchRequest] = []
    count = 0
    for mf in files:
        if mf.file_from_offset + size <= from_offset:
            continue
        if mf.file_from_offset >= to_offset:
            break
        pos = from_offset - mf.file_from_offset if from_record else 0
        pos = max(pos, 0)
        limit = min(size, to_offset - mf.file_from_offset)
        while pos < limit:
            res = check_record(
                mf.mm, pos, limit, check_crc=False, want_dispatch=True, levels_ms=levels_ms
            )
            if isinstance(res, Decoded):
                assert res.dispatch is not None
                if res.dispatch.commit_log_offset >= from_offset:
                    batch.append(res.dispatch)
                    if len(batch) >= 4096:
                        dispatch(batch)
                        count += len(batch)
                        batch = []
                pos += res.size
                continue
            if isinstance(res, Corrupt) and mf.file_from_offset + pos < to_offset:
                logger.error(
                    "re-dispatch skipped the rest of %s after a damaged record at %d: %s",
                    mf.path, mf.file_from_offset + pos, res.reason,
                )  # fmt: skip
            break
    if batch:
        dispatch(batch)
        count += len(batch)
    return count
