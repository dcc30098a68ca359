"""Child process for the crash tests: append forever, log every acknowledged put.

argv: store_dir side_file mode(sync|async) start_index

Each acknowledged put appends ``index phys_offset queue_id queue_offset`` to the side file
with an unbuffered write, *after* ``put_message`` returned ``PUT_OK``.
"""

from __future__ import annotations

import os
import sys

from ariane.common.message import HostPort
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore


def body_for(i: int) -> bytes:
    return (b"%08d|" % i) * (1 + i % 97)


def main() -> None:
    root, side, mode, start = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cfg = StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=256 * 1024,
        max_message_size=64 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=128,
        max_index_num=500,
        flush_disk_type=FlushDiskType.SYNC_FLUSH if mode == "sync" else FlushDiskType.ASYNC_FLUSH,
        flush_interval_commit_log_ms=20,
        flush_interval_consume_queue_ms=20,
        flush_consume_queue_thorough_interval_ms=100,
    )
    store = MessageStore(cfg)
    if not store.load():
        sys.exit(3)
    store.start()
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    host = HostPort(b"\x7f\x00\x00\x01", 10911)
    i = start
    while True:
        r = store.put_message(
            MessageInner(
                topic="Crash",
                queue_id=i % 3,
                body=body_for(i),
                properties={"KEYS": f"key{i}", "TAGS": "t"},
                born_host=host,
                store_host=host,
            )
        )
        if not r.ok:
            os.write(fd, b"FAIL %d %s\n" % (i, r.status.name.encode()))
            sys.exit(4)
        os.write(fd, b"%d %d %d %d\n" % (i, r.wrote_offset, i % 3, r.logics_offset))
        i += 1


if __name__ == "__main__":
    main()
