import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ariane.common.hashing import java_string_hash
from ariane.errors import FilterSyntaxError, InvalidArgumentError
from ariane.filter.expression import (
    ExpressionType,
    build_subscription,
    parse_tag_expression,
)
from ariane.filter.javatypes import java_trim


def test_subscribe_all() -> None:
    for expr in (None, "", "*"):
        assert parse_tag_expression(expr) is None


def test_split_trim_and_drop_empties() -> None:
    assert parse_tag_expression("TagA || TagB") == (
        frozenset({"TagA", "TagB"}),
        frozenset({java_string_hash("TagA"), java_string_hash("TagB")}),
    )
    assert parse_tag_expression(" TagA ||  || TagB ||") == parse_tag_expression("TagA||TagB")
    assert parse_tag_expression("TagA") == (frozenset({"TagA"}), frozenset({2598919}))


def test_single_pipe_is_part_of_the_tag() -> None:
    assert parse_tag_expression("TagA | TagB") == (
        frozenset({"TagA | TagB"}),
        frozenset({java_string_hash("TagA | TagB")}),
    )
    assert parse_tag_expression("|||") == (frozenset({"|"}), frozenset({java_string_hash("|")}))


def test_java_trim_not_unicode_strip() -> None:
    tags, _ = parse_tag_expression("\x00a\x1f|| \u00a0b ") or (frozenset(), frozenset())
    assert tags == {"a", "\u00a0b"}


def test_blank_tags_give_empty_sets_and_separators_alone_fail() -> None:
    assert parse_tag_expression(" || ") == (frozenset(), frozenset())
    assert parse_tag_expression(" * ") == (frozenset({"*"}), frozenset({42}))
    for expr in ("||", "||||"):
        with pytest.raises(InvalidArgumentError, match="split error"):
            parse_tag_expression(expr)


tag = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=0x21), min_size=1
).filter(lambda t: "||" not in t and not t.startswith("|") and not t.endswith("|"))


@given(st.lists(tag, min_size=1, max_size=6), st.sampled_from(["||", " || ", "||  ", "\t||"]))
def test_round_trip(tags: list[str], sep: str) -> None:
    expression = sep.join(tags)
    assume(expression != "*")  # exactly "*" subscribes to all (SubscriptionData.SUB_ALL)
    parsed = parse_tag_expression(expression)
    assert parsed is not None
    assert parsed[0] == {java_trim(t) for t in tags}
    assert parsed[1] == {java_string_hash(t) for t in parsed[0]}


def test_expression_type() -> None:
    assert ExpressionType.parse(None) is ExpressionType.TAG
    assert ExpressionType.parse("") is ExpressionType.TAG
    assert ExpressionType.parse("TAG") is ExpressionType.TAG
    assert ExpressionType.parse("SQL92") is ExpressionType.SQL92
    assert ExpressionType.SQL92 == "SQL92"
    for bad in ("sql92", "tag", "CLASS"):
        with pytest.raises(InvalidArgumentError):
            ExpressionType.parse(bad)


def test_build_tag_subscription() -> None:
    s = build_subscription("T", "TagA || TagB")
    assert s.topic == "T"
    assert s.sub_string == "TagA || TagB"
    assert s.tags_set == {"TagA", "TagB"}
    assert s.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert s.expression_type is ExpressionType.TAG
    assert s.sql_filter is None
    assert not s.subscribes_all
    assert s.matches_tags_code(java_string_hash("TagA"))
    assert s.matches_tags_code(java_string_hash("TagA") + (1 << 32))  # Long.intValue()
    assert not s.matches_tags_code(java_string_hash("TagC"))
    assert not s.matches_tags_code(0)  # a message without a tag
    assert s.matches_tags_code(None)
    assert s.matches_tag("TagB")
    assert not s.matches_tag("TagC")
    assert not s.matches_tag(None)
    assert s.matches_properties({})


def test_build_subscribe_all() -> None:
    for expr, kind in ((None, None), ("", "TAG"), ("*", ""), ("*", ExpressionType.TAG)):
        s = build_subscription("T", expr, kind)
        assert s.sub_string == "*"
        assert s.subscribes_all
        assert not s.tags_set
        assert s.matches_tags_code(12345)
        assert s.matches_tag("anything")
        assert s.matches_tag(None)


def test_build_sql92_subscription() -> None:
    s = build_subscription("T", "a > 5 AND TAGS = 'x'", "SQL92")
    assert s.expression_type is ExpressionType.SQL92
    assert s.sql_filter is not None
    assert s.sql_filter.property_names == {"a", "TAGS"}
    assert not s.tags_set
    assert not s.code_set
    assert not s.subscribes_all
    assert s.matches_tags_code(999)  # the ConsumeQueue stage can't tell for SQL92
    assert s.matches_properties({"a": "6", "TAGS": "x"})
    assert not s.matches_properties({"a": "6"})
    assert not s.matches_properties({"a": "six", "TAGS": "x"})
    assert s.matches_tag("whatever")


def test_build_rejects() -> None:
    with pytest.raises(InvalidArgumentError):
        build_subscription("T", "", ExpressionType.SQL92)
    with pytest.raises(InvalidArgumentError):
        build_subscription("T", None, "SQL92")
    with pytest.raises(FilterSyntaxError):
        build_subscription("T", "a >", "SQL92")
    with pytest.raises(InvalidArgumentError):
        build_subscription("T", "a", "JS")
    with pytest.raises(InvalidArgumentError):
        build_subscription("T", "||")


def test_subscription_is_frozen() -> None:
    s = build_subscription("T", "a")
    with pytest.raises(AttributeError):
        s.topic = "U"  # type: ignore[misc]
