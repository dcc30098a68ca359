"""In-process cost of a traced drain's trace messages in the broker's store (issue 15): N trace
messages shaped as a consume tracer ships them (bodies and KEYS written by the tree's own trace
code through ``tools/trace_consume_cost.py``'s driver: ~107,600-byte bodies of ~850 records, a
``KEYS`` of ~430 msgIds) put into a fresh ``MessageStore`` with the standalone's sizes (64 MiB
CommitLog files, 50,000 index slots, 200,000 index entries per file), then dispatched; prints
the CPU per trace message of the putting thread and of each store thread (``schedstat``).

    PYTHONPATH=<tree>/src .venv/bin/python tools/trace_store_cost.py [N] [noindex]

``noindex``: the same store without the IndexFile (``messageIndexEnable=false``): the
difference of the reput thread's CPU is the index's. A traced drain of 200,000 deliveries
ships ~550 trace messages (the default N).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import trace_consume_cost as driver

from ariane.client import _trace_dispatch
from ariane.common.message import HostPort
from ariane.common.properties import encode_properties
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.message_store import MessageStore
from ariane.store.put_native import new_inner

_HOST = HostPort(b"\x7f\x00\x00\x01", 10911)
_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _trace_messages(deliveries: int) -> list[tuple[bytes, str]]:
    """(body, KEYS) of the trace messages of ``deliveries`` traced deliveries."""
    shipped: list[tuple[bytes, str]] = []

    def keep(dispatcher: _trace_dispatch.AsyncTraceDispatcher, digest: object) -> int:
        items = _trace_dispatch._take(dispatcher._queue, len(dispatcher._queue))
        packed = dispatcher._packed(items)
        dispatcher._wake_at = 1
        for one in packed:
            data = one.data
            shipped.append((data if isinstance(data, bytes) else data.encode(), one.keys))
        return len(packed)

    driver._shipped = keep  # type: ignore[assignment]
    argv, sys.argv = sys.argv, ["trace_consume_cost", str(deliveries), "trace", "nokeys"]
    try:
        driver.main()
    finally:
        sys.argv = argv
    return shipped


def _thread_ns() -> dict[str, int]:
    out = {}
    for t in threading.enumerate():
        try:
            with open(f"/proc/self/task/{t.native_id}/schedstat") as f:
                out[t.name] = int(f.read().split()[0])
        except (OSError, TypeError):
            pass
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 550
    index = "noindex" not in sys.argv[1:]
    samples = _trace_messages(8000)
    root = tempfile.mkdtemp(prefix="trace-store-cost-")
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=root,
            flush_disk_type=FlushDiskType.ASYNC_FLUSH,
            max_message_size=4 << 20,
            mapped_file_size_commit_log=64 << 20,
            max_hash_slot_num=50000,
            max_index_num=200000,
            message_index_enable=index,
        )
    )
    try:
        store.load()
        store.start()
        msgs = []
        for i in range(n):
            body, keys = samples[i % len(samples)]
            keys = keys.replace("7F0000010001", f"7F{i:010X}")  # distinct msgIds per message
            props = {"KEYS": keys, "UNIQ_KEY": f"AC11000100002A9F{i:016X}", "WAIT": "true"}
            text = encode_properties(props)
            msgs.append(
                new_inner(_TRACE_TOPIC, i % 4, body, 0, props, 0, 0, _HOST, _HOST, 0, 0, text)
            )
        before = _thread_ns()
        start = time.thread_time_ns()
        for msg in msgs:
            result = store.put_message(msg)
            if result.msg_num != 1:
                raise SystemExit(f"put failed: {result}")
        put_ns = time.thread_time_ns() - start
        store.wait_dispatched(600)
        time.sleep(0.3)  # the flush and warm rounds of the last puts
        after = _thread_ns()
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    body_len = sum(len(b) for b, _ in samples) / len(samples)
    key_len = sum(len(k) for _, k in samples) / len(samples)
    print(
        f"{n} trace messages (body {body_len:,.0f} bytes, KEYS {key_len:,.0f} chars), index {index}"
    )
    print(f"put: {put_ns / 1e3 / n:.1f} us per message (the putting thread)")
    for name, ns in sorted(after.items()):
        spent = ns - before.get(name, 0)
        if spent > 0:
            print(f"{name}: {spent / 1e3 / n:.1f} us per message")


if __name__ == "__main__":
    main()
