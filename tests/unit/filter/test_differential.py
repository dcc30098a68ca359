"""Random trees, printed as SQL, must compile and evaluate as the reference interpreter says."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import FilterEvaluationError, FilterSyntaxError
from ariane.filter.sql92 import compile
from tests.unit.filter.reference import Tree, outcome, show

NAMES = ["a", "b", "c"]
STRINGS = ["", "x", "1", "-2", "1.5", "true", "it's", "NaN", "ab", " 3"]
VALUES = [*STRINGS, "0", "10", "-0.0", "2147483648", "1e3", "0x1p1", "1d", "TRUE", "\u0663"]

props_st = st.dictionaries(
    st.sampled_from(NAMES),  # often without some of the names: missing properties are null
    st.one_of(st.sampled_from(VALUES), st.text(alphabet="0123456789.-+eE xtruNa", max_size=6)),
)
prop = st.sampled_from(NAMES).map(lambda n: ("prop", n))
string = st.sampled_from(STRINGS).map(lambda s: ("str", s))
integer = st.one_of(
    st.integers(0, 20), st.sampled_from([2**31 - 1, 2**31, 3 * 10**9, 2**63 - 1, 2**63])
).map(lambda n: ("int", n))
floating = st.one_of(
    st.sampled_from([0.5, 1.5, 2.0, 10.0, 1e-5, 0.0]),
    st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False),
).map(lambda x: ("float", x))
boolean = st.booleans().map(lambda b: ("bool", b))
null = st.just(("null",))
search = st.sampled_from(["", "x", "1", "a'b", "é"])


def _extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    return st.one_of(
        st.tuples(st.sampled_from(["paren", "pos", "neg", "not", "isnull", "isnotnull"]), children),
        st.tuples(
            st.sampled_from(["and", "or", "eq", "ne", "gt", "ge", "lt", "le"]), children, children
        ),
        st.tuples(st.just("between"), children, children, children, st.booleans()),
        st.tuples(
            st.just("in"),
            st.one_of(prop, children),
            st.lists(st.sampled_from(STRINGS), min_size=1, max_size=3).map(tuple),
            st.booleans(),
        ),
        st.tuples(
            st.sampled_from(["contains", "startswith", "endswith"]), children, search, st.booleans()
        ),
    )


any_tree = st.recursive(
    st.one_of(prop, string, integer, floating, boolean, null), _extend, max_leaves=10
)

number = st.one_of(integer, floating, prop)
value_operand = st.one_of(prop, integer, floating, number.map(lambda t: ("neg", t)))
any_operand = st.one_of(prop, value_operand, string, boolean)
literal = st.one_of(string, integer, floating, boolean)
simple_condition = st.tuples(st.sampled_from(["eq", "ne"]), prop, literal)
atom = st.one_of(
    simple_condition,  # the shapes real subscriptions use most, and the evaluator's fast paths
    st.tuples(
        st.sampled_from(["gt", "ge", "lt", "le"]),
        prop,
        st.one_of(integer, floating, integer.map(lambda t: ("neg", t))),
    ),
    st.tuples(st.sampled_from(["isnull", "isnotnull"]), prop),
    st.tuples(st.sampled_from(["gt", "ge", "lt", "le"]), value_operand, value_operand),
    st.tuples(st.sampled_from(["eq", "ne"]), any_operand, any_operand),
    st.tuples(st.sampled_from(["isnull", "isnotnull"]), any_operand),
    st.tuples(st.just("between"), value_operand, value_operand, value_operand, st.booleans()),
    st.tuples(
        st.just("in"),
        prop,
        st.lists(st.sampled_from(STRINGS), min_size=1, max_size=3).map(tuple),
        st.booleans(),
    ),
    st.tuples(
        st.sampled_from(["contains", "startswith", "endswith"]),
        st.one_of(prop, string, prop.map(lambda t: ("neg", t)), simple_condition),
        search,
        st.booleans(),
    ),
    prop,
    boolean,
)
condition = st.recursive(
    atom,
    lambda c: st.one_of(
        st.tuples(st.sampled_from(["and", "or"]), c, c),
        st.tuples(st.just("not"), c),
        st.tuples(st.just("paren"), c),
    ),
    max_leaves=8,
)
spacing = st.sampled_from([" ", "  ", "\n", "\t", " /* c */ ", " -- c\n", "\r\n"])
letter_case = st.sampled_from([str.upper, str.lower, str.title])


def _ours(text: str, props: dict[str, str]) -> object:
    try:
        f = compile(text)
    except FilterSyntaxError:
        return "invalid"
    assert f.ignored_text == ""
    try:
        return f.evaluate_strict(props)
    except FilterEvaluationError:
        return "error"


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


@settings(max_examples=400)
@given(any_tree, props_st, spacing, letter_case)
def test_any_tree_matches_reference(tree: Tree, props: dict[str, str], sp: str, kw: Any) -> None:
    text = show(tree, kw, sp)
    expected = outcome(tree, props)
    assert _same(_ours(text, props), expected), (text, props, expected)


@settings(max_examples=1000)
@given(condition, props_st, spacing, letter_case)
def test_typed_condition_matches_reference(
    tree: Tree, props: dict[str, str], sp: str, kw: Any
) -> None:
    text = show(tree, kw, sp)
    expected = outcome(tree, props)
    got = _ours(text, props)
    assert _same(got, expected), (text, props, expected, got)
    if expected not in ("invalid", "error"):
        assert compile(text).matches(props) is (expected is True)
