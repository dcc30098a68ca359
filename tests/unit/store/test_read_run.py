"""The pull's contiguous-run fast path (``StoreReads._read_run``) gives what the per-entry
loop gives: every ``GetResult`` field and the store's counters, for queues whose records are
back to back (batches), interleaved with other queues, across rolled CommitLog files, under
the count and byte limits (the loop is forced with a filter that matches everything but does
not say so). The run path copies the runs once, joined (``join_spans``, compiled and pure
twins compared here), and cuts records out of them only when asked (``JoinedRecords``)."""

from __future__ import annotations

import mmap
import tempfile
from dataclasses import astuple
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native
from ariane.store import reads
from ariane.store.filter import TagFilter
from ariane.store.inner import BatchItem, MessageBatchInner
from ariane.store.mapped_file import MappedFile
from ariane.store.message_store import MessageStore
from ariane.store.reads import ReadLimits, _join_spans_py
from ariane.store.results import GetResult, JoinedRecords

from .helpers import BORN, HOST, msg, open_store


class _EverythingQuietly:
    """Matches every message without ``accepts_all``: the reference loop runs."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True


def _counters(store: MessageStore) -> tuple[int, int, int]:
    return store.get_times_found, store.get_times_miss, store.get_transferred_msgs


def _both(
    store: MessageStore, queue: int, offset: int, count: int, limits: ReadLimits | None = None
) -> tuple[GetResult, GetResult]:
    before = _counters(store)
    every = TagFilter.from_expression("*")
    fast = store.get_message("g", "TopicA", queue, offset, count, every, limits)
    middle = _counters(store)
    slow = store.get_message("g", "TopicA", queue, offset, count, _EverythingQuietly(), limits)
    after = _counters(store)
    assert [b - a for a, b in zip(before, middle, strict=True)] == [
        c - b for b, c in zip(middle, after, strict=True)
    ]
    assert slow.joined is None
    assert fast.joined is None or fast.joined == b"".join(fast.messages)
    return fast, slow  # ``joined`` is derived from ``messages``: not part of equality


# (queue, sizes of one write: a batch when more than one; a batch stays below the
# 16 KiB max_message_size of the small config)
_writes = st.lists(
    st.tuples(st.integers(0, 2), st.lists(st.integers(1, 1200), min_size=1, max_size=10)),
    min_size=1,
    max_size=40,
)


def _write(store: MessageStore, writes: list[tuple[int, list[int]]]) -> None:
    """Each write to TopicA: one body size, a single message; more, a batch; then dispatch."""
    for n, (queue, sizes) in enumerate(writes):
        if len(sizes) == 1:
            store.put_message(msg(queue_id=queue, body=b"s" * sizes[0], KEYS=f"k{n}"))
        else:
            items = [BatchItem(b"b" * size, properties={"KEYS": f"k{n}"}) for size in sizes]
            batch = MessageBatchInner("TopicA", queue, items, born_host=BORN, store_host=HOST)
            assert store.put_messages(batch).ok
    assert store.wait_dispatched()


@settings(max_examples=100, deadline=None)
@given(
    writes=_writes,
    count_cap=st.integers(1, 40),
    bytes_cap=st.sampled_from([1024, 4096, 256 * 1024]),
    reads=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 80), st.integers(1, 64)), max_size=12
    ),
)
def test_run_equals_loop(
    writes: list[tuple[int, list[int]]],
    count_cap: int,
    bytes_cap: int,
    reads: list[tuple[int, int, int]],
) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_store(
            tmp,
            max_transfer_count_on_message_in_memory=count_cap,
            max_transfer_bytes_on_message_in_memory=bytes_cap,
        ) as store,
    ):
        _write(store, writes)
        for queue in range(3):  # every offset of every queue, then the drawn reads
            for offset in range(store.get_max_offset_in_queue("TopicA", queue) + 1):
                fast, slow = _both(store, queue, offset, 32)
                assert astuple(fast) == astuple(slow)
        for queue, offset, count in reads:
            fast, slow = _both(store, queue, offset, count)
            assert astuple(fast) == astuple(slow)


def _spy_runs(store: MessageStore) -> list[int]:
    """Record the message count of each run read (0: the run path declined)."""
    calls: list[int] = []
    real = store._read_run

    def spy(*args: object) -> GetResult | None:
        got = real(*args)  # type: ignore[arg-type]
        calls.append(0 if got is None else got.message_count)
        return got

    store._read_run = spy  # type: ignore[method-assign,assignment]
    return calls


def test_a_batch_is_read_as_one_run(tmp_path: object) -> None:
    with open_store(str(tmp_path)) as store:
        items = [BatchItem(b"r%d" % i, properties={"KEYS": "k"}) for i in range(6)]
        assert store.put_messages(MessageBatchInner("TopicA", 0, items, born_host=BORN)).ok
        assert store.wait_dispatched()
        calls = _spy_runs(store)
        res = store.get_message("g", "TopicA", 0, 1, 32)
        assert calls == [5]
        assert res.message_queue_offsets == [1, 2, 3, 4, 5]
        assert res.next_begin_offset == 6


@settings(max_examples=60, deadline=None)
@given(
    writes=_writes,
    limits=st.builds(
        ReadLimits, st.integers(1, 300), st.sampled_from([1, 1024, 5000, 64 * 1024, 4 << 20])
    ),
    cold=st.booleans(),
    count=st.sampled_from([1, 7, 64, 4096]),
)
def test_bulk_limits_run_equals_loop(
    writes: list[tuple[int, list[int]]], limits: ReadLimits, cold: bool, count: int
) -> None:
    """A bulk reader's own limits replace both the in-memory and the on-disk ones, for the
    run and the loop alike; cold data (no memory share) takes the run too."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_store(tmp, access_message_in_memory_max_ratio=0 if cold else 40) as store,
    ):
        _write(store, writes)
        for queue in range(3):
            top = store.get_max_offset_in_queue("TopicA", queue)
            for offset in range(top + 1):
                fast, slow = _both(store, queue, offset, count, limits)
                assert astuple(fast) == astuple(slow)
                if offset < top:
                    taken = fast.message_count
                    assert 1 <= taken <= min(count, limits.messages)
                    assert taken == 1 or fast.buffer_total_size <= limits.bytes


def test_bulk_limits_read_past_the_memory_caps(tmp_path: object) -> None:
    """With limits, one read takes more than the store's 32-record and 256 KiB caps, hot or
    cold, and the run is what takes them."""
    with open_store(str(tmp_path), access_message_in_memory_max_ratio=0) as store:
        for _ in range(5):
            items = [BatchItem(b"x" * 300, properties={"KEYS": "k"}) for i in range(10)]
            assert store.put_messages(MessageBatchInner("TopicA", 0, items, born_host=BORN)).ok
        assert store.wait_dispatched()
        plain = store.get_message("g", "TopicA", 0, 0, 4096)
        run = store._read_run(
            store.get_consume_queue("TopicA", 0).get_entries(0, 800),  # type: ignore[union-attr]
            0,
            4096,
            0,
            50,
            ReadLimits(40, 1 << 20),
        )
        assert plain.message_count == store.config.max_transfer_count_on_message_in_disk
        assert run is not None
        assert run.message_queue_offsets == list(range(40))
        assert run.next_begin_offset == 40
        bulk = store.get_message("g", "TopicA", 0, 0, 4096, None, ReadLimits(40, 1 << 20))
        assert astuple(bulk) == astuple(run)
        assert b"".join(bulk.messages) == b"".join(
            store.get_message("g", "TopicA", 0, o, 1).messages[0] for o in range(40)
        )


def test_interleaved_queues_are_read_run_by_run(tmp_path: object) -> None:
    """Batches of two queues written in turn: a read of one queue takes its runs, each in
    one copy, across the other queue's records."""
    with open_store(str(tmp_path)) as store:
        for k in range(4):
            items = [BatchItem(b"q%d-%d" % (k % 2, i), properties={"KEYS": "k"}) for i in range(5)]
            assert store.put_messages(MessageBatchInner("TopicA", k % 2, items, born_host=BORN)).ok
        assert store.wait_dispatched()
        calls = _spy_runs(store)
        res = store.get_message("g", "TopicA", 0, 2, 32)
        assert calls == [8]
        assert res.message_queue_offsets == list(range(2, 10))
        assert res.messages == [
            store.get_message("g", "TopicA", 0, o, 1, _EverythingQuietly()).messages[0]
            for o in range(2, 10)
        ]


@settings(max_examples=30, deadline=None)
@given(
    writes=_writes,
    limits=st.builds(ReadLimits, st.integers(1, 300), st.sampled_from([1, 1024, 5000, 4 << 20])),
    chunk=st.integers(1, 4),
)
def test_entries_unpacked_in_chunks_read_as_the_loop(
    writes: list[tuple[int, list[int]]], limits: ReadLimits, chunk: int
) -> None:
    """The run unpacks the queue entries a chunk at a time, up to the chunk where the sizes
    pass the byte limit: any chunk size gives the loop's result."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_store(tmp) as store,
        mock.patch.object(reads, "_UNPACK_CHUNK", chunk),
    ):
        _write(store, writes)
        for queue in range(3):
            for offset in range(store.get_max_offset_in_queue("TopicA", queue) + 1):
                fast, slow = _both(store, queue, offset, 4096, limits)
                assert astuple(fast) == astuple(slow)


def test_a_bulk_read_of_interleaved_runs_is_one_copy_and_cuts_no_record(tmp_path: object) -> None:
    """Runs of one queue between another queue's records: the answer's body is the runs
    joined straight from their file (no read per run, no record cut), and the records are
    the loop's when asked for."""
    with open_store(str(tmp_path), mapped_file_size_commit_log=1 << 20) as store:
        for k in range(6):
            items = [BatchItem(b"q%d-%d" % (k % 2, i), properties={"KEYS": "k"}) for i in range(5)]
            assert store.put_messages(MessageBatchInner("TopicA", k % 2, items, born_host=BORN)).ok
        assert store.wait_dispatched()
        with mock.patch.object(MappedFile, "read", side_effect=AssertionError("a run read")):
            res = store.get_message("g", "TopicA", 0, 1, 4096, None, ReadLimits(100, 1 << 20))
        records = res.messages
        assert isinstance(records, JoinedRecords)
        assert records._cut is None
        assert len(records) == res.message_count == 14
        slow = [
            store.get_message("g", "TopicA", 0, o, 1, _EverythingQuietly()).messages[0]
            for o in range(1, 15)
        ]
        assert res.joined == b"".join(slow)
        assert res.buffer_total_size == len(res.joined)
        assert records._cut is None  # nothing so far needed the records one by one
        assert records == slow
        assert list(records) == slow
        assert records[3] == slow[3]
        assert records[-2:] == slow[-2:]
        assert records == JoinedRecords(res.joined, records.ends)
        assert records != JoinedRecords(res.joined[:-1], [*records.ends[:-1], len(res.joined) - 1])
        assert records != slow[:-1]
        assert (records == "x") is False
        assert records + [b"z"] == [*slow, b"z"]  # noqa: RUF005
        assert [b"z"] + records == [b"z", *slow]  # noqa: RUF005
        assert records + records == slow + slow


def _join_both(buf: object, starts: list[int], stops: list[int]) -> list[object]:
    """The outcome (bytes, or the exception type) of each build of ``join_spans``."""
    funcs = [_join_spans_py]
    if native.speedups is not None:
        funcs.append(native.speedups.join_spans)
    got: list[object] = []
    for func in funcs:
        try:
            got.append(func(buf, starts, stops))
        except (TypeError, ValueError) as exc:
            got.append(type(exc))
    return got


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=300),
    spans=st.lists(st.tuples(st.integers(-3, 310), st.integers(-3, 310)), max_size=6),
)
def test_join_spans_twins_agree(data: bytes, spans: list[tuple[int, int]]) -> None:
    starts = [a for a, _ in spans]
    stops = [b for _, b in spans]
    outcomes = _join_both(bytearray(data), starts, stops)
    if all(0 <= a <= b <= len(data) for a, b in spans):
        expected: object = b"".join(data[a:b] for a, b in spans)
    else:
        expected = ValueError
    assert outcomes == [expected] * len(outcomes)


def test_join_spans_of_a_map_and_its_errors() -> None:
    mm = mmap.mmap(-1, 4096)
    mm[:8] = b"abcdefgh"
    assert _join_both(mm, [6, 0, 2], [8, 1, 2]) == [b"gha"] * len(_join_both(mm, [], []))
    assert set(_join_both(mm, [0], [1 << 70])) == {ValueError}
    assert set(_join_both(mm, [0, 1], [1])) == {TypeError}
    assert set(_join_both(mm, [0.0], [1])) == {TypeError}  # type: ignore[list-item]
    mm.close()  # unmapped by a concurrent destroy: ValueError, the read gives None
    assert set(_join_both(mm, [0], [1])) == {ValueError}


@pytest.mark.skipif(native.speedups is None, reason="the compiled build is not there")
def test_the_compiled_join_is_the_one_used() -> None:
    assert reads._join_spans is native.speedups.join_spans  # type: ignore[union-attr]
