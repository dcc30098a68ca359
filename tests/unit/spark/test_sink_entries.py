"""The sink's batch entries from Arrow buffers (``ariane.spark._entries``): the compiled
``sink_entries`` gives what its pure twin gives (entries, None, errors), and both give the
bytes ``encode_batch`` writes for the rows' messages; ``MessageIdSequence.ids`` gives the ids
``id_of`` gives."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyarrow")

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native
from ariane.common.batch import encode_batch
from ariane.common.properties import DEDUP, KEYS, TAGS, UNIQ_KEY
from ariane.spark._entries import sink_entries, sink_entries_py
from ariane.spark.ids import MessageIdSequence

_FAST = getattr(native.speedups, "sink_entries", None)
_UNIQ = f"{UNIQ_KEY}\x01".encode()
_DEDUP = f"\x02{DEDUP}\x01".encode()
_TYPES = [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()]


def _both(*args: Any) -> Any:
    """The twin's answer, checked equal to the compiled one's when built."""
    got = sink_entries_py(*args)
    if _FAST is not None:
        assert _FAST(*args) == got
    return got


def _call(column: pa.Array, heads: Any, ids: list[str], dedup: bytes | None) -> Any:
    _, offsets, data = column.buffers()
    wide = column.type in (pa.large_binary(), pa.large_string())
    return _both(offsets, data, wide, column.offset, len(column), heads, ids, _UNIQ, dedup)


def _expected(
    bodies: list[bytes], tags: list[str], keys: list[str], ids: list[str], idem: bool
) -> list[bytes]:
    out = []
    for body, t, k, m in zip(bodies, tags, keys, ids, strict=True):
        props = {TAGS: t, KEYS: k} if t and k else {TAGS: t} if t else {KEYS: k} if k else {}
        props[UNIQ_KEY] = m
        if idem:
            props[DEDUP] = m
        out.append(encode_batch([(body, 0, props)]))
    return out


_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.binary(min_size=1, max_size=300), _TEXT, _TEXT), max_size=12),
    kind=st.sampled_from(_TYPES),
    cut=st.integers(0, 3),
    idem=st.booleans(),
    with_heads=st.booleans(),
)
def test_entries_are_encode_batch_bytes(
    rows: list[tuple[bytes, str, str]], kind: pa.DataType, cut: int, idem: bool, with_heads: bool
) -> None:
    if kind in (pa.string(), pa.large_string()):
        rows = [(b.decode("latin-1").encode(), t, k) for b, t, k in rows]
        values: list[Any] = [b.decode() for b, _, _ in rows]
    else:
        values = [b for b, _, _ in rows]
    column = pa.array([b"pad"] * cut + values + [b"z"] if kind in _TYPES[:2] else
                      ["pad"] * cut + values + ["z"], kind).slice(cut, len(rows))  # fmt: skip
    bodies = [b for b, _, _ in rows]
    tags = [t if with_heads else "" for _, t, _ in rows]
    keys = [k if with_heads else "" for _, _, k in rows]
    heads = None
    if with_heads:
        heads = [
            ((f"{TAGS}\x01{t}\x02" if t else "") + (f"{KEYS}\x01{k}\x02" if k else "")).encode()
            for t, k in zip(tags, keys, strict=True)
        ]
    ids = MessageIdSequence("ns", 1, 2).ids(5, len(rows))
    assert _call(column, heads, ids, _DEDUP if idem else None) == _expected(
        bodies, tags, keys, ids, idem
    )


def test_long_properties_are_none_and_bad_input_raises() -> None:
    column = pa.array([b"a", b"b"])
    assert _call(column, [b"", b"x" * 0x7FFF], ["I1", "I2"], None) is None
    assert _call(column, [b"", b"x" * (0x7FFF - len(_UNIQ) - 3)], ["I1", "I2"], None) is not None
    _, offsets, data = column.buffers()
    for args in [
        (offsets, data, False, 1, 2, None, ["a", "b"], _UNIQ, None),  # past the offsets
        (offsets, b"a", False, 0, 2, None, ["a", "b"], _UNIQ, None),  # past the data
        (offsets, data, False, 0, 2, None, ["a", "\u00e9"], _UNIQ, None),  # a non-ASCII id
    ]:
        with pytest.raises(ValueError):
            sink_entries_py(*args)
        if _FAST is not None:
            with pytest.raises(ValueError):
                _FAST(*args)
    for args in [
        (offsets, data, False, 0, 2, None, ["a"], _UNIQ, None),  # ids not of n rows
        (offsets, data, False, 0, 2, [b""], ["a", "b"], _UNIQ, None),  # heads not of n rows
    ]:
        with pytest.raises(TypeError):
            sink_entries(*args)
        with pytest.raises(TypeError):
            sink_entries_py(*args)


def test_empty_run() -> None:
    column = pa.array([], pa.binary())
    assert _call(column, None, [], _DEDUP) == []


def test_ids_are_id_of() -> None:
    seq = MessageIdSequence("q", 3, 7)
    assert seq.ids(998, 5) == [seq.id_of(r) for r in range(998, 1003)]
    assert seq.ids(0, 0) == []
