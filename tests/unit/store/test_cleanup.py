import logging
import os
import time
from pathlib import Path

import pytest

from ariane.common.clock import ManualClock
from ariane.store import cleanup
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus, PutStatus

from .helpers import msg, small_config

HOUR_MS = 3_600_000


class Disk:
    """Injected disk usage."""

    def __init__(self) -> None:
        self.ratio = 0.10

    def __call__(self, path: str) -> float:
        return self.ratio


def _local_noon_ms() -> int:
    t = time.localtime()
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 12, 0, 0, 0, 0, -1)) * 1000)


def make(tmp_path: Path, clock: ManualClock, disk: Disk) -> MessageStore:
    store = MessageStore(
        small_config(
            tmp_path, disk_space_warning_level_ratio=0.90, disk_space_clean_forcibly_ratio=0.85
        ),
        clock=clock,
        disk_usage=disk,
    )
    assert store.load()
    store.start()
    return store


def fill(store: MessageStore, n: int) -> None:
    for i in range(n):
        assert store.put_message(msg(body=b"%04d" % i * 250, KEYS=f"k{i}")).ok
    assert store.wait_dispatched()


def age_files(root: Path, clock: ManualClock, hours: int) -> None:
    old = (clock.now_ms() - hours * HOUR_MS) / 1000
    for p in (root / "commitlog").iterdir():
        os.utime(p, (old, old))


def test_expired_files_deleted_at_delete_when_hour(tmp_path: Path) -> None:
    clock = ManualClock(_local_noon_ms())
    disk = Disk()
    store = make(tmp_path, clock, disk)
    try:
        fill(store, 200)
        files_before = len(store.commit_log.queue.files)
        assert files_before >= 3
        age_files(tmp_path, clock, 73)
        assert store.clean_files_once() == (0, 0)  # 12:00 is not "04"
        clock.advance(16 * HOUR_MS)  # 04:00 next day
        deleted, derived = store.clean_files_once()
        assert deleted == files_before - 1  # never the last file
        assert derived > 0
        assert len(store.commit_log.queue.files) == 1
        assert store.min_phy_offset == store.commit_log.queue.files[0].file_from_offset
        low = store.get_message("g", "TopicA", 0, 0, 32)
        assert low.status is GetStatus.OFFSET_TOO_SMALL
        assert low.next_begin_offset == store.get_min_offset_in_queue("TopicA", 0) > 0
        found = store.get_message("g", "TopicA", 0, low.next_begin_offset, 32)
        assert found.status is GetStatus.FOUND
        assert store.put_message(msg()).ok
    finally:
        store.shutdown()
    with open_again(tmp_path) as again:
        assert again.get_min_offset_in_queue("TopicA", 0) > 0
        assert (
            again.get_message(
                "g", "TopicA", 0, again.get_min_offset_in_queue("TopicA", 0), 1
            ).status
            is GetStatus.FOUND
        )


def open_again(tmp_path: Path) -> "Opened":
    return Opened(tmp_path)


class Opened:
    def __init__(self, root: Path) -> None:
        self.store = MessageStore(small_config(root))

    def __enter__(self) -> MessageStore:
        assert self.store.load()
        self.store.start()
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.shutdown()


def test_unexpired_files_are_kept_and_stop_the_pass(tmp_path: Path) -> None:
    clock = ManualClock(_local_noon_ms())
    store = make(tmp_path, clock, Disk())
    try:
        fill(store, 200)
        store.execute_delete_files_manually()
        assert store.clean_files_once()[0] == 0  # nothing is 72 h old
        first = store.commit_log.queue.files[0].path
        old = (clock.now_ms() - 80 * HOUR_MS) / 1000
        os.utime(first, (old, old))
        assert store.clean_files_once()[0] == 1
    finally:
        store.shutdown()


def test_disk_ratio_rules(tmp_path: Path) -> None:
    clock = ManualClock(_local_noon_ms())
    disk = Disk()
    store = make(tmp_path, clock, disk)
    try:
        fill(store, 200)
        n = len(store.commit_log.queue.files)
        disk.ratio = 0.80  # above 75 %: expired files only, none expired
        assert store.clean_files_once()[0] == 0
        assert store.is_writeable
        disk.ratio = 0.87  # above 85 %: delete regardless of age
        assert store.clean_files_once()[0] == n - 1
        assert store.is_writeable
        disk.ratio = 0.95  # above 90 %: refuse writes
        store.clean_files_once()
        refused = store.put_message(msg())
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "disk full" in (refused.remark or "")
        assert not store.is_writeable
        assert "disk full" in (store.writeable_reason or "")
        disk.ratio = 0.84
        store.clean_files_once()
        assert store.is_writeable
        assert store.put_message(msg()).ok
    finally:
        store.shutdown()


def test_clean_expired_consume_queue(tmp_path: Path) -> None:
    clock = ManualClock(_local_noon_ms())
    disk = Disk()
    store = make(tmp_path, clock, disk)
    try:
        store.put_message(msg(topic="Old", body=b"x" * 3000))
        fill(store, 100)
        disk.ratio = 0.87
        store.clean_files_once()
        assert store.clean_expired_consume_queue() == 1
        assert "Old" not in store.topic_queues()
        assert store.get_message("g", "Old", 0, 0, 1).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    finally:
        store.shutdown()


def test_forced_cleanup_says_forced_and_the_no_room_warning_is_rate_limited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20 item 5: files deleted before they expired are 'forced', and a disk that stays
    short with nothing left to delete warns once, not on every pass (a manual minute)."""
    clock = ManualClock(_local_noon_ms())
    disk = Disk()
    store = make(tmp_path, clock, disk)
    try:
        fill(store, 200)
        n = len(store.commit_log.queue.files)
        first = store.commit_log.queue.files[0].path
        old = (clock.now_ms() - 80 * HOUR_MS) / 1000
        os.utime(first, (old, old))  # one expired file, the others young
        disk.ratio = 0.87
        caplog.set_level(logging.INFO, logger="ariane.store")
        assert store.clean_files_once()[0] == n - 1
        texts = [r.getMessage() for r in caplog.records if "CommitLog file" in r.getMessage()]
        assert texts == [
            "deleted 1 expired CommitLog file(s)",
            f"forced cleanup: deleted {n - 2} CommitLog file(s) before they expired "
            "(disk space is short)",
        ]
        caplog.clear()
        for _ in range(30):  # a minute of passes every 2 s: only the active file is left
            clock.advance(2000)
            assert store.clean_files_once()[0] == 0
        warnings = [r for r in caplog.records if "no file could be deleted" in r.getMessage()]
        assert len(warnings) == 1
        assert warnings[0].levelno == logging.WARNING
        assert "87% used" in warnings[0].getMessage()
        caplog.clear()
        clock.advance(cleanup.NO_ROOM_WARN_INTERVAL_MS)  # still short ten minutes later
        store.clean_files_once()
        store.clean_files_once()
        assert sum("no file could be deleted" in r.getMessage() for r in caplog.records) == 1
        caplog.clear()
        disk.ratio = 0.50  # space freed: said once
        for _ in range(3):
            store.clean_files_once()
        assert [r.getMessage() for r in caplog.records if "disk space" in r.getMessage()] == [
            "disk space: files can be deleted again (or space is no longer short)"
        ]
        caplog.clear()
        disk.ratio = 0.87  # short again: a new state, warned at once
        store.clean_files_once()
        assert sum("no file could be deleted" in r.getMessage() for r in caplog.records) == 1
    finally:
        store.shutdown()
