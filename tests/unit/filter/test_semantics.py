import pytest

from ariane.errors import FilterEvaluationError
from ariane.filter.sql92 import compile
from tests.unit.filter.semantics_table import ERR, ROWS


@pytest.mark.parametrize(("expression", "properties", "expected"), ROWS)
def test_semantics(expression: str, properties: dict[str, str], expected: object) -> None:
    f = compile(expression)
    if expected == ERR:
        with pytest.raises(FilterEvaluationError):
            f.evaluate_strict(properties)
        assert f.evaluate(properties) is None
    else:
        assert f.evaluate_strict(properties) is expected
        assert f.evaluate(properties) is expected
    assert f.matches(properties) is (expected is True)


def test_evaluation_error_names_the_expression_and_value() -> None:
    with pytest.raises(FilterEvaluationError) as info:
        compile("price > 10").evaluate_strict({"price": "cheap"})
    assert "price > 10" in str(info.value)
    assert "cheap" in str(info.value)


def test_properties_may_be_any_mapping() -> None:
    from types import MappingProxyType

    f = compile("a = 'x' AND b > 1")
    assert f.matches(MappingProxyType({"a": "x", "b": "2"}))


def test_compiled_filter_is_reusable_across_messages() -> None:
    f = compile("orderStatus IS NOT NULL AND orderStatus > 0 AND sellerId = '21'")
    messages = [
        ({"orderStatus": "1", "sellerId": "21"}, True),
        ({"orderStatus": "0", "sellerId": "21"}, False),
        ({"sellerId": "21"}, False),
        ({"orderStatus": "x", "sellerId": "21"}, False),
        ({"orderStatus": "1", "sellerId": "21", "TAGS": "a"}, True),
    ]
    for _ in range(3):
        assert [f.matches(p) for p, _ in messages] == [m for _, m in messages]
