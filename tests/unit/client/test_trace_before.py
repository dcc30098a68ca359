"""The compiled ``sub_before`` (``_speedups_trace.h``) against its pure twin ``sub_before_py``:
the same open pair for every one-message listener call, the same ``None`` for untraced
messages, the clock and the request counter called the same way; ``NotImplemented`` (nothing
called) for what ``ConsumeTracer.before`` takes its general path for."""

from __future__ import annotations

import gc
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.client import _trace_records
from ariane.client._trace_records import sub_before_py
from ariane.common import native
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from tests.support.native import compiled
from tests.support.trace import consume_dispatcher
from tests.unit.client.fakes import consumed_message

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
REGION = "DefaultRegion"
OFFSET_ID = (
    "7F00000100002A9F0000000000100000"  # the offset msgId of consumed_message's store host/offset
)
_text = st.text(alphabet=st.sampled_from(["a", "Z", "7", " ", "é", "字", "\U0001f600"]), max_size=8)


class _Clock:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return 1_765_000_000_123_456_789 + self.calls


def _run(fn: Any, msgs: Any) -> tuple[Any, int, int]:
    """``fn``'s answer, the clock's calls and the counter's next value."""
    owner, clock, counter = object(), _Clock(), itertools.count(41)
    out = fn(owner, msgs, TRACE_TOPIC, clock, counter, REGION)
    if isinstance(out, list):
        assert out[0] is owner
        out = [None, out[1]]
    return out, clock.calls, next(counter)


def test_the_compiled_twin_is_used_when_built() -> None:
    assert _trace_records.sub_before is compiled("sub_before")


def test_the_pair_of_one_traced_message() -> None:
    msg = consumed_message("T", {UNIQ_KEY: "ID1", MSG_REGION: "R1", KEYS: "k1 k2"}, retries=3)
    for fn in (sub_before_py, _trace_records.sub_before):
        pair, calls, counter = _run(fn, [msg])
        assert pair == [None, (1_765_000_000_123_456_790, "R1", 41, "T", "ID1", 3, "k1 k2")]
        assert (calls, counter) == (1, 42)


def test_the_compiled_pair_is_out_of_the_collectors_sight() -> None:
    """The pairs wait up to a linger in the dispatcher's queue: the compiled twin untracks the
    pair and its tuple of atoms (same contents as the pure twin's), and they still work as the
    dispatcher uses them (``after`` appends its end, the worker its marker)."""
    msg = consumed_message("T", {UNIQ_KEY: "ID1"})
    owner = object()
    pair = compiled("sub_before")(owner, [msg], TRACE_TOPIC, _Clock(), itertools.count(1), REGION)
    assert not gc.is_tracked(pair)
    assert not gc.is_tracked(pair[1])
    pair.append(7)
    pair.append(owner)
    assert pair[0] is owner
    assert pair[2:] == [7, owner]
    assert (
        pair[1] == sub_before_py(owner, [msg], TRACE_TOPIC, _Clock(), itertools.count(1), REGION)[1]
    )
    gc.collect()  # nothing for the collector to trip on
    assert pair[2] == 7


def test_defaults_without_region_uniq_key_or_keys() -> None:
    msg = consumed_message("T", {MSG_REGION: ""})
    for fn in (sub_before_py, _trace_records.sub_before):
        pair, _, _ = _run(fn, [msg])
        assert pair[1][1:] == (REGION, 41, "T", OFFSET_ID, 0, None)


@pytest.mark.parametrize(
    ("topic", "properties"),
    [("T", {TRACE_SWITCH: "false"}), (TRACE_TOPIC, {}), (TRACE_TOPIC + "_X", {UNIQ_KEY: "I"})],
)
def test_untraced_messages_give_none_and_call_nothing(
    topic: str, properties: dict[str, str]
) -> None:
    for fn in (sub_before_py, _trace_records.sub_before):
        assert _run(fn, [consumed_message(topic, properties)]) == (None, 0, 41)


def test_not_one_message_is_left_to_the_caller() -> None:
    msg = consumed_message("T", {UNIQ_KEY: "I"})
    for fn in (sub_before_py, _trace_records.sub_before):
        assert _run(fn, []) == (NotImplemented, 0, 41)
        assert _run(fn, [msg, msg]) == (NotImplemented, 0, 41)


def test_unusual_values_are_left_to_the_caller_by_the_compiled_twin() -> None:
    fast = compiled("sub_before")
    for msgs in (
        (consumed_message("T", {UNIQ_KEY: "I"}),),  # a tuple, not a list
        [consumed_message("T", {UNIQ_KEY: 7})],  # a property that is not a str
        [consumed_message("T", {TRACE_SWITCH: None})],
    ):
        assert _run(fast, msgs) == (NotImplemented, 0, 41)


def test_what_the_clock_raises_propagates() -> None:
    def broken() -> int:
        raise RuntimeError("clock")

    for fn in (sub_before_py, _trace_records.sub_before):
        with pytest.raises(RuntimeError, match="clock"):
            fn(
                object(),
                [consumed_message("T", {})],
                TRACE_TOPIC,
                broken,
                itertools.count(),
                REGION,
            )


_properties = st.fixed_dictionaries(
    {},
    optional={
        TRACE_SWITCH: st.sampled_from(["false", "true", ""]),
        MSG_REGION: _text,
        UNIQ_KEY: _text,
        KEYS: _text,
        "OTHER": _text,
    },
)


@settings(max_examples=300, deadline=None)
@given(
    topic=st.sampled_from(["T", "字", TRACE_TOPIC, "RMQ_SYS", ""]) | _text,
    properties=_properties,
    retries=st.integers(0, 2**40),
    count=st.integers(0, 2),
)
def test_sub_before_identical(
    topic: str, properties: dict[str, str], retries: int, count: int
) -> None:
    fast = compiled("sub_before")
    msgs = [consumed_message(topic, properties, retries)] * count
    assert _run(fast, msgs) == _run(sub_before_py, msgs)


def test_after_keeps_the_usual_end_as_its_time_alone() -> None:
    from ariane.client._trace_hooks import ConsumeTracer
    from ariane.common.clock import ManualClock
    from ariane.common.trace import ConsumeReturnType

    dispatcher = consume_dispatcher()
    tracer = ConsumeTracer(dispatcher, "g", ManualClock(1_765_000_000_123))
    ok, failed = ConsumeReturnType.SUCCESS, ConsumeReturnType.FAILED
    usual = tracer.before([consumed_message("T", {UNIQ_KEY: "I1"})])
    odd = tracer.before([consumed_message("T", {UNIQ_KEY: "I2"})])
    assert usual is not None
    assert odd is not None
    tracer.after(usual, 1, True, ok)
    tracer.after(odd, 1, False, failed)
    assert usual[2] == 1_765_000_000_123_000_000  # an int: one object fewer per delivery
    assert odd[2] == (1_765_000_000_123_000_000, 1, False, failed)
    assert dispatcher.stats.appended == 4


_USUAL = object()


def _after_outcome(fn: Any, pair: list[Any], count: int, success: bool, outcome: object) -> Any:
    clock = _Clock()
    try:
        result = fn(pair, count, success, outcome, clock, _USUAL)
    except Exception as exc:  # the same error from both twins
        return ("raised", type(exc).__name__)
    return result, pair, clock.calls


@settings(max_examples=300, deadline=None)
@given(
    taken=st.integers(0, 2),
    count=st.integers(-1, 3) | st.integers(2**63, 2**64),
    success=st.booleans(),
    usual=st.booleans(),
)
def test_sub_after_identical(taken: int, count: int, success: bool, usual: bool) -> None:
    fast = getattr(native.speedups, "sub_after", None)
    if fast is None:
        compiled("sub_before")  # skips on the pure build, fails when a compiler is present
    marker = "TAKEN"
    outcome = _USUAL if usual else "FAILED"
    want = _after_outcome(_trace_records.sub_after_py, ["o", "d", marker][: taken + 1], count,
                          success, outcome)  # fmt: skip
    got = _after_outcome(fast, ["o", "d", marker][: taken + 1], count, success, outcome)
    assert got == want


def test_sub_after_ends() -> None:
    for fn in {_trace_records.sub_after, _trace_records.sub_after_py}:
        clock = _Clock()
        pair: list[Any] = ["owner", "data"]
        assert fn(pair, 1, True, _USUAL, clock, _USUAL) is None
        assert pair == ["owner", "data", 1_765_000_000_123_456_790]  # the usual end: an int
        pair = ["owner", "data"]
        assert fn(pair, 2, True, _USUAL, clock, _USUAL) is None
        assert pair[2] == (1_765_000_000_123_456_791, 2, True, _USUAL)
        taken: list[Any] = ["owner", "data", "TAKEN"]
        end = fn(taken, 1, False, "FAILED", clock, _USUAL)
        assert end == (1_765_000_000_123_456_792, 1, False, "FAILED")  # the caller ships it
        assert taken[3] is end

        def broken() -> int:
            raise RuntimeError("clock")

        with pytest.raises(RuntimeError, match="clock"):
            fn(["owner", "data"], 1, True, _USUAL, broken, _USUAL)
