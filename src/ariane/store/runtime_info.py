"""The store's part of RocketMQ's broker runtime info (``DefaultMessageStore.getRuntimeInfo``):
put and get counters, disk ratios, CommitLog offsets, dispatch lag and writeability, all as
strings, as ``GET_BROKER_RUNTIME_INFO`` answers them."""

from __future__ import annotations

from typing import Protocol

from ariane.common.clock import Clock
from ariane.store.cleanup import DiskUsage
from ariane.store.commit_log import CommitLog
from ariane.store.config import StoreConfig

__all__ = ["store_runtime_info"]


class _Store(Protocol):
    """What the runtime info reads of ``MessageStore``."""

    @property
    def config(self) -> StoreConfig: ...
    @property
    def commit_log(self) -> CommitLog: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def disk_usage(self) -> DiskUsage: ...
    @property
    def boot_timestamp_ms(self) -> int: ...
    @property
    def put_failed_times(self) -> int: ...
    @property
    def get_times_found(self) -> int: ...
    @property
    def get_times_miss(self) -> int: ...
    @property
    def get_transferred_msgs(self) -> int: ...
    @property
    def min_phy_offset(self) -> int: ...
    @property
    def max_phy_offset(self) -> int: ...
    @property
    def is_writeable(self) -> bool: ...

    def dispatch_behind_bytes(self) -> int: ...


def store_runtime_info(store: _Store) -> dict[str, str]:
    """The store's runtime info entries (all values strings)."""
    cfg = store.config
    cl = store.commit_log
    puts = cl.put_times_total
    now = store.clock.now_ms()
    return {
        "bootTimestamp": str(store.boot_timestamp_ms),
        "runtime": _runtime(now - store.boot_timestamp_ms),
        "putMessageTimesTotal": str(puts),
        "putMessageSizeTotal": str(cl.put_size_total),
        "putMessageAverageSize": f"{cl.put_size_total / puts if puts else 0.0:.1f}",
        "putMessageFailedTimes": str(store.put_failed_times),
        "getMessageTimesTotalFound": str(store.get_times_found),
        "getMessageTimesTotalMiss": str(store.get_times_miss),
        "getMessageTransferedMsgCount": str(store.get_transferred_msgs),
        "commitLogDiskRatio": f"{store.disk_usage(cfg.commit_log_dir):.4f}",
        "consumeQueueDiskRatio": f"{store.disk_usage(cfg.store_path_root_dir):.4f}",
        "commitLogMinOffset": str(store.min_phy_offset),
        "commitLogMaxOffset": str(store.max_phy_offset),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
        "pageCacheLockTimeMills": "0",
        "remainTransientStoreBufferNumbs": "0",
        "storeWriteable": str(store.is_writeable).lower(),
    }


def _runtime(ms: int) -> str:
    s = ms // 1000
    return (
        f"[ {s // 86400} days, {s // 3600 % 24} hours, {s // 60 % 60} minutes, {s % 60} seconds ]"
    )
