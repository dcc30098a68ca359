"""A dispatch batch's ConsumeQueue groups (``store/dispatch_groups.py``): the compiled
``cq_groups`` against its pure twin, the twin's exact groups, and the dispatcher and listener
calls made from them against the reference path (record by record / numpy, and
``_notify_columns``): the same ConsumeQueue bytes and the same listener calls."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from ariane.store import dispatch
from ariane.store.dispatch_groups import MAX_GROUPS, cq_groups, cq_groups_py
from ariane.store.format import CQ_UNIT, DispatchRequest
from tests.unit.store.helpers import open_store

compiled = pytest.mark.skipif(cq_groups is None, reason="pure build")

_FLAGS = [0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, TRANSACTION_COMMIT_TYPE]


def _req(
    topic: str, qid: int, phys: int, tags: int, offset: int, flag: int = 0, props: Any = None
) -> DispatchRequest:
    return DispatchRequest(
        topic, qid, phys, 100, tags, 1_000 + offset, offset, None, None, flag, props
    )  # fmt: skip


def _columns(batch: list[DispatchRequest]) -> tuple[tuple[Any, ...], ...]:
    return tuple(zip(*batch, strict=True))


@st.composite
def _batches(draw: st.DrawFn) -> list[DispatchRequest]:
    """Records over a few (topic, queue) pairs in physical order, with each queue's offsets
    consecutive, now and then a gap or a repeat, mixed tags and transaction flags."""
    n = draw(st.integers(0, 60))
    next_offset: dict[tuple[str, int], int] = {}
    phys = draw(st.integers(0, 1 << 40))
    out = []
    for _ in range(n):
        key = (draw(st.sampled_from(["A", "B", "é"])), draw(st.integers(0, 3)))
        offset = next_offset.get(key, draw(st.integers(0, 5)))
        offset += draw(st.sampled_from([0, 0, 0, 0, 1, -1]))  # a gap or a repeat now and then
        next_offset[key] = offset + 1
        phys += draw(st.sampled_from([100, 100, 100, 0, -50]))
        tags = draw(st.sampled_from([0, 0, 0, 7, -(1 << 63), (1 << 63) - 1]))
        flag = draw(st.sampled_from(_FLAGS))
        out.append(_req(key[0], key[1], phys, tags, offset, flag, {"o": str(offset)}))
    return out


@compiled
@settings(max_examples=150)
@given(_batches(), st.booleans())
def test_compiled_equals_twin(batch: list[DispatchRequest], as_lists: bool) -> None:
    assert cq_groups is not None
    columns = _columns(batch)
    if as_lists:
        columns = tuple(list(c) for c in columns)
    assert cq_groups(columns) == cq_groups_py(columns)


@pytest.mark.parametrize("impl", ["twin", "compiled"])
@pytest.mark.parametrize(
    ("column", "value"),
    [
        (1, 1.0),  # queue id not an int
        (1, True),  # a bool is not an exact int
        (1, 1 << 31),  # beyond int32
        (3, -(1 << 31) - 1),  # size beyond int32
        (2, 1 << 63),  # physical offset beyond int64
        (4, -(1 << 63) - 1),  # tags beyond int64
        (6, None),  # queue offset
        (9, 1 << 31),  # sysFlag
        (0, b"A"),  # a topic that is not a str
    ],
)
def test_declines_what_it_does_not_take(impl: str, column: int, value: Any) -> None:
    if impl == "compiled" and cq_groups is None:
        pytest.skip("pure build")
    fn = cq_groups if impl == "compiled" else cq_groups_py
    assert fn is not None
    columns = [list(c) for c in _columns([_req("A", 0, 0, 0, 0), _req("A", 0, 100, 0, 1)])]
    columns[column][1] = value
    assert fn(tuple(columns)) is None
    assert fn(tuple(columns[:9])) is None  # too few columns
    columns = [list(c) for c in _columns([_req("A", 0, 0, 0, 0), _req("A", 0, 100, 0, 1)])]
    columns[3] = columns[3][:1]  # unequal lengths
    assert fn(tuple(columns)) is None
    many = [_req("T", q, q * 100, 0, 0) for q in range(MAX_GROUPS + 1)]
    assert fn(_columns(many)) is None
    assert fn(_columns(many[:MAX_GROUPS])) is not None


def test_twin_groups() -> None:
    batch = [
        _req("A", 0, 0, 7, 10),
        _req("B", 1, 100, 0, 0, props={"p": "1"}),
        _req("A", 0, 200, 7, 11),
        _req("C", 0, 300, 0, 0, TRANSACTION_PREPARED_TYPE),  # outside the queues
        _req("A", 1, 400, 9, 3),
        _req("A", 1, 500, 8, 4),  # another tags code
        _req("B", 2, 600, 0, 0),
        _req("B", 2, 700, 0, 2),  # a gap: not a run
        _req("A", 0, 800, 7, 12, TRANSACTION_ROLLBACK_TYPE),
    ]
    units = CQ_UNIT.pack
    assert cq_groups_py(_columns(batch)) == [
        ("A", 0, 2, 0, 200, 10, 2, units(0, 100, 7) + units(200, 100, 7), True),
        ("B", 1, 1, 100, 100, 0, 1, units(100, 100, 0), True),
        ("A", 1, 2, 400, 500, 3, 5, units(400, 100, 9) + units(500, 100, 8), False),
        ("B", 2, 2, 600, 700, 0, 7, None, True),
    ]
    assert cq_groups_py(_columns([])) is None  # no rows, no columns
    assert cq_groups_py(((),) * 11) == []


def _cq_bytes(root: Path) -> dict[str, bytes]:
    out = {}
    base = root / "consumequeue"
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(base))] = path.read_bytes()
    return out


@settings(max_examples=12, deadline=None)
@given(st.lists(_batches(), min_size=1, max_size=4))
def test_dispatch_by_groups_writes_what_the_reference_writes(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[DispatchRequest]]
) -> None:
    """The same batches through the reference path and through the groups (the compiled
    ones, else the twin): byte-identical ConsumeQueue files (5-entry files: runs cross file
    ends), and each batch dispatched twice (the second time writes nothing)."""
    got = {}
    for mode in ("reference", "groups"):
        root = tmp_path_factory.mktemp(mode)
        groups_fn = None if mode == "reference" else (cq_groups or cq_groups_py)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(dispatch, "cq_groups", groups_fn)
            with open_store(root, mapped_file_size_consume_queue=5 * 20) as store:
                for batch in batches:
                    for _ in range(2):
                        if batch:
                            store.dispatcher.dispatch_columns(_columns(batch))
            got[mode] = _cq_bytes(root)
    assert got["groups"] == got["reference"]


@settings(max_examples=100, deadline=None)
@given(_batches())
def test_listener_calls_from_groups_equal_the_reference(batch: list[DispatchRequest]) -> None:
    groups = cq_groups_py(_columns(batch)) if batch else None
    if groups is None or not all(g[8] for g in groups):
        return  # the reput thread then calls _notify_columns itself
    reput = dispatch.ReputService(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        sync_visibility=False,
        on_error=lambda reason: None,
    )
    want: list[tuple[Any, ...]] = []
    reput.listener = lambda *args: want.append(args)
    reput._notify_columns(_columns(batch))
    got: list[tuple[Any, ...]] = []
    reput.listener = lambda *args: got.append(args)
    reput._notify_groups(_columns(batch), groups)
    assert got == want


def test_put_run_writes_only_at_the_queue_end(tmp_path: Path) -> None:
    with open_store(tmp_path, mapped_file_size_consume_queue=5 * 20) as store:
        cq = store.find_consume_queue("T", 0)
        run = CQ_UNIT.pack(100, 10, 1) + CQ_UNIT.pack(200, 10, 1)
        assert not cq.put_run(run, 100, 200, 0)  # no file yet: put creates it
        assert cq.put(50, 10, 1, 0)
        assert not cq.put_run(run, 100, 200, 0)  # offset 0 is written
        assert not cq.put_run(run, 100, 200, 2)  # a gap
        assert not cq.put_run(run, 40, 200, 1)  # a physical offset already dispatched
        assert cq.put_run(run, 100, 200, 1)
        assert cq.max_physic_offset == 200
        assert cq.max_offset_in_queue == 3
        three = run + CQ_UNIT.pack(300, 10, 1)
        assert not cq.put_run(three, 250, 450, 3)  # past the file's end (5 entries)
        assert cq.put_run(three[:40], 250, 350, 3)
        assert cq.max_offset_in_queue == 5
        assert cq.put(500, 10, 1, 5)  # the next file, by put
        assert cq.max_offset_in_queue == 6
