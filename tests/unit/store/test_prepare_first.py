"""A new topic's ConsumeQueue files made ahead (issue 18: a latency run's first message to
each queue of a new topic waited on the reput thread while it created the queue's first file
with its two syncs): ``MappedFileQueue.prepare_first``, the allocation thread's
``prepare_first_files``, ``MessageStore.prepare_consume_queues`` and the topic manager's
``on_created`` hook."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ariane.broker.config import BrokerConfig
from ariane.broker.topic_config import TopicConfigManager
from ariane.common.clock import ManualClock
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.store import message_store as message_store_module
from ariane.store.allocate import (
    IDLE_POLL_MAX_S,
    POLL_S,
    WARM_CHUNK_BYTES,
    AllocateMappedFileService,
)
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.message_store import PREPARE_QUEUES_MAX, PREPARED_FIRST_MAX, MessageStore
from tests.unit.store.helpers import msg, open_store

SIZE = 5 * 20


def test_prepare_first_makes_the_file_the_writer_takes(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path / "q"), SIZE)
    assert queue.prepare_first()
    prepared = queue._next
    assert prepared is not None
    assert prepared.file_from_offset == 0
    assert os.listdir(tmp_path / "q") == ["00000000000000000000"]
    assert not queue.prepare_first()  # one is waiting already
    assert queue.get_last_mapped_file(0) is prepared
    assert not queue.prepare_first()  # the queue has a file
    assert queue._next is None
    queue.shutdown()


def test_an_unused_prepared_file_goes_with_the_queue(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path / "q"), SIZE)
    assert queue.prepare_first()
    queue.destroy()
    assert not (tmp_path / "q").exists()


class _Allocator(AllocateMappedFileService):
    """Records its waits instead of waiting."""

    waits: list[float]

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)


class _Failing(MappedFileQueue):
    def prepare_first(self) -> bool:
        raise OSError(28, "No space left on device")


def test_the_allocation_thread_makes_the_first_files(tmp_path: Path) -> None:
    log = MappedFileQueue(str(tmp_path / "commitlog"), 4096)
    allocator = _Allocator(log)
    allocator.waits = []
    queues = [
        MappedFileQueue(str(tmp_path / "a"), SIZE),
        _Failing(str(tmp_path / "b"), SIZE),  # logged; the others still made
        MappedFileQueue(str(tmp_path / "c"), SIZE),
    ]
    allocator.prepare_first_files(queues)
    allocator.run_once()
    assert queues[0].next_ready
    assert not queues[1].next_ready
    assert queues[2].next_ready
    assert not allocator._first_files
    for q in (log, *queues):
        q.shutdown()
    assert not (tmp_path / "a").exists()  # unused: the file and the directory made for it


def test_the_first_files_are_read_into_the_page_cache_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each first file the allocation thread makes is read whole, through its buffer (a new
    file's first write through the map no longer faults in the readahead window on the
    writer's thread); a queue that fails, or already has its file, is not read."""
    warmed: list[tuple[str, int, int | None, int, dict[str, bool]]] = []

    def record(
        self: MappedFile, pos: int, buf: bytearray, length: int | None = None, **kw: bool
    ) -> None:
        warmed.append((os.path.basename(os.path.dirname(self.path)), pos, length, len(buf), kw))

    monkeypatch.setattr(MappedFile, "warm", record)
    log = MappedFileQueue(str(tmp_path / "commitlog"), 4096)
    allocator = _Allocator(log)
    allocator.waits = []
    has_file = MappedFileQueue(str(tmp_path / "d"), SIZE)
    assert has_file.get_last_mapped_file(0) is not None
    queues = [
        MappedFileQueue(str(tmp_path / "a"), SIZE),
        _Failing(str(tmp_path / "b"), SIZE),
        has_file,
        MappedFileQueue(str(tmp_path / "c"), SIZE),
    ]
    allocator.prepare_first_files(queues)
    allocator.run_once()
    single = {"single_pages": True}  # 4 KiB pages, as the writer's fault brought them
    assert warmed == [
        ("a", 0, SIZE, WARM_CHUNK_BYTES, single),
        ("c", 0, SIZE, WARM_CHUNK_BYTES, single),
    ]
    for q in (log, *queues):
        q.shutdown()


def test_warming_the_prepared_file_reads_its_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``warm_prepared`` reads the prepared file from its start to its end (a real file, a
    buffer smaller than it: read again and again); nothing without a prepared file."""
    queue = MappedFileQueue(str(tmp_path / "q"), SIZE)
    queue.warm_prepared(bytearray(8))  # nothing prepared: no file, no read
    assert not (tmp_path / "q").exists()
    assert queue.prepare_first()
    prepared = queue._next
    assert prepared is not None
    file_type = type(prepared._file)
    original = file_type.read_into
    reads: list[tuple[int, int | None, int, dict[str, bool]]] = []

    def recording(
        self: object, buf: bytearray, pos: int, length: int | None = None, **kw: bool
    ) -> None:
        reads.append((pos, length, len(buf), kw))
        original(self, buf, pos, length, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(file_type, "read_into", recording)
    buf = bytearray(b"x" * 8)
    queue.warm_prepared(buf)
    assert reads == [(0, SIZE, 8, {"single_pages": True})]
    assert buf == bytes(8)  # the file's zeros went through it
    assert queue.get_last_mapped_file(0) is prepared  # still the writer's
    queue.shutdown()


def test_a_store_prepares_a_topics_queues_and_dispatch_uses_them(tmp_path: Path) -> None:
    with open_store(tmp_path, mapped_file_size_consume_queue=SIZE) as store:
        store.prepare_consume_queues("T", range(3))
        cqs = [store.find_consume_queue("T", q) for q in range(3)]
        deadline = time.monotonic() + 10
        while not all(cq.queue.next_ready for cq in cqs) and time.monotonic() < deadline:
            time.sleep(0.01)
        prepared = [cq.queue._next for cq in cqs]
        assert all(mf is not None for mf in prepared)
        assert store.put_message(msg("T", 1)).ok
        assert store.wait_dispatched()
        assert cqs[1].queue.files == [prepared[1]]  # the prepared file, not a second one
        assert cqs[1].max_offset_in_queue == 1
        store.prepare_consume_queues("T", range(3))  # nothing left to prepare
        assert not store.allocator._first_files  # type: ignore[union-attr]
        store.prepare_consume_queues("U", range(PREPARE_QUEUES_MAX + 5))
        # T's queues 0 and 2 still hold files made ahead: U gets what is left of the cap
        assert PREPARED_FIRST_MAX <= PREPARE_QUEUES_MAX
        assert set(store.consume_queue_table["U"]) == set(range(PREPARED_FIRST_MAX - 2))


def test_created_topics_are_reported(tmp_path: Path) -> None:
    t = TopicConfigManager(BrokerConfig(), str(tmp_path / "topics.json"), ManualClock(0))
    created: list[str] = []
    t.on_created = lambda tc: created.append(tc.topic_name)
    tc = t.create_in_send("New", "TBW102", "client", 4, 0)
    assert tc is not None
    assert t.create_in_send("New", "TBW102", "client", 4, 0) is tc  # exists: not again
    t.create_in_send_back("%RETRY%G", 1, 6)
    t.put(TopicConfig("Admin", 2, 2, 6))
    assert created == ["New", "%RETRY%G", "Admin"]


def test_files_made_ahead_are_capped_over_all_topics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Topics created and never sent to hold at most ``PREPARED_FIRST_MAX`` first files made
    ahead (each is reserved disk, a mapping and a descriptor); a queue whose file was taken by
    its first message frees its place, and past the cap queues get their files on demand."""
    monkeypatch.setattr(message_store_module, "PREPARED_FIRST_MAX", 6)
    with open_store(tmp_path, mapped_file_size_consume_queue=SIZE) as store:
        for i in range(5):
            store.prepare_consume_queues(f"T{i}", range(4))
        assert _made_ahead(store) == {"T0": [0, 1, 2, 3], "T1": [0, 1]}
        assert store.put_message(msg("T0", 2)).ok  # takes T0/2's file
        assert store.wait_dispatched()
        store.prepare_consume_queues("T9", range(4))
        assert _made_ahead(store) == {"T0": [0, 1, 3], "T1": [0, 1], "T9": [0]}
        assert store.put_message(msg("T4", 3)).ok  # past the cap: made on demand
        assert store.wait_dispatched()
        assert store.find_consume_queue("T4", 3).max_offset_in_queue == 1


def _made_ahead(store: MessageStore) -> dict[str, list[int]]:
    """Every queue whose first file was made ahead and not taken, once the allocation
    thread has made all it was asked for."""
    allocator = store.allocator
    assert allocator is not None
    deadline = time.monotonic() + 10
    while (allocator._first_files or allocator._making) and time.monotonic() < deadline:
        time.sleep(0.01)
    out: dict[str, list[int]] = {}
    for topic, queues in sorted(store.consume_queue_table.items()):
        ready = sorted(q for q, cq in queues.items() if cq.queue.next_ready)
        if ready:
            out[topic] = ready
    return out


class _StillQueue:
    """A CommitLog file queue with nothing to prepare; its writer is at ``max_offset``."""

    mapped_file_size = 1 << 20
    next_ready = True
    last = None
    warmed_to = 0

    def __init__(self) -> None:
        self.max_offset = 0

    def prepare_ahead(
        self, offset: int, window: int, buf: bytearray, step_bytes: int | None = None
    ) -> bool:
        return False


def test_the_allocation_thread_polls_less_while_the_writer_stands_still() -> None:
    queue = _StillQueue()
    allocator = _Allocator(queue)  # type: ignore[arg-type]
    allocator.waits = []
    for _ in range(5):
        allocator.run_once()
    queue.max_offset = 4096  # the writer moved: back to the short interval
    allocator.run_once()
    allocator.run_once()
    idle = [POLL_S, 2 * POLL_S, 4 * POLL_S, IDLE_POLL_MAX_S, IDLE_POLL_MAX_S]
    assert allocator.waits == [*idle, POLL_S, 2 * POLL_S]
