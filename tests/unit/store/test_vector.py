"""The vectorised dispatch must write exactly the bytes the record-by-record code writes."""

import os
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common.clock import ManualClock
from ariane.common.hashing import index_key_hash, unsigned_hash_and_units
from ariane.common.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.dispatch import Dispatcher
from ariane.store.format import DispatchRequest
from ariane.store.index_file import IndexService
from ariane.store.vector import VECTOR_MIN, chain_links, index_key_hashes
from tests.unit.store.helpers import index_files

_KEY_TEXT = st.text(
    alphabet=st.sampled_from(["a", "Z", "0", "#", " ", "é", "字", "\U0001f600"]),
    max_size=40,
)


@given(st.lists(_KEY_TEXT, max_size=60), _KEY_TEXT)
def test_vector_hash_equals_java_hash(keys: list[str], prefix: str) -> None:
    prefix_hash = unsigned_hash_and_units(prefix)[0]
    got = index_key_hashes(prefix_hash, keys).tolist()
    assert got == [index_key_hash(prefix + k) for k in keys]


def test_vector_hash_long_and_extreme_keys() -> None:
    keys = ["x" * 600, "y" * 513, "", "polygenelubricants", "GydZG_"]
    # "polygenelubricants" hashes to Integer.MIN_VALUE: indexKeyHashMethod maps it to 0
    assert index_key_hashes(0, keys).tolist() == [index_key_hash(k) for k in keys]
    assert index_key_hash("polygenelubricants") == 0


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(-3, 40)), min_size=1, max_size=40))
def test_chain_links_equal_sequential_links(items: list[tuple[int, int]]) -> None:
    first = 5
    table = {slot: value for slot, value in items}  # the file's value per slot
    slots = np.array([s for s, _ in items], dtype=np.int64)
    numbers = np.arange(first, first + len(items), dtype=np.int64)
    prev, heads, head_entries = chain_links(
        slots, numbers, np.array([table[s] for s, _ in items], dtype=np.int64)
    )
    current = dict(table)
    expected = []
    for n, (slot, _) in zip(numbers.tolist(), items, strict=True):
        value = current[slot]
        expected.append(value if 0 < value <= n else 0)
        current[slot] = n
    assert prev.tolist() == expected
    assert dict(zip(heads.tolist(), head_entries.tolist(), strict=True)) == {
        s: current[s] for s in {s for s, _ in items}
    }


def _requests(draw_items: list[tuple[int, int, int, int, int]]) -> list[DispatchRequest]:
    """Physically ordered requests with per-queue consecutive offsets (tx records get 0)."""
    out: list[DispatchRequest] = []
    next_offset: dict[tuple[str, int], int] = {}
    phys = 0
    for topic_no, queue_id, tx, keys_kind, gap in draw_items:
        topic = f"T{topic_no}"
        size = 100 + gap
        sys_flag = tx
        normal = tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
        offset = next_offset.get((topic, queue_id), 0) if normal else 0
        if normal:
            next_offset[(topic, queue_id)] = offset + 1
        uniq = None if keys_kind == 0 else f"{phys:032X}"
        keys = {0: None, 1: None, 2: "k1 k2", 3: " odd  spaced ", 4: "字"}[keys_kind]
        ts = 1_700_000_000_000 + phys * 10
        out.append(
            DispatchRequest(
                topic, queue_id, phys, size, phys % 977, ts, offset, keys, uniq, sys_flag, None
            )
        )
        phys += size
    return out


def _dispatch_into(root: str, batches: list[list[DispatchRequest]]) -> dict[str, bytes]:
    clock = ManualClock(1_700_000_000_000)
    queues: dict[tuple[str, int], ConsumeQueue] = {}

    def find(topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        if key not in queues:
            queues[key] = ConsumeQueue(topic, queue_id, os.path.join(root, "cq"), 7 * 20)
        return queues[key]

    index = IndexService(os.path.join(root, "index"), 16, 40, clock)
    dispatcher = Dispatcher(find, index)
    for batch in batches:
        dispatcher.dispatch(batch)
        clock.advance(1)
    for f in index.files:
        f.write_header()
    files: dict[str, bytes] = {}
    for key, cq in sorted(queues.items()):
        for mf in cq.queue.files:
            files[f"{key}/{mf.file_from_offset}"] = bytes(mf.mm[: mf.wrote_position])
    for n, f in enumerate(index.files):
        files[f"index{n}"] = bytes(f.mf.mm)
    for cq in queues.values():
        cq.shutdown()
    index.shutdown()
    return files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.integers(0, 2),
            st.sampled_from([0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, 8]),
            st.integers(0, 4),
            st.integers(0, 50),
        ),
        min_size=VECTOR_MIN,
        max_size=3 * VECTOR_MIN,
    ),
    st.integers(1, 3 * VECTOR_MIN),
)
def test_vector_dispatch_writes_the_same_files(
    items: list[tuple[int, int, int, int, int]], overlap: int
) -> None:
    requests = _requests(items)
    # Re-dispatching an overlapping tail (as recovery does) must be a no-op for the
    # ConsumeQueues and re-index only the newest record, whichever path ran first.
    tail = requests[-overlap:]
    big = [requests, tail]
    small = [[r] for r in requests] + ([[r] for r in tail] if len(tail) >= VECTOR_MIN else [tail])
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        assert _dispatch_into(a, big) == _dispatch_into(b, small)


def test_vector_dispatch_single_topic_many_queues(tmp_path: Path) -> None:
    items = [(0, i % 2, 0, 1, 3) for i in range(4 * VECTOR_MIN)]
    requests = _requests(items)
    big = _dispatch_into(str(tmp_path / "a"), [requests])
    small = _dispatch_into(str(tmp_path / "b"), [[r] for r in requests])
    assert big == small
    assert len([k for k in big if k.startswith("index")]) > 1  # rolled over index files


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 3 * VECTOR_MIN), min_size=1, max_size=4),
    st.sampled_from([0, TRANSACTION_ROLLBACK_TYPE]),
    st.booleans(),
)
def test_one_request_with_many_keys_indexes_as_key_by_key(
    key_counts: list[int], tx: int, doubled_space: bool
) -> None:
    # a trace message carries one key per traced message: alone in its dispatch batch, it
    # goes through the numpy path, which must write what put_key writes (files roll over)
    sep = "  " if doubled_space else " "
    requests, phys = [], 1000
    for n, count in enumerate(key_counts):
        keys = sep.join(f"7F00000100{n:02d}{i:020X}" for i in range(count)) or None
        flag = tx if n == 0 else 0
        ts = 1_700_000_000_000 + n
        uniq = f"{phys:032X}"
        request = DispatchRequest(
            "RMQ_SYS_TRACE_TOPIC", 0, phys, 500, 0, ts, n, keys, uniq, flag, None
        )
        requests.append(request)
        phys += 500
    batches = [[r] for r in requests] + [requests]  # the repeat is skipped (already indexed)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        fast = index_files(a, batches, each=False, slot_num=16, index_num=40)
        assert fast == index_files(b, batches, each=True, slot_num=16, index_num=40)
        if tx == 0 and sum(key_counts) >= 40:
            assert len(fast) > 1  # 40 entries per file: rolled over
