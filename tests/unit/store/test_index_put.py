"""``_index_put``: a batch's IndexFile keys listed and put in two calls, the compiled
``index_key_entries`` / ``index_write`` against their pure references, and the IndexService
built through them against the key-by-key ``build_index_each`` (issue 15).

Runs in both builds (it is in the Makefile's PURE_TESTS): the exact-outcome tests check the
references; the identity tests skip when nothing is compiled.
"""

from __future__ import annotations

import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common import native
from ariane.common.clock import ManualClock
from ariane.common.hashing import index_key_hash
from ariane.common.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from ariane.store import _index_put
from ariane.store.format import INDEX_ENTRY, INDEX_HEADER_SIZE, INDEX_SLOT, DispatchRequest
from ariane.store.index_file import IndexService
from tests.unit.store.helpers import index_files

compiled = pytest.mark.skipif(
    not (native.COMPILED and _index_put.COMPILED), reason="the compiled twin is not built"
)

_TEXT = st.text(
    alphabet=st.sampled_from(["a", "Z", "0", "#", " ", "é", "字", "\U0001f600", "\ud800"]),
    max_size=12,
)
_ROW = st.tuples(
    st.sampled_from(["T", "Topic字", "RMQ_SYS_TRACE_TOPIC", "\U0001f600t"]),
    st.integers(0, 5000),
    st.integers(0, 1_700_000_100_000),
    st.none() | _TEXT,
    st.none() | _TEXT,
    st.sampled_from([0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, 8]),
)


def _columns(rows: list[tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    if not rows:
        return ((),) * 6
    return tuple(zip(*rows, strict=True))


def test_entries_list_keys_in_build_order() -> None:
    rows = [
        ("T", 100, 5000, "k1  k2 ", "U1", 0),
        ("T", 200, 6000, None, "U2", TRANSACTION_ROLLBACK_TYPE),  # not indexed
        ("S", 50, 7000, "k3", None, 0),  # below end_phy: already indexed
        ("S", 300, 8000, "", "", 0),  # no key
        ("S", 400, 9000, "k4", None, TRANSACTION_PREPARED_TYPE),
    ]
    items = _index_put.index_key_entries_py(*_columns(rows), 100)
    assert items is not None
    assert list(_index_put.ITEM.iter_unpack(items)) == [
        (index_key_hash("T#U1"), 100, 5000),
        (index_key_hash("T#k1"), 100, 5000),
        (index_key_hash("T#k2"), 100, 5000),
        (index_key_hash("S#k4"), 400, 9000),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        (b"T", 1, 1, None, "u", 0),
        ("T", 1.0, 1, None, "u", 0),
        ("T", 1, 1, b"k", "u", 0),
        ("T", 1, 1, None, 7, 0),
        ("T", 1, True, None, "u", 0),
        ("T", 1 << 63, 1, None, "u", 0),
    ],
)
def test_entries_refuse_unexpected_types(bad: tuple[Any, ...]) -> None:
    rows = [("T", 1, 1, None, "ok", 0), bad]
    assert _index_put.index_key_entries_py(*_columns(rows), 0) is None
    if native.COMPILED and _index_put.COMPILED:
        assert _index_put.index_key_entries(*_columns(rows), 0) is None


@compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(_ROW, max_size=30), st.integers(0, 5000))
def test_compiled_entries_equal_pure(rows: list[tuple[Any, ...]], end_phy: int) -> None:
    cols = _columns(rows)
    assert _index_put.index_key_entries(*cols, end_phy) == _index_put.index_key_entries_py(
        *cols, end_phy
    )


def _file(slot_num: int, index_num: int, prior: list[tuple[int, int]]) -> bytearray:
    """A map with some slots already set (possibly to implausible values) and entries."""
    mm = bytearray(INDEX_HEADER_SIZE + slot_num * 4 + index_num * 20)
    for slot, value in prior:
        INDEX_SLOT.pack_into(mm, INDEX_HEADER_SIZE + (slot % slot_num) * 4, value)
    return mm


@given(
    st.integers(1, 9),
    st.integers(2, 30),
    st.integers(1, 35),
    st.lists(st.tuples(st.integers(0, 8), st.integers(-3, 40)), max_size=6),
    st.lists(
        st.tuples(st.integers(0, 0x7FFFFFFF), st.integers(0, 1 << 40), st.integers(0, 10**7)),
        max_size=40,
    ),
    st.integers(0, 5),
    st.sampled_from([0, 1, 3_000_000]),
)
@settings(max_examples=300, deadline=None)
def test_write_equals_put_key_sequence(
    slot_num: int,
    index_num: int,
    count: int,
    prior: list[tuple[int, int]],
    keys: list[tuple[int, int, int]],
    start: int,
    begin_ts: int,
) -> None:
    count = min(count, index_num)
    items = b"".join(_index_put.ITEM.pack(*k) for k in keys)
    start = min(start, len(keys))
    mm = _file(slot_num, index_num, prior)
    want = bytearray(mm)
    got = _index_put.index_write_py(mm, slot_num, index_num, count, 7, begin_ts, items, start)
    # the reference: put_key's steps, written out
    entries_at = INDEX_HEADER_SIZE + slot_num * 4
    n, new, b_phy, b_ts = count, 0, 7, begin_ts
    for h, phys, ts in keys[start:]:
        if n >= index_num:
            break
        at = INDEX_HEADER_SIZE + (h % slot_num) * 4
        (prev,) = INDEX_SLOT.unpack_from(want, at)
        if prev <= 0 or prev > n:
            prev, new = 0, new + 1
        if n <= 1:
            b_phy, b_ts = phys, ts
        diff = 0 if b_ts <= 0 else max(ts - b_ts, 0) // 1000
        INDEX_ENTRY.pack_into(want, entries_at + n * 20, h, phys, diff, prev)
        INDEX_SLOT.pack_into(want, at, n)
        n += 1
    assert got == (n - count, new, b_phy, b_ts)
    assert mm == want
    if native.COMPILED and _index_put.COMPILED:
        again = _file(slot_num, index_num, prior)
        args = (slot_num, index_num, count, 7, begin_ts, items, start)
        assert _index_put.index_write(again, *args) == got
        assert again == mm


@pytest.mark.parametrize("fn", ["index_write", "index_write_py"])
def test_write_refuses_a_layout_past_the_map(fn: str) -> None:
    write = getattr(_index_put, fn)
    item = _index_put.ITEM.pack(1, 2, 3)
    with pytest.raises(ValueError, match="layout"):
        write(bytearray(100), 4, 10, 1, 0, 0, item, 0)
    with pytest.raises(ValueError, match="layout"):
        write(bytearray(1000), 4, 10, 1, 0, 0, item + b"x", 0)
    with pytest.raises(ValueError, match="layout"):
        write(bytearray(1000), 4, 10, 1, 0, 0, item, 2)


@pytest.mark.parametrize("twins", ["selected", "pure"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(_ROW, min_size=1, max_size=8), min_size=1, max_size=5))
def test_service_through_items_writes_what_put_key_writes(
    twins: str, batches: list[list[tuple[Any, ...]]]
) -> None:
    requests = [
        [
            DispatchRequest(topic, 0, phys, 10, 0, ts, 0, keys, uniq, flag, None)
            for topic, phys, ts, keys, uniq, flag in batch
        ]
        for batch in batches
    ]
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as a:
        if twins == "pure":  # the references, through the service
            mp.setattr(_index_put, "COMPILED", True)
            mp.setattr(_index_put, "index_key_entries", _index_put.index_key_entries_py)
            mp.setattr(_index_put, "index_write", _index_put.index_write_py)
        got = index_files(a, requests, each=False, slot_num=7, index_num=30)
    with tempfile.TemporaryDirectory() as b:
        assert got == index_files(b, requests, each=True, slot_num=7, index_num=30)


def test_service_finds_each_key_across_files(tmp_path: Any) -> None:
    clock = ManualClock(1_700_000_000_000)
    index = IndexService(str(tmp_path / "index"), 11, 50, clock)
    keys = [f"7F0000010000{i:020X}" for i in range(120)]
    trace = DispatchRequest(
        "RMQ_SYS_TRACE_TOPIC", 0, 4096, 500, 0, 1_700_000_000_500, 0, " ".join(keys), "U", 0, None
    )
    index.build_index([trace])
    assert len(index.files) == 3  # 121 keys, 49 per file
    for k in [*keys, "U"]:
        found, _, _ = index.query_offsets("RMQ_SYS_TRACE_TOPIC", k, 4, 0, 1 << 62)
        assert found == [4096]
    index.shutdown()
