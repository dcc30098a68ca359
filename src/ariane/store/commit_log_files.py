"""CommitLog file maintenance: deleting expired files and keeping files cut off by recovery.

How it works (RocketMQ's ``CommitLog.deleteExpiredFile`` / ``MappedFileQueue.deleteExpiredFileByTime``):
files go from the oldest on, never the last (the one being written), and the scan stops at the
first file not yet older than the reserve time unless the cleanup is forced (disk space short);
the directory is synced once after the batch of deletions. Recovery never deletes a file it cuts
off: the file is renamed to ``<name>.tr<N>`` so an operator can still read it.
"""

from __future__ import annotations

import logging
import os

from ariane.store.disk import Disk
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue

__all__ = ["delete_expired_files", "free_tr_name", "set_aside"]

logger = logging.getLogger(__name__)


def delete_expired_files(
    queue: MappedFileQueue, disk: Disk, now_ms: int, reserved_ms: int, force: bool, limit: int
) -> int:
    """Delete files of ``queue`` from the oldest on, never the last one, stopping at the first
    that is not older than ``reserved_ms`` (unless ``force``); at most ``limit``. Returns how
    many were deleted."""
    doomed: list[MappedFile] = []
    forced = 0
    for mf in queue.files[:-1]:
        expired = now_ms >= mf.last_modified_ms() + reserved_ms
        if not (expired or force):
            break
        mf.shutdown_mark(now_ms)
        if not mf.destroy(sync_dir=False):
            break
        doomed.append(mf)
        forced += not expired
        if len(doomed) >= limit:
            break
    if doomed:
        disk.sync_dir(queue.store_path)
        queue.remove_files(doomed)
        if len(doomed) > forced:
            logger.info("deleted %d expired CommitLog file(s)", len(doomed) - forced)
        if forced:
            logger.warning(
                "forced cleanup: deleted %d CommitLog file(s) before they expired "
                "(disk space is short)",
                forced,
            )
    return len(doomed)


def set_aside(disk: Disk, mf: MappedFile) -> None:
    """Rename a file cut off by recovery to ``<name>.tr<N>`` instead of deleting it (an
    all-zero file, e.g. pre-allocated and never written, is simply deleted)."""
    if mf.nonzero_end(0) == 0:
        mf.destroy()
        return
    mf.close()
    target = free_tr_name(disk, mf.path)
    disk.replace(mf.path, target)
    disk.sync_dir(os.path.dirname(mf.path) or ".")
    logger.warning("recovery set aside %s as %s", mf.path, target)


def free_tr_name(disk: Disk, path: str) -> str:
    """``<path>.tr<N>`` for the first N not taken (where cut bytes are kept)."""
    n = 0
    while disk.exists(f"{path}.tr{n}"):
        n += 1
    return f"{path}.tr{n}"
