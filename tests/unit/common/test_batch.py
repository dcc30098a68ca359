"""The SEND_BATCH_MESSAGE body codec."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common import batch as batch_module
from ariane.common.batch import decode_batch, encode_batch, encode_batch_py
from ariane.common.properties import decode_properties
from ariane.errors import CorruptionError, InvalidArgumentError

messages = st.lists(
    st.tuples(
        st.binary(max_size=64),
        st.integers(-(2**31), 2**31 - 1),
        st.dictionaries(
            st.text(
                st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                min_size=1,
                max_size=8,
            ),
            st.text(
                st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                min_size=1,
                max_size=8,
            ),
            max_size=4,
        ),
    ),
    max_size=8,
)


@given(messages)
def test_round_trip(msgs: list[tuple[bytes, int, dict[str, str]]]) -> None:
    decoded = decode_batch(encode_batch(msgs))
    assert [(e.body, e.flag, decode_properties(e.properties)) for e in decoded] == msgs


def test_layout_matches_rocketmq() -> None:
    data = encode_batch([(b"ab", 7, {"K": "v"})])
    assert struct.unpack_from(">iiiii", data) == (22 + 2 + 4, 0, 0, 7, 2)
    assert data[20:22] == b"ab"
    assert data[22:24] == b"\x00\x04"
    assert data[24:] == b"K\x01v\x02"


def test_encoder_refuses_bad_properties() -> None:
    with pytest.raises(InvalidArgumentError):
        encode_batch([(b"", 0, {"k": "\ud800"})])
    with pytest.raises(InvalidArgumentError):
        encode_batch([(b"", 0, {"k": "v" * 40000})])


@given(st.binary(max_size=80))
def test_garbage_raises_only_corruption_errors(data: bytes) -> None:
    try:
        decode_batch(data)
    except CorruptionError:
        pass


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\x00\x05",
        struct.pack(">iiiii", 100, 0, 0, 0, 2) + b"ab\x00\x00",
        struct.pack(">iiiii", 24, 0, 0, 0, -1) + b"\x00\x00",
        struct.pack(">iiiii", 24, 0, 0, 0, 0) + b"\x00\x03abc",
        struct.pack(">iiiii", 24, 0, 0, 0, 0) + b"\x00\x02\xff\xfe",
    ],
)
def test_inconsistent_lengths(data: bytes) -> None:
    with pytest.raises(CorruptionError):
        decode_batch(data)


_ENTRY_TEXT = st.text(max_size=8)  # surrogates too: not UTF-8
_ENTRIES = st.lists(
    st.tuples(
        st.binary(max_size=40) | st.just(bytearray(b"ba")),
        st.integers(-(1 << 31), (1 << 31) - 1) | st.integers(-(1 << 40), 1 << 40) | st.just(True),
        _ENTRY_TEXT | st.just("x" * 40_000) | st.dictionaries(_ENTRY_TEXT, _ENTRY_TEXT, max_size=2),
    ),
    max_size=6,
)


def _outcome(entries: object, encode: object) -> object:
    try:
        return encode(entries)  # type: ignore[operator]
    except Exception as exc:  # the reference's own error, compared
        return type(exc), str(exc)


@given(_ENTRIES)
def test_the_compiled_encoder_is_the_reference(entries: list[tuple[bytes, int, object]]) -> None:
    """``encode_batch`` (the compiled ``encode_entries`` for a list of (bytes, int, str), when
    built) gives the bytes or the error of ``encode_batch_py``, for lists and other iterables."""
    assert _outcome(entries, encode_batch) == _outcome(entries, encode_batch_py)
    assert _outcome(tuple(entries), encode_batch) == _outcome(entries, encode_batch_py)
    if batch_module._encode_entries is not None:
        got = batch_module._encode_entries(entries)
        assert got is None or got == encode_batch_py(entries)  # type: ignore[arg-type]
