"""RocketMQ ``MessageStoreConfig`` property names mapped onto :class:`~ariane.store.StoreConfig`
fields, both ways: ``broker.conf`` keys such as ``flushDiskType`` or ``fileReservedTime`` become
store settings (``store_config``) and a store config becomes properties again
(``store_to_properties``, shown by ``getBrokerConfig``). Ratios are integer percentages in the
properties and fractions in the config. No I/O; ``ariane.broker.config`` uses this for the
store half of ``load_properties``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ariane.errors import ConfigError
from ariane.store.config import FlushDiskType, StoreConfig

__all__ = ["STORE_PROPERTIES", "store_config", "store_to_properties"]


def _percent(prop: str) -> Callable[[str], float]:
    def convert(raw: str) -> float:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(prop, f"must be an integer percentage, got {raw!r}") from None
        if not 1 <= value <= 100:
            raise ConfigError(prop, f"must be 1..100, got {value}")
        return value / 100.0

    return convert


def _flush_type(raw: str) -> FlushDiskType:
    try:
        return FlushDiskType(raw.strip().upper())
    except ValueError:
        raise ConfigError(
            "flushDiskType", f"must be ASYNC_FLUSH or SYNC_FLUSH, got {raw!r}"
        ) from None


#: RocketMQ ``MessageStoreConfig`` property -> (StoreConfig field, converter or type).
STORE_PROPERTIES: dict[str, tuple[str, Any]] = {
    "storePathRootDir": ("store_path_root_dir", str),
    "mappedFileSizeCommitLog": ("mapped_file_size_commit_log", int),
    "mappedFileSizeConsumeQueue": ("mapped_file_size_consume_queue", int),
    "maxHashSlotNum": ("max_hash_slot_num", int),
    "maxIndexNum": ("max_index_num", int),
    "maxMsgsNumBatch": ("max_msgs_num_batch", int),
    "messageIndexEnable": ("message_index_enable", bool),
    "flushDiskType": ("flush_disk_type", _flush_type),
    "flushIntervalCommitLog": ("flush_interval_commit_log_ms", int),
    "flushCommitLogLeastPages": ("flush_commit_log_least_pages", int),
    "flushCommitLogThoroughInterval": ("flush_commit_log_thorough_interval_ms", int),
    "syncFlushTimeout": ("sync_flush_timeout_ms", int),
    "groupCommitSliceNs": ("group_commit_slice_ns", int),
    "flushIntervalConsumeQueue": ("flush_interval_consume_queue_ms", int),
    "flushConsumeQueueLeastPages": ("flush_consume_queue_least_pages", int),
    "flushConsumeQueueThoroughInterval": ("flush_consume_queue_thorough_interval_ms", int),
    "maxMessageSize": ("max_message_size", int),
    "maxTopicLength": ("max_topic_length", int),
    "fileReservedTime": ("file_reserved_time_hours", int),
    "deleteWhen": ("delete_when", str),
    "cleanResourceInterval": ("clean_resource_interval_ms", int),
    "deleteCommitLogFilesInterval": ("delete_commit_log_files_interval_ms", int),
    "destroyMapedFileIntervalForcibly": ("destroy_mapped_file_interval_forcibly_ms", int),
    "diskMaxUsedSpaceRatio": ("disk_max_used_space_ratio", int),
    "diskSpaceWarningLevelRatio": (
        "disk_space_warning_level_ratio",
        _percent("diskSpaceWarningLevelRatio"),
    ),
    "diskSpaceCleanForciblyRatio": (
        "disk_space_clean_forcibly_ratio",
        _percent("diskSpaceCleanForciblyRatio"),
    ),
    "cleanFileForciblyEnable": ("clean_file_forcibly_enable", bool),
    "messageDelayLevel": ("message_delay_level", str),
    "checkCRCOnRecover": ("check_crc_on_recover", bool),
    "maxTransferBytesOnMessageInMemory": ("max_transfer_bytes_on_message_in_memory", int),
    "maxTransferCountOnMessageInMemory": ("max_transfer_count_on_message_in_memory", int),
    "maxTransferBytesOnMessageInDisk": ("max_transfer_bytes_on_message_in_disk", int),
    "maxTransferCountOnMessageInDisk": ("max_transfer_count_on_message_in_disk", int),
    "accessMessageInMemoryMaxRatio": ("access_message_in_memory_max_ratio", int),
    "defaultQueryMaxNum": ("default_query_max_num", int),
    # timer messages (issue 16)
    "timerWheelEnable": ("timer_wheel_enable", bool),
    "timerPrecisionMs": ("timer_precision_ms", int),
    "timerMaxDelaySec": ("timer_max_delay_sec", int),
    "timerRollWindowSlot": ("timer_roll_window_slot", int),
    "mappedFileSizeTimerLog": ("mapped_file_size_timer_log", int),
    "timerFlushIntervalMs": ("timer_flush_interval_ms", int),
    # idempotent sends (issue 19)
    "dedupWindowSize": ("dedup_window_size", int),
    "dedupWindowMs": ("dedup_window_ms", int),
    # CommitLog pages warmed ahead of the writer (issue 18)
    "commitLogWarmMinLead": ("commit_log_warm_min_lead_bytes", int),
    "commitLogWarmMaxLead": ("commit_log_warm_max_lead_bytes", int),
    "commitLogWarmFastWriterRate": ("commit_log_warm_fast_writer_bytes_per_s", int),
    "commitLogInitLead": ("commit_log_init_lead_bytes", int),
}


def store_config(props: Mapping[str, str], base: StoreConfig | None) -> StoreConfig:
    """The ``MessageStoreConfig`` properties of ``props`` applied to ``base`` (or the
    defaults); other keys are left alone.

    Raises:
        ConfigError: a value does not convert or is out of range (names the property).
    """
    changes: dict[str, Any] = {}
    for prop, (name, kind) in STORE_PROPERTIES.items():
        raw = props.get(prop)
        if raw is None:
            continue
        if kind is bool:
            value: Any = raw.strip().lower()
            if value not in ("true", "false"):
                raise ConfigError(prop, f"must be true or false, got {raw!r}")
            changes[name] = value == "true"
        elif kind is int:
            try:
                changes[name] = int(raw.strip())
            except ValueError:
                raise ConfigError(prop, f"must be an integer, got {raw!r}") from None
        elif kind is str:
            changes[name] = raw.strip()
        else:
            changes[name] = kind(raw)
    start = base if base is not None else StoreConfig()
    try:
        return dataclasses.replace(start, **changes)
    except (TypeError, ValueError) as exc:
        raise ConfigError("store", str(exc)) from None


def store_to_properties(store: StoreConfig) -> dict[str, str]:
    """The store config as RocketMQ properties (ratios back to integer percentages)."""
    out: dict[str, str] = {}
    for prop, (name, kind) in STORE_PROPERTIES.items():
        value = getattr(store, name)
        if isinstance(value, bool):
            out[prop] = "true" if value else "false"
        elif isinstance(value, FlushDiskType):
            out[prop] = value.value
        elif isinstance(value, float) and kind not in (int, str, bool):
            out[prop] = str(round(value * 100))
        else:
            out[prop] = str(value)
    return out
