"""Shared helpers for the store tests: small file sizes so rolling happens quickly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ariane.common.clock import ManualClock
from ariane.common.message import HostPort
from ariane.store.config import StoreConfig
from ariane.store.format import DispatchRequest
from ariane.store.index_file import IndexService
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore

HOST = HostPort(b"\x0a\x00\x00\x05", 10911)
BORN = HostPort(b"\xc0\xa8\x00\x02", 50000)


def small_config(root: Path | str, **overrides: Any) -> StoreConfig:
    """A config with tiny files: 64 KiB CommitLog files, 50-entry ConsumeQueue files."""
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": 64 * 1024,
        "max_message_size": 16 * 1024,
        "mapped_file_size_consume_queue": 50 * 20,
        "max_hash_slot_num": 64,
        "max_index_num": 200,
        # the test machine's disk is shared by parallel runs and benchmarks: it passes 85-90 %
        # now and then, and a store deleting files (85 %) or refusing writes (90 %) at
        # RocketMQ's levels fails unrelated tests
        "disk_space_warning_level_ratio": 0.99,
        "disk_space_clean_forcibly_ratio": 0.98,
    }
    values.update(overrides)
    return StoreConfig(**values)


def msg(
    topic: str = "TopicA",
    queue_id: int = 0,
    body: bytes = b"hello",
    **props: str,
) -> MessageInner:
    """A message with the given properties (keyword arguments)."""
    return MessageInner(
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=dict(props),
        born_timestamp_ms=1_700_000_000_000,
        born_host=BORN,
        store_host=HOST,
    )


@contextmanager
def open_store(
    root: Path | str, clock: ManualClock | None = None, **overrides: Any
) -> Iterator[MessageStore]:
    """Load, start and finally shut down a store with ``small_config``."""
    store = MessageStore(small_config(root, **overrides), clock=clock)
    assert store.load()
    store.start()
    try:
        yield store
    finally:
        store.shutdown()


def index_files(
    root: str, batches: list[list[DispatchRequest]], each: bool, slot_num: int, index_num: int
) -> dict[str, bytes]:
    """The bytes of every IndexFile an ``IndexService`` under ``root`` writes for ``batches``
    (one clock millisecond apart), through ``build_index_each`` (``each``, the key-by-key
    reference) or ``build_index``; headers written, keyed ``index<n>`` in file order."""
    clock = ManualClock(1_700_000_000_000)
    index = IndexService(os.path.join(root, "index"), slot_num, index_num, clock)
    for batch in batches:
        if each:
            index.build_index_each(batch)
        else:
            index.build_index(batch)
        clock.advance(1)
    for f in index.files:
        f.write_header()
    files = {f"index{n}": bytes(f.mf.mm) for n, f in enumerate(index.files)}
    index.shutdown()
    return files
