"""Child process for the FUSE power-loss tests: a real store (the real ``OsDisk``) writes on
the power-loss file system until its stdin closes.

argv: store_dir mode(SYNC_FLUSH|ASYNC_FLUSH) seed [no-fdatasync|no-dir-sync]

After every put that wrote a record it prints ``A|W i queue_id queue_offset end flushed``
(A: acknowledged PUT_OK; ``flushed`` is the CommitLog's flush point read after the answer, so
everything below it was on disk when the line was printed). On EOF of stdin the writers stop,
every put in flight prints its line, ``end`` is printed and the process exits without any
cleanup. The optional last argument breaks the store on purpose (the test that shows the
power-loss test can fail).
"""

from __future__ import annotations

import os
import random
import sys
import threading

from ariane.store import disk as disk_module
from ariane.store.config import FlushDiskType
from ariane.store.message_store import MessageStore
from tests.unit.store.helpers import msg
from tests.unit.store.powerloss import QUEUES, TOPIC, body_of, config


def main() -> None:
    root, mode, seed = sys.argv[1], FlushDiskType(sys.argv[2]), sys.argv[3]
    broken = sys.argv[4] if len(sys.argv) > 4 else ""
    if broken == "no-fdatasync":
        disk_module._OsFile.sync = lambda self: None  # type: ignore[method-assign]
    elif broken == "no-dir-sync":
        disk_module.OsDisk.sync_dir = lambda self, path: None  # type: ignore[method-assign]
    store = MessageStore(config(root, mode))
    assert store.load()
    store.start()
    out = threading.Lock()
    stop = threading.Event()
    counter = iter(range(1_000_000))

    def write(wseed: str) -> None:
        rng = random.Random(wseed)
        while not stop.is_set():
            with out:
                i = next(counter)
            q = rng.randrange(QUEUES)
            r = store.put_message(msg(TOPIC, q, body_of(i), KEYS=f"key{i}"))
            if r.msg_num == 0:
                continue
            flushed = store.commit_log.flushed_where
            kind = "A" if r.ok else "W"
            end = r.wrote_offset + r.wrote_bytes
            with out:
                sys.stdout.write(f"{kind} {i} {q} {r.logics_offset} {end} {flushed}\n")
                sys.stdout.flush()

    threads = [threading.Thread(target=write, args=(f"{seed}-{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    sys.stdin.read()
    stop.set()
    for t in threads:
        t.join()
    sys.stdout.write("end\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
