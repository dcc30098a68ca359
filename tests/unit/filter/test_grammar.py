import pytest

from ariane.errors import FilterSyntaxError, InvalidArgumentError
from ariane.filter.lexer import Lexer, TokenKind
from ariane.filter.parser import MAX_DEPTH
from ariane.filter.sql92 import MAX_EXPRESSION_LENGTH, compile
from tests.unit.filter.grammar_table import DEVIATIONS, INVALID, VALID


@pytest.mark.parametrize(("expression", "ignored"), VALID)
def test_valid(expression: str, ignored: str) -> None:
    f = compile(expression)
    assert f.expression == expression
    assert f.ignored_text == ignored


@pytest.mark.parametrize(("expression", "position", "fragment"), INVALID)
def test_invalid_reports_position(expression: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        compile(expression)
    assert info.value.position == position
    assert fragment in str(info.value)
    assert str(info.value).endswith(f"at position {position}")


@pytest.mark.parametrize("expression", DEVIATIONS)
def test_zero_float_literals_are_accepted(expression: str) -> None:
    assert compile(expression).evaluate({"a": "0.5"}) is not None


def test_syntax_error_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        compile("a >")


def test_not_a_string() -> None:
    with pytest.raises(FilterSyntaxError):
        compile(b"a = 1")  # type: ignore[arg-type]


def test_keywords_are_case_insensitive_identifiers_are_not() -> None:
    f = compile("Tags IS nOt NuLl AnD tags = 'x'")
    assert f.property_names == {"Tags", "tags"}
    assert f.evaluate({"Tags": "1", "tags": "x"}) is True
    assert f.evaluate({"TAGS": "1", "tags": "x"}) is False


def test_keywords_cannot_be_property_names() -> None:
    for word in ("in", "is", "not", "null", "true", "contains", "between"):
        with pytest.raises(FilterSyntaxError):
            compile(f"{word} = 'x'")
    assert compile("notx = 'x' AND isy = 'y' AND nullable = 'z'").property_names == {
        "notx",
        "isy",
        "nullable",
    }


def test_property_names() -> None:
    f = compile("a > 1 AND (b IN ('x') OR NOT c CONTAINS 'y') AND -d < e AND f BETWEEN g AND 3")
    assert f.property_names == frozenset("abcdefg")
    assert compile("TRUE").property_names == frozenset()


def test_length_limit() -> None:
    body = "a = '" + "x" * (MAX_EXPRESSION_LENGTH - 6) + "'"
    assert len(body) == MAX_EXPRESSION_LENGTH - 0
    compile(body)
    with pytest.raises(FilterSyntaxError) as info:
        compile(body + " ")
    assert info.value.position == MAX_EXPRESSION_LENGTH
    assert "characters long" in str(info.value)


def test_nesting_limits() -> None:
    compile("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH)
    with pytest.raises(FilterSyntaxError) as info:
        compile("(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1))
    assert info.value.position == MAX_DEPTH
    compile("NOT " * (MAX_DEPTH - 2) + "a")  # NOT a is two levels: NOT, BooleanCast(a)
    with pytest.raises(FilterSyntaxError) as info:
        compile("NOT " * (MAX_DEPTH + 1) + "a")
    assert "nested deeper" in str(info.value)
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        compile("a" + " = a" * (MAX_DEPTH + 1))
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        compile("- " * (MAX_DEPTH + 1) + "1 > a")


def test_hostile_expressions_fail_cleanly() -> None:
    n = MAX_EXPRESSION_LENGTH // 4
    for text in ("(" * n, "NOT " * n, "-" * n + "1", "a = " * n, "a" + " IS NULL" * n):
        with pytest.raises(FilterSyntaxError):
            compile(text[:MAX_EXPRESSION_LENGTH])


def test_long_flat_chains_compile() -> None:
    f = compile(" OR ".join(f"a = '{i}'" for i in range(4000)))
    assert f.matches({"a": "3999"})
    assert not f.matches({"a": "4000"})
    g = compile(" AND ".join(f"a <> '{i}'" for i in range(4000)))
    assert g.matches({"a": "x"})


def test_compile_is_cached() -> None:
    assert compile("a = 'cached'") is compile("a = 'cached'")


def _kinds(text: str) -> list[TokenKind]:
    lexer = Lexer(text)
    out = []
    while (tok := lexer.next_token()).kind is not TokenKind.EOF:
        out.append(tok.kind)
    return out


def test_lexer_longest_match() -> None:
    k = TokenKind
    assert _kinds("<><=>=<>=") == [k.NE, k.LE, k.GE, k.NE, k.EQ]
    assert _kinds("5 5. .5 5.5 5e5 5E+5 5.e-5 5L 0L 00") == [
        k.DECIMAL,
        k.FLOAT,
        k.FLOAT,
        k.FLOAT,
        k.FLOAT,
        k.FLOAT,
        k.FLOAT,
        k.DECIMAL,
        k.DECIMAL,
        k.ID,
        k.DECIMAL,
        k.DECIMAL,
    ]
    assert _kinds("NOTE NOT note $a _1 a$1") == [k.ID, k.NOT, k.ID, k.ID, k.ID, k.ID]
    assert _kinds("--x\n-- y\r\n--") == [k.MINUS, k.MINUS]
    assert _kinds("/* a ** b */ /**/ /***/ x") == [k.ID]
    assert _kinds("'a''b' 'c'") == [k.STRING, k.STRING]
