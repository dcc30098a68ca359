"""Arbitrary input: compile raises only FilterSyntaxError; evaluation never raises."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import FilterEvaluationError, FilterSyntaxError
from ariane.filter.sql92 import compile

FRAGMENTS = [
    "a", "b", "TAGS", "$x", "_y", "a1", "0", "00", "0L", "5l", "12", "1e", "1e5", "1.", ".5", ".",
    "0x10", "9223372036854775808", "'x'", "''", "'", "'it''s'", "--c\n", "--", "/*c*/", "/*", "*/",
    "\n", "\t", "\f", "\v", "#", ";", "!=", "==", "=", "<>", "<", ">", ">=", "<=", "(", ")", ",",
    "+", "-", "*", "é", "\u00a0", "NOT", "not", "AND", "OR", "IS", "NULL", "TRUE", "FALSE", "IN",
    "BETWEEN", "CONTAINS", "startswith", "EndsWith", "NOTE",
]  # fmt: skip

soup = st.lists(
    st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(["", " ", "  "])), max_size=12
).map(lambda parts: "".join(f + sep for f, sep in parts))
properties = st.dictionaries(
    st.sampled_from(["a", "b", "TAGS", "$x", "_y", "a1"]),
    st.one_of(st.text(max_size=12), st.sampled_from(["1", "-1", "1.5", "NaN", "true", "x"])),
)


def _exercise(text: str, props: dict[str, str]) -> None:
    try:
        f = compile(text)
    except FilterSyntaxError as e:
        error: FilterSyntaxError | None = e
    else:
        error = None
    if error is not None:
        assert 0 <= error.position <= len(text)
        return
    assert f.evaluate(props) in (True, False, None)
    assert f.matches(props) in (True, False)
    try:
        assert f.evaluate_strict(props) in (True, False, None)
    except FilterEvaluationError:
        assert f.evaluate(props) is None
        assert not f.matches(props)


@settings(max_examples=500)
@given(st.text(max_size=80), properties)
def test_arbitrary_text(text: str, props: dict[str, str]) -> None:
    _exercise(text, props)


@settings(max_examples=1000)
@given(soup, properties)
def test_token_soup(text: str, props: dict[str, str]) -> None:
    _exercise(text, props)


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=40)))
def test_arbitrary_properties(props: dict[str, str]) -> None:
    for text in (
        "a > 1 OR a < 1.5 OR a = TRUE OR a BETWEEN 1 AND 2147483648",
        "a = b OR a > b OR a IN ('x') OR a CONTAINS 'x' OR a IS NULL",
        "NOT (a = 1) AND a ENDSWITH '1' AND a NOT STARTSWITH '-'",
    ):
        _exercise(text, props)
        for value in props.values():
            _exercise(text, {"a": value, "b": value})
