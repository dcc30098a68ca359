"""Deleting old files and watching the disk (``CleanCommitLogService``/``CleanConsumeQueueService``).

How it works: every ``clean_resource_interval_ms`` the CommitLog pass runs when the hour is in
``delete_when``, when disk usage exceeds ``disk_max_used_space_ratio`` or after a manual
request. It deletes files from the oldest on, never the last (active) one, stopping at the
first file that is not expired (mtime older than ``file_reserved_time_hours``) unless usage is
above the forced-cleanup ratio (85 %), and at most 10 files per pass. Above the warning ratio
(90 %) the store refuses writes; at or below 85 % it accepts them again. Then ConsumeQueue
files whose entries all point below the new CommitLog minimum, and likewise index files, are
deleted. Clock and disk usage are injected so tests need neither waiting nor a full disk.

When space is short and no file can be deleted, the warning is logged when that state begins,
then at most every ``NO_ROOM_WARN_INTERVAL_MS`` while it lasts (not on every 10 s pass), and
its end is logged once.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterable

from ariane.common import faults
from ariane.common.clock import Clock
from ariane.store.commit_log import CommitLog
from ariane.store.config import StoreConfig
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.index_file import IndexService
from ariane.store.service import ServiceThread

__all__ = ["CleanService", "DiskUsage", "disk_usage_ratio"]

logger = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10
MANUAL_DELETE_TIMES = 20
#: while space stays short with nothing deletable, the warning repeats at most this often
NO_ROOM_WARN_INTERVAL_MS = 600_000

#: Returns the used fraction (0..1) of the partition holding a path, or -1 when unknown.
DiskUsage = Callable[[str], float]


def disk_usage_ratio(path: str) -> float:
    """Used fraction of the file system holding ``path`` (-1 on error), as ``df`` and
    RocketMQ 5 (``UtilAll.getDiskPartitionSpaceUsedPercent``) count it: used / (used +
    available to unprivileged users), so blocks reserved for root count as neither."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    entire = usage.used + usage.free
    if usage.total <= 0 or entire <= 0:
        return -1.0
    return usage.used / entire


class CleanService(ServiceThread):
    """Periodic deletion of expired files and the disk-full flag.

    Args:
        config: the store configuration.
        commit_log: the CommitLog.
        queues: returns the ConsumeQueues.
        index: the index service (or None).
        clock: wall clock (file expiry, ``delete_when`` hour).
        disk_usage: disk usage probe.
        set_disk_full: called with a reason when writes must be refused, None when allowed.
    """

    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        queues: Callable[[], Iterable[ConsumeQueue]],
        index: IndexService | None,
        clock: Clock,
        disk_usage: DiskUsage,
        set_disk_full: Callable[[str | None], None],
    ) -> None:
        super().__init__("CleanService")
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.clock = clock
        self.disk_usage = disk_usage
        self.set_disk_full = set_disk_full
        self.manual_delete_times = 0
        self.last_physical_min_offset = 0
        self.disk_ratio = 0.0
        self._first = True
        #: monotonic ms of the last "no file could be deleted" warning; None outside that state
        self._no_room_warned_ms: float | None = None

    def run_once(self) -> None:
        self.wait(60.0 if self._first else self.config.clean_resource_interval_ms / 1000)
        self._first = False
        if not self.stopped:
            self.clean_once()

    def clean_once(self) -> tuple[int, int]:
        """One full pass; returns (CommitLog files deleted, ConsumeQueue/index files deleted)."""
        deleted = self.clean_commit_log()
        if deleted:
            faults.point("cleanup.after_commitlog_delete")
        return deleted, self.clean_consume_queues()

    def request_manual_delete(self) -> None:
        """``executeDeleteFilesManually``: run the next 20 passes regardless of hour/space."""
        self.manual_delete_times = MANUAL_DELETE_TIMES

    # -- CommitLog -----------------------------------------------------------------------
    def _is_time_to_delete(self) -> bool:
        hour = time.localtime(self.clock.now_ms() / 1000).tm_hour
        return any(int(h) == hour for h in self.config.delete_when.split(";") if h.strip())

    def _space_check(self) -> tuple[bool, bool]:
        """(space is short, clean immediately); also sets or clears the disk-full flag."""
        cfg = self.config
        paths = [cfg.commit_log_dir, cfg.consume_queue_dir]
        ratios = [self.disk_usage(p) for p in paths]
        ratio = max(ratios)
        self.disk_ratio = ratios[0]
        clean_now = False
        if ratio > cfg.disk_space_warning_level_ratio:
            clean_now = True
            self.set_disk_full(
                f"disk full: {ratio:.0%} used > {cfg.disk_space_warning_level_ratio:.0%}"
            )
        elif ratio > cfg.disk_space_clean_forcibly_ratio:
            clean_now = True
        else:
            self.set_disk_full(None)
        short = ratio < 0 or ratio > cfg.disk_max_used_space_ratio_clamped
        return short, clean_now

    def clean_commit_log(self) -> int:
        """Delete expired CommitLog files if triggered; return how many were deleted."""
        time_up = self._is_time_to_delete()
        space_short, clean_now = self._space_check()
        manual = self.manual_delete_times > 0
        if not (time_up or space_short or manual):
            self._report_no_room(False)
            return 0
        if manual:
            self.manual_delete_times -= 1
        force = self.config.clean_file_forcibly_enable and clean_now
        deleted = self.delete_expired_commit_log_files(force)
        self._report_no_room(space_short and not deleted)
        return deleted

    def _report_no_room(self, no_room: bool) -> None:
        """Warn when space is short and nothing could be deleted: when it starts, then at
        most every ``NO_ROOM_WARN_INTERVAL_MS``; say once when it is over."""
        now = self.clock.monotonic() * 1000
        last = self._no_room_warned_ms
        if not no_room:
            if last is not None:
                self._no_room_warned_ms = None
                logger.info("disk space: files can be deleted again (or space is no longer short)")
            return
        if last is not None and now - last < NO_ROOM_WARN_INTERVAL_MS:
            return
        self._no_room_warned_ms = now
        used = f"{self.disk_ratio:.0%} used" if self.disk_ratio >= 0 else "usage unknown"
        logger.warning(
            "disk space will be full soon (%s), but no file could be deleted: free space "
            "or raise the disk limits (repeated every %d min while it lasts)",
            used,
            NO_ROOM_WARN_INTERVAL_MS // 60_000,
        )

    def delete_expired_commit_log_files(self, force: bool) -> int:
        """``deleteExpiredFileByTime``: oldest first, never the last file, at most 10."""
        reserved_ms = self.config.file_reserved_time_hours * 3_600_000
        return self.commit_log.delete_expired_files(
            self.clock.now_ms(), reserved_ms, force, DELETE_FILES_BATCH_MAX
        )

    # -- ConsumeQueue and index ----------------------------------------------------------
    def clean_consume_queues(self) -> int:
        """Delete ConsumeQueue and index files wholly below the CommitLog minimum."""
        min_offset = self.commit_log.min_offset
        if min_offset <= self.last_physical_min_offset:
            return 0
        self.last_physical_min_offset = min_offset
        deleted = 0
        for cq in list(self.queues()):
            deleted += cq.delete_expired_files(min_offset)
            if deleted:
                faults.point("cleanup.after_queue_delete")
        if self.index is not None:
            deleted += self.index.delete_expired_files(min_offset)
        return deleted
