"""Child process of the fault-point tests: arm one point, run the work that reaches it, die.

argv: store_dir side_file point

It arms ``point`` with SIGKILL (so the process dies exactly there) and runs: a SYNC_FLUSH
writer that logs every acknowledged put to the side file (``index queue_id queue_offset``),
a checkpoint flush every 20 puts, and a cleanup pass with everything expired every 50 puts.
For the recovery points it first leaves a torn tail in the CommitLog and an abort file, so
loading itself reaches them. If the work ends without reaching the point it exits 5.
"""

from __future__ import annotations

import os
import sys

from ariane.common import faults
from ariane.common.message import HostPort
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore

HOST = HostPort(b"\x7f\x00\x00\x01", 10911)


def config(root: str) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commit_log=16 * 1024,
        max_message_size=4 * 1024,
        mapped_file_size_consume_queue=20 * 20,
        max_hash_slot_num=16,
        max_index_num=40,
        file_reserved_time_hours=0,
        flush_interval_consume_queue_ms=10,
    )


def body_for(i: int) -> bytes:
    return (b"%06d|" % i) * (1 + i % 53)


def message(i: int) -> MessageInner:
    return MessageInner(
        topic="Faults", queue_id=i % 2, body=body_for(i), properties={"KEYS": f"key{i}"},
        born_host=HOST, store_host=HOST,
    )  # fmt: skip


def main() -> None:
    root, side, point = sys.argv[1], sys.argv[2], sys.argv[3]
    faults.arm(point)
    store = MessageStore(config(root))
    if not store.load():
        sys.exit(3)
    store.start()
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with open(side, "rb") as f:
        start = sum(1 for _ in f)
    for i in range(start, start + 400):
        r = store.put_message(message(i))
        if not r.ok:
            sys.exit(4)
        os.write(fd, b"%d %d %d\n" % (i, i % 2, r.logics_offset))
        if i % 20 == 19:
            store.flush()
        if i % 50 == 49:
            store.execute_delete_files_manually()
            store.clean_files_once()
    sys.exit(5)


if __name__ == "__main__":
    main()
