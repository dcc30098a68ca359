"""The compiled ``sub_records`` (``_speedups_trace.h``) against its pure twin
``sub_records_py``: the same items (topic, records, count, index keys) for every round of
listener calls, and the pure result for anything the compiled one does not handle."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.client import _trace_dispatch, _trace_records
from ariane.client._trace_dispatch import join_keys, join_keys_py, key_chars, key_chars_py
from ariane.client._trace_records import (
    Call,
    call_data,
    sub_pairs,
    sub_pairs_py,
    sub_records,
    sub_records_py,
)
from ariane.common import native
from ariane.common.trace import ConsumeReturnType, sub_after_record, sub_before_record
from tests.support.native import compiled

PREFIX = "0123456789ABCDEF"
_text = st.text(
    alphabet=st.sampled_from(["a", "Z", "7", " ", "é", "字", "\U0001f600"]), max_size=12
)
_ns = st.integers(0, 2**63 - 1) | st.integers(1_765_000_000_000_000_000, 1_765_000_000_900_000_000)
_entry = st.tuples(_text, st.integers(-(2**63), 2**63 - 1), st.none() | _text)
_before = st.tuples(
    _ns, _text, st.integers(0, 2**64 - 1), st.sampled_from(["T1", "T2"]), st.tuples(*[_entry] * 2)
)
_after = (
    st.none()
    | _ns  # the usual end as its time alone
    | st.tuples(_ns, st.integers(-2, 40), st.booleans(), st.sampled_from(list(ConsumeReturnType)))
)
_calls = st.lists(st.tuples(_before, _after), max_size=12)


def test_the_compiled_twin_is_used_when_built() -> None:
    fast = compiled("sub_records")
    assert _trace_records._compiled is fast


@settings(max_examples=300, deadline=None)
@given(
    calls=_calls,
    sub_before=st.booleans(),
    limits=st.tuples(st.integers(1, 600), st.integers(1, 200)) | st.just((29_500, 8_191)),
)
def test_sub_records_identical(
    calls: list[Call], sub_before: bool, limits: tuple[int, int]
) -> None:
    fast = compiled("sub_records")
    want = sub_records_py(calls, "cg%1", PREFIX, sub_before, *limits)
    assert fast(calls, "cg%1", PREFIX, sub_before, *limits) == want
    assert sub_records(calls, "cg%1", PREFIX, sub_before, *limits) == want


def test_records_are_the_reference_encoders_bytes() -> None:
    ok, failed = ConsumeReturnType.SUCCESS, ConsumeReturnType.FAILED
    calls: list[Call] = [
        ((1_765_000_000_123_999_999, "DefaultRegion", 0x1FF, "T", (("ID1", 0, None), ("ID2", 3, "k1 k2"))),
         (1_765_000_000_130_000_000, 2, True, ok)),
        ((1_765_000_000_200_000_000, "régïon", 7, "T", (("ID字", 1, ""),)), None),
        ((1_765_000_000_300_000_000, "R", 8, "T", (("ID4", 0, "k4"),)),
         (1_765_000_000_290_000_000, 1, False, failed)),
    ]  # fmt: skip
    rid = [f"{PREFIX}{n:016X}" for n in (0x1FF, 7, 8)]
    expected = [
        sub_before_record(1_765_000_000_123, "DefaultRegion", "g", rid[0], "ID1", 0, "null"),
        sub_after_record(rid[0], "ID1", 3, True, "null", ok, 1_765_000_000_130, "g"),
        sub_before_record(1_765_000_000_123, "DefaultRegion", "g", rid[0], "ID2", 3, "k1 k2"),
        sub_after_record(rid[0], "ID2", 3, True, "k1 k2", ok, 1_765_000_000_130, "g"),
        sub_before_record(1_765_000_000_200, "régïon", "g", rid[1], "ID字", 1, "null"),
        sub_before_record(1_765_000_000_300, "R", "g", rid[2], "ID4", 0, "k4"),
        sub_after_record(rid[2], "ID4", 0, False, "k4", failed, 1_765_000_000_290, "g"),
    ]
    keys = ("ID1", "ID2", "k1 k2", "ID字", "ID4", "k4")
    for encode in (sub_records_py, sub_records):
        assert encode(calls, "g", PREFIX, True, 10**6, 10**6) == [("T", "".join(expected), 7, keys)]
        # cut after each call that passes a limit: here every call
        items = encode(calls, "g", PREFIX, True, 1, 10**6)
        assert [(i[1], i[2], i[3]) for i in items] == [
            ("".join(expected[:4]), 4, keys[:3]),
            (expected[4], 1, keys[3:4]),
            ("".join(expected[5:]), 2, keys[4:]),
        ]


@pytest.mark.parametrize("use_compiled", [False, True])
def test_an_end_time_alone_is_the_usual_end(use_compiled: bool) -> None:
    fn = compiled("sub_records") if use_compiled else sub_records_py
    before = (1_765_000_000_123_999_999, "R", 7, "T", (("ID1", 2, "k"),))
    end = 1_765_000_000_130_000_000
    usual = (end, 1, True, ConsumeReturnType.SUCCESS)
    for sub_before in (True, False):
        want = sub_records_py([(before, usual)], "g", PREFIX, sub_before, 100, 100)
        assert fn([(before, end)], "g", PREFIX, sub_before, 100, 100) == want
    assert want[0][1] == sub_after_record(
        request_id=PREFIX + "0000000000000007", msg_id="ID1", cost_ms=7, success=True,
        keys="k", context_code=0, timestamp_ms=1_765_000_000_130, group="g",
    )  # fmt: skip


def test_unusual_input_falls_back_to_the_pure_twin() -> None:
    fast = compiled("sub_records")
    odd: list[list[Any]] = [
        [((1, "R", -1, "T", (("I", 0, None),)), None)],  # a negative request number
        [((1, "R", 2**64, "T", (("I", 0, None),)), None)],  # beyond 64 bits
        [((-(10**9), "R", 1, "T", (("I", 0, None),)), None)],  # a negative time
        [((1, None, 1, "T", (("I", 0, None),)), None)],  # not a str: f"{None}"
        [((1, "R", 1, "T", (("I", True, None),)), (5, 1, 1, 2))],  # bool, int outcome
        [((1, "R", 1, "T", (("I\ud800", 0, None),)), None)],  # no UTF-8 form
        [([1, "R", 1, "T", (("I", 0, None),)], None)],  # a list, not a tuple
    ]
    for calls in odd:
        assert fast(calls, "g", PREFIX, True, 100, 100) is None
        want = sub_records_py(calls, "g", PREFIX, True, 100, 100)  # type: ignore[arg-type]
        assert sub_records(calls, "g", PREFIX, True, 100, 100) == want  # type: ignore[arg-type]
    assert fast([], "g", PREFIX, True, 1, 1) == [] == sub_records_py([], "g", PREFIX, True, 1, 1)
    with pytest.raises(ValueError):  # the pure twin's error: not enough values to unpack
        sub_records([((1, "R", 1, "T"), None)], "g", PREFIX, True, 1, 1)  # type: ignore[list-item]


_one = st.tuples(
    _ns,
    _text,
    st.integers(0, 2**64 - 1),
    st.sampled_from(["T1", "T2"]),
    _text,
    st.integers(0, 16),
    st.none() | _text,
)
#: a pair as the worker may find it: open, ended, already claimed, or claimed then ended
_pair = st.tuples(_before | _one, _after, st.sampled_from(["open", "ended", "taken", "late"]))


def _pairs(drawn: list[tuple[Any, Any, str]], taken: object) -> list[list[Any]]:
    out: list[list[Any]] = []
    for data, after, state in drawn:
        pair: list[Any] = ["owner", data]
        done = after if after is not None else (data[0], 1, True, ConsumeReturnType.SUCCESS)
        if state == "ended":
            pair.append(done)
        elif state in ("taken", "late"):
            pair.append(taken)
            if state == "late":
                pair.append(done)
        out.append(pair)
    return out


@settings(max_examples=300, deadline=None)
@given(
    drawn=st.lists(_pair, max_size=12),
    limits=st.tuples(st.integers(1, 600), st.integers(1, 200)) | st.just((29_500, 8_191)),
)
def test_sub_pairs_identical(drawn: list[tuple[Any, Any, str]], limits: tuple[int, int]) -> None:
    compiled("sub_records")  # skips or fails when not built
    fast = native.speedups.sub_pairs  # type: ignore[union-attr]
    taken = object()
    slow_pairs, fast_pairs, mixed_pairs = (_pairs(drawn, taken) for _ in range(3))
    want = sub_pairs_py(slow_pairs, "cg", PREFIX, taken, *limits)
    assert fast(fast_pairs, "cg", PREFIX, taken, *limits) == want
    assert sub_pairs(mixed_pairs, "cg", PREFIX, taken, *limits) == want
    assert fast_pairs == slow_pairs == mixed_pairs  # claimed alike
    # a second claim changes nothing: the reference may redo a round the compiled one gave up
    assert sub_pairs_py(fast_pairs, "cg", PREFIX, taken, *limits) == want
    # the before data, as sub_records takes it
    for data, _, _ in drawn:
        full = call_data(data)
        assert full == (data if len(data) == 5 else (*data[:4], (data[4:],)))


def test_sub_pairs_unusual_input_falls_back() -> None:
    compiled("sub_records")
    fast = native.speedups.sub_pairs  # type: ignore[union-attr]
    taken = object()
    done = (5, 1, True, ConsumeReturnType.SUCCESS)
    odd: list[list[Any]] = [
        [["owner", (1, "R", 1, "T", "I", True, None)]],  # a bool retry count: f"{True}"
        [["owner", (1, "R", 1, "T", "I", 0, None), done], ("not", "a list")],
    ]
    ok = [["owner", (1, "R", 1, "T", "I", 0, None)], ["owner", (1, "R", 2, "T", "J", 0, "k"), done]]
    assert fast(_copy(ok), "g", PREFIX, taken, 100, 100) == sub_pairs_py(
        _copy(ok), "g", PREFIX, taken, 100, 100
    )
    assert fast(_copy(odd[0]), "g", PREFIX, taken, 100, 100) is None
    want = sub_pairs_py(_copy(odd[0]), "g", PREFIX, taken, 100, 100)
    assert sub_pairs(_copy(odd[0]), "g", PREFIX, taken, 100, 100) == want
    assert "\x01True\x01" in want[0][1]
    assert fast(_copy(odd[1]), "g", PREFIX, taken, 100, 100) is None
    with pytest.raises(AttributeError):  # the reference's error: a tuple has no append
        sub_pairs(_copy(odd[1]), "g", PREFIX, taken, 100, 100)


def _copy(pairs: list[list[Any]]) -> list[list[Any]]:
    return [list(p) if isinstance(p, list) else p for p in pairs]


# -- the trace message's KEYS (``_trace_dispatch.join_keys`` / ``key_chars``) -----------------

_key = st.text(
    alphabet=st.sampled_from(["a", "b", "Z", "7", " ", "é", "字", "\U0001f600", "\x00"]),
    max_size=20,
)


def _compiled_keys() -> tuple[Any, Any]:
    # skips on the pure build, fails when a compiler exists but nothing was built
    compiled("sub_records")
    join, chars = native.speedups.trace_join_keys, native.speedups.trace_key_chars
    assert _trace_dispatch._join_keys_c is join
    assert _trace_dispatch._key_chars_c is chars
    return join, chars


@settings(max_examples=400, deadline=None)
@given(st.lists(_key | st.sampled_from(["7F00000100002A9F0000000000000001", "a", ""]), max_size=60))
def test_join_keys_and_key_chars_identical(keys: list[str]) -> None:
    join, chars = _compiled_keys()
    assert join(keys) == join_keys_py(keys) == " ".join(dict.fromkeys(keys))
    assert chars(tuple(keys)) == key_chars_py(tuple(keys)) == sum(len(k) + 1 for k in keys)
    assert join_keys(keys) == join_keys_py(keys)
    assert key_chars(tuple(keys)) == key_chars_py(tuple(keys))


def test_join_keys_keeps_the_first_of_equal_keys_in_order() -> None:
    ids = [f"7F0000010001{i:020X}" for i in range(500)]
    keys = [*ids, "k1 k2", *ids[::-1], "k1 k2", "é", "\U0001f600", "é"]
    assert join_keys(keys) == " ".join([*ids, "k1 k2", "é", "\U0001f600"])
    # equal texts built apart are one key; different texts are two
    assert join_keys(["aé", "a" + "é", "a\u00e9", "ae"]) == "aé ae"


def test_join_keys_unusual_input_falls_back_to_the_pure_twin() -> None:
    class Key(str):
        pass

    keys = [Key("a"), "a", "b"]
    assert join_keys(keys) == "a b"  # type: ignore[arg-type]
    assert key_chars((Key("ab"), "c")) == 5
    if native.speedups is not None and hasattr(native.speedups, "trace_join_keys"):
        assert native.speedups.trace_join_keys(keys) is None
        assert native.speedups.trace_join_keys(("a",)) is None
        assert native.speedups.trace_key_chars(["a"]) is None
        assert native.speedups.trace_key_chars((Key("a"),)) is None
