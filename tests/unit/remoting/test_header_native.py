"""The compiled header parser (``_speedups.header_parse``) against each header's pure twin
(``from_ext_fields_py``, compiled in Python by ``headers._base``).

For every header class and any extFields, ``from_ext_fields`` (the C call, then the twin on
None) gives exactly what the twin gives (every field equal and of the same type) or raises
the twin's ``HeaderFieldError`` with the same message; the C call alone either returns None or
that same object, never a header where the twin raises. Values are drawn from plain digits,
odd integer spellings the twin reads leniently (``"+1"``, ``" 2"``, ``"1_0"``, full-width digits),
out-of-range and 19-digit numbers, booleans in every spelling, nulls and absent keys. This
file is in the Makefile's PURE_TESTS (there the two functions are the same code).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import HeaderFieldError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.headers import _base

HEADERS = sorted(
    (
        c
        for _, c in inspect.getmembers(h, inspect.isclass)
        if issubclass(c, _base.CommandHeader) and c.FIELDS
    ),
    key=lambda c: c.__name__,
)
compiled = pytest.mark.skipif(_base._HEADER_PARSE is None, reason="pure build")

_NUMBER = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(str),
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.sampled_from(
        [
            "0", "-0", "007", "-", "", "+1", " 2", "3 ", "1_0", "１２", "2147483648",
            "-2147483649", "999999999999999999", "9223372036854775807", "9223372036854775808",
            "-9223372036854775808", "1.5", "0x10", "abc",
        ]
    ),
)  # fmt: skip
_BOOL = st.sampled_from(["true", "false", "1", "0", "TRUE", "True", "yes", "", "2", "tRuE"])
_VALUE = st.one_of(_NUMBER, _BOOL, st.text(max_size=8), st.none(), st.just(7))


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    for spec in a.FIELDS:
        x, y = getattr(a, spec.name), getattr(b, spec.name)
        assert type(x) is type(y), spec.name
        assert x == y, spec.name


def _outcome(fn: Any, ext: dict[str, Any]) -> Any:
    try:
        return fn(ext)
    except (HeaderFieldError, AttributeError) as exc:  # the twin's errors (an int value of a
        return ("raised", type(exc).__name__, str(exc))  # bool: AttributeError, as before)


@st.composite
def _ext(draw: st.DrawFn, cls: type[_base.CommandHeader]) -> dict[str, Any]:
    ext: dict[str, Any] = {}
    for spec in cls.FIELDS:
        if draw(st.integers(0, 9)) == 0:
            continue  # absent
        if draw(st.integers(0, 3)):  # mostly the plain case
            plain = {
                "str": st.text(max_size=10),
                "i32": st.integers(-(2**31), 2**31 - 1).map(str),
                "i64": st.integers(-(10**18) + 1, 10**18 - 1).map(str),
                "bool": st.sampled_from(["true", "false", "1", "0"]),
            }[spec.kind]
            ext[spec.key] = draw(plain)
        else:
            ext[spec.key] = draw(_VALUE)
    if draw(st.booleans()):
        ext[draw(st.text(max_size=4))] = "extra"
    return ext


@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_from_ext_fields_is_the_twin(cls: type[_base.CommandHeader], data: st.DataObject) -> None:
    ext = data.draw(_ext(cls))
    got = _outcome(cls.from_ext_fields, ext)
    want = _outcome(cls.from_ext_fields_py, ext)  # type: ignore[attr-defined]
    if isinstance(want, tuple):
        assert got == want
    else:
        _same(got, want)


@compiled
@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_compiled_call_is_none_or_the_twin(
    cls: type[_base.CommandHeader], data: st.DataObject
) -> None:
    ext = data.draw(_ext(cls))
    plan = cls.from_ext_fields.__func__.__globals__["_plan"]  # type: ignore[attr-defined]
    fast = _base._HEADER_PARSE
    assert fast is not None
    got = fast(cls, plan, ext)
    want = _outcome(cls.from_ext_fields_py, ext)  # type: ignore[attr-defined]
    if got is not None:
        assert not isinstance(want, tuple), f"C parsed what the twin refuses: {want}"
        _same(got, want)


SEND = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1796000000000"}


@compiled
def test_send_header_exact_fields_and_plain_case() -> None:
    cls = h.SendMessageRequestHeaderV2
    plan = cls.from_ext_fields.__func__.__globals__["_plan"]  # type: ignore[attr-defined]
    ext = dict(SEND, h="0", i="TAGS\x01A\x02", j="2", k="false", m="1", n="broker-a")
    got = _base._HEADER_PARSE(cls, plan, ext)  # type: ignore[misc]
    assert got == cls(
        producer_group="g", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=3, sys_flag=0, born_timestamp=1796000000000, flag=0, properties="TAGS\x01A\x02",
        reconsume_times=2, unit_mode=False, batch=True, broker_name="broker-a",
    )  # fmt: skip
    assert _base._HEADER_PARSE(cls, plan, SEND) is None  # "h" (flag) is required: the twin raises
    for odd in ("+3", " 3", "2147483648", "３"):  # lenient or refused: the twin decides
        assert _base._HEADER_PARSE(cls, plan, dict(SEND, h="0", e=odd)) is None


@compiled
def test_bad_plan_is_a_type_error() -> None:
    cls = h.SendMessageRequestHeaderV2
    other = h.PullMessageRequestHeader
    slot = other.from_ext_fields.__func__.__globals__["_plan"][0][4]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        _base._HEADER_PARSE(cls, (("a", 0, True, None, slot),), {"a": "x"})  # type: ignore[misc]
    with pytest.raises(TypeError):
        _base._HEADER_PARSE(cls, (("a", 0, True, None),), {"a": "x"})  # type: ignore[misc]
