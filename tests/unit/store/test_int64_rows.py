"""The reput's int columns as int64 rows: the compiled ``int64_rows`` (``_speedups_int64rows.h``)
against its pure twin ``int64_rows_py`` (numpy), and the wrapper the dispatcher uses, which
falls back to numpy where the compiled one declines (both builds run the wrapper's tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.store import dispatch
from ariane.store.dispatch import int64_rows_py

_native = dispatch._native_int64_rows
compiled = pytest.mark.skipif(_native is None, reason="pure build")

_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_EDGES = st.sampled_from([0, 1, -1, (1 << 30) - 1, 1 << 30, -(1 << 30), (1 << 63) - 1, -(1 << 63)])


@st.composite
def _columns(draw: st.DrawFn) -> tuple[Any, ...]:
    k = draw(st.integers(1, 6))
    n = draw(st.integers(0, 40))
    cols = []
    for _ in range(k):
        values = draw(st.lists(st.one_of(_INT64, _EDGES), min_size=n, max_size=n))
        cols.append(tuple(values) if draw(st.booleans()) else values)
    return tuple(cols)


@compiled
@given(_columns())
def test_native_equals_numpy(columns: tuple[Any, ...]) -> None:
    assert _native is not None
    assert _native(columns) == int64_rows_py(columns)


@compiled
@pytest.mark.parametrize(
    "columns",
    [
        ((1, 2), (1 << 63,)),  # unequal lengths
        ((1, 1 << 63),),  # beyond int64
        ((1, -(1 << 63) - 1),),
        ((True, 2),),  # not exact ints: numpy decides
        ((1.0,),),
        ((1, None),),
        ((1,), "ab"),  # a column that is neither tuple nor list
    ],
)
def test_native_declines(columns: tuple[Any, ...]) -> None:
    assert _native is not None
    assert _native(columns) is None


@compiled
def test_native_wants_a_tuple() -> None:
    assert _native is not None
    with pytest.raises(TypeError):
        _native([(1,)])  # type: ignore[arg-type]
    assert _native(()) == bytearray()


@given(_columns())
def test_rows_equal_numpy(columns: tuple[Any, ...]) -> None:
    got = dispatch._int64_rows(columns)
    want = np.array(columns, dtype=np.int64)
    assert got.dtype == np.int64
    assert got.shape == want.shape
    assert got.tolist() == want.tolist()


def test_rows_fall_back_to_numpy() -> None:
    got = dispatch._int64_rows(((True, False), (1, 2)))
    assert got.tolist() == [[1, 0], [1, 2]]
    with pytest.raises(OverflowError):
        dispatch._int64_rows(((1 << 63,),))
