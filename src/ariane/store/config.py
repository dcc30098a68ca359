"""``StoreConfig``: the message store's settings (RocketMQ ``MessageStoreConfig``).

Field names are the RocketMQ keys in snake case with their unit appended; defaults are
RocketMQ's. Validation names the RocketMQ key in the :class:`~ariane.errors.ConfigError`.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, fields

from ariane.errors import ConfigError
from ariane.store.warm_pacing import (
    WARM_FAST_WRITER_BYTES_PER_S,
    WARM_MAX_LEAD_BYTES,
    WARM_MIN_LEAD_BYTES,
)

__all__ = ["FlushDiskType", "StoreConfig", "parse_delay_levels"]

CQ_UNIT_SIZE = 20
INDEX_HEADER_SIZE = 40
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY_RE = re.compile(r"^(\d+)([smhd])$")


class FlushDiskType(enum.Enum):
    """``flushDiskType``: when a put counts as stored."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """Parse ``messageDelayLevel`` ("1s 5s ... 2h") into milliseconds per level (level 1 first).

    Raises:
        ConfigError: a level is not ``<digits><s|m|h|d>``.
    """
    out = []
    for part in text.split():
        m = _DELAY_RE.fullmatch(part)
        if not m:
            raise ConfigError("messageDelayLevel", f"bad level {part!r}")
        out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    if not out:
        raise ConfigError("messageDelayLevel", "no levels")
    return tuple(out)


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


def _snap_precision(value: int) -> int:
    """``setTimerPrecisionMs``: 100, 200, 500 or 1000 ms (the nearest one below)."""
    for step in (1000, 500, 200):
        if value >= step:
            return step
    return 100


#: ``dedupWindowSize``: ids the idempotence window keeps (``ariane.store.dedup``; about 450
#: bytes each with a 32-character id).
DEFAULT_DEDUP_WINDOW_SIZE = 200_000
#: ``dedupWindowMs``: how long an id is kept after its message was stored.
DEFAULT_DEDUP_WINDOW_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """Message store configuration. Every field has RocketMQ's default.

    Sizes are bytes, times milliseconds unless the name says otherwise. The CommitLog file
    must be larger than ``max_message_size + 8``; the ConsumeQueue file size is rounded up to a
    multiple of 20 as RocketMQ does.
    """

    store_path_root_dir: str = ""
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * CQ_UNIT_SIZE
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64
    message_index_enable: bool = True
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    sync_flush_timeout_ms: int = 5_000
    #: SYNC_FLUSH: the group commit thread's scheduler time slice (``groupCommitSliceNs``,
    #: ariane.common.sched; 0 = the kernel's default). Issue 18: woken at the end of each
    #: fdatasync, the thread waited up to a tick (4 ms) for a CPU while both were busy.
    group_commit_slice_ns: int = 100_000
    flush_interval_consume_queue_ms: int = 1_000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    max_message_size: int = 1024 * 1024 * 4
    max_topic_length: int = 127
    max_properties_length: int = 32767
    file_reserved_time_hours: int = 72
    delete_when: str = "04"
    clean_resource_interval_ms: int = 10_000
    delete_commit_log_files_interval_ms: int = 100
    destroy_mapped_file_interval_forcibly_ms: int = 120_000
    disk_max_used_space_ratio: int = 75
    disk_space_warning_level_ratio: float = 0.90
    disk_space_clean_forcibly_ratio: float = 0.85
    clean_file_forcibly_enable: bool = True
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    default_query_max_num: int = 32
    # -- timer messages (issue 16): RocketMQ 5's timer wheel (ariane.store.timer) --
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_roll_window_slot: int = 2 * 24 * 3600
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_flush_interval_ms: int = 1000
    # -- idempotent sends (issue 19): ariane.store.dedup --
    dedup_window_size: int = DEFAULT_DEDUP_WINDOW_SIZE
    dedup_window_ms: int = DEFAULT_DEDUP_WINDOW_MS
    # -- CommitLog pages warmed ahead of the writer (issue 18): ariane.store.warm_pacing --
    commit_log_warm_min_lead_bytes: int = WARM_MIN_LEAD_BYTES
    commit_log_warm_max_lead_bytes: int = WARM_MAX_LEAD_BYTES
    commit_log_warm_fast_writer_bytes_per_s: int = WARM_FAST_WRITER_BYTES_PER_S
    #: SYNC_FLUSH: the CommitLog's pages this far ahead of the writer written back once,
    #: unchanged, so their blocks are no longer "unwritten" when a group commit's fdatasync
    #: writes the records (``commitLogInitLead``, 0 = off; ariane.store.allocate).
    commit_log_init_lead_bytes: int = 256 << 10

    def __post_init__(self) -> None:
        if not self.store_path_root_dir:
            object.__setattr__(self, "store_path_root_dir", _default_root())
        object.__setattr__(self, "timer_precision_ms", _snap_precision(self.timer_precision_ms))
        rem = self.mapped_file_size_consume_queue % CQ_UNIT_SIZE
        if rem:
            object.__setattr__(
                self,
                "mapped_file_size_consume_queue",
                self.mapped_file_size_consume_queue + CQ_UNIT_SIZE - rem,
            )
        self._validate()

    def _validate(self) -> None:
        positive = {
            "mappedFileSizeConsumeQueue": self.mapped_file_size_consume_queue,
            "maxHashSlotNum": self.max_hash_slot_num,
            "maxIndexNum": self.max_index_num,
            "maxMessageSize": self.max_message_size,
            "flushIntervalCommitLog": self.flush_interval_commit_log_ms,
            "flushIntervalConsumeQueue": self.flush_interval_consume_queue_ms,
            "syncFlushTimeout": self.sync_flush_timeout_ms,
            "cleanResourceInterval": self.clean_resource_interval_ms,
            "maxTransferBytesOnMessageInMemory": self.max_transfer_bytes_on_message_in_memory,
            "maxTransferCountOnMessageInMemory": self.max_transfer_count_on_message_in_memory,
            "maxTransferBytesOnMessageInDisk": self.max_transfer_bytes_on_message_in_disk,
            "maxTransferCountOnMessageInDisk": self.max_transfer_count_on_message_in_disk,
            "maxMsgsNumBatch": self.max_msgs_num_batch,
        }
        for key, value in positive.items():
            if value <= 0:
                raise ConfigError(key, f"must be > 0, got {value}")
        non_negative = {
            "flushCommitLogLeastPages": self.flush_commit_log_least_pages,
            "flushCommitLogThoroughInterval": self.flush_commit_log_thorough_interval_ms,
            "flushConsumeQueueLeastPages": self.flush_consume_queue_least_pages,
            "flushConsumeQueueThoroughInterval": self.flush_consume_queue_thorough_interval_ms,
            "fileReservedTime": self.file_reserved_time_hours,
            "deleteCommitLogFilesInterval": self.delete_commit_log_files_interval_ms,
            "destroyMapedFileIntervalForcibly": self.destroy_mapped_file_interval_forcibly_ms,
        }
        for key, value in non_negative.items():
            if value < 0:
                raise ConfigError(key, f"must be >= 0, got {value}")
        if self.mapped_file_size_commit_log <= self.max_message_size + 8:
            raise ConfigError(
                "mappedFileSizeCommitLog",
                f"{self.mapped_file_size_commit_log} must exceed maxMessageSize + 8 "
                f"({self.max_message_size + 8})",
            )
        if self.mapped_file_size_commit_log >= 1 << 31:
            # Positions inside a file are int32 in the record and in blank records.
            raise ConfigError("mappedFileSizeCommitLog", "must be < 2 GiB")
        if not 1 <= self.max_topic_length <= 32767:
            raise ConfigError("maxTopicLength", "must be in [1, 32767]")
        if not 0 <= self.max_properties_length <= 32767:
            raise ConfigError("maxPropertiesLength", "must be in [0, 32767]")
        if self.group_commit_slice_ns < 0:
            raise ConfigError("groupCommitSliceNs", "must be >= 0")
        if self.commit_log_init_lead_bytes < 0:
            raise ConfigError("commitLogInitLead", "must be >= 0")
        if not isinstance(self.flush_disk_type, FlushDiskType):
            raise ConfigError("flushDiskType", f"not a FlushDiskType: {self.flush_disk_type!r}")
        for hour in self.delete_when.split(";"):
            if not hour.strip().isdigit() or not 0 <= int(hour) <= 23:
                raise ConfigError("deleteWhen", f"bad hour {hour!r} in {self.delete_when!r}")
        if not 0 < self.disk_space_clean_forcibly_ratio <= self.disk_space_warning_level_ratio:
            raise ConfigError(
                "diskSpaceCleanForciblyRatio", "must be in (0, diskSpaceWarningLevelRatio]"
            )
        if self.disk_space_warning_level_ratio > 1:
            raise ConfigError("diskSpaceWarningLevelRatio", "must be <= 1")
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            # 0 (RocketMQ accepts it too): every read short of the newest message is "cold"
            raise ConfigError("accessMessageInMemoryMaxRatio", "must be in [0, 100]")
        index_size = INDEX_HEADER_SIZE + self.max_hash_slot_num * 4 + self.max_index_num * 20
        if index_size >= 1 << 31:
            raise ConfigError("maxIndexNum", "index file would exceed 2 GiB")
        parse_delay_levels(self.message_delay_level)
        if self.timer_max_delay_sec <= 0:
            raise ConfigError("timerMaxDelaySec", f"must be > 0, got {self.timer_max_delay_sec}")
        if self.timer_flush_interval_ms <= 0:
            raise ConfigError("timerFlushIntervalMs", "must be > 0")
        if self.dedup_window_size < 0:
            raise ConfigError("dedupWindowSize", "must be >= 0 (0 turns deduplication off)")
        if self.dedup_window_ms <= 0:
            raise ConfigError("dedupWindowMs", f"must be > 0, got {self.dedup_window_ms}")
        if self.commit_log_warm_min_lead_bytes < 0:
            raise ConfigError("commitLogWarmMinLead", "must be >= 0")
        if self.commit_log_warm_max_lead_bytes < self.commit_log_warm_min_lead_bytes:
            raise ConfigError("commitLogWarmMaxLead", "must be >= commitLogWarmMinLead")
        if self.commit_log_warm_fast_writer_bytes_per_s <= 0:
            raise ConfigError("commitLogWarmFastWriterRate", "must be > 0")
        if not 1024 <= self.mapped_file_size_timer_log < 1 << 31:
            raise ConfigError("mappedFileSizeTimerLog", "must be in [1 KiB, 2 GiB)")

    @property
    def timer_log_dir(self) -> str:
        """``{root}/timerlog``."""
        return os.path.join(self.store_path_root_dir, "timerlog")

    @property
    def timer_wheel_path(self) -> str:
        """``{root}/timerwheel``."""
        return os.path.join(self.store_path_root_dir, "timerwheel")

    @property
    def timer_checkpoint_path(self) -> str:
        """``{root}/config/timercheck``."""
        return os.path.join(self.store_path_root_dir, "config", "timercheck")

    @property
    def disk_max_used_space_ratio_clamped(self) -> float:
        """``diskMaxUsedSpaceRatio`` as a fraction, clamped to [0.10, 0.95] like RocketMQ."""
        return min(95, max(10, self.disk_max_used_space_ratio)) / 100.0

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """The delay of each level (index 0 = level 1) in milliseconds."""
        return parse_delay_levels(self.message_delay_level)

    @property
    def index_file_size(self) -> int:
        """Total bytes of one IndexFile."""
        return INDEX_HEADER_SIZE + self.max_hash_slot_num * 4 + self.max_index_num * 20

    @property
    def commit_log_dir(self) -> str:
        """``{root}/commitlog``."""
        return os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        """``{root}/consumequeue``."""
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        """``{root}/index``."""
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        """``{root}/checkpoint``."""
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        """``{root}/abort``."""
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def lock_path(self) -> str:
        """``{root}/lock``."""
        return os.path.join(self.store_path_root_dir, "lock")

    @classmethod
    def field_names(cls) -> list[str]:
        """All configuration field names."""
        return [f.name for f in fields(cls)]
