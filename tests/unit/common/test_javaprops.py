"""Java Properties text and config objects built from it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common.javaprops import (
    PROPERTY,
    config_from_properties,
    config_to_properties,
    format_properties,
    parse_properties,
)
from ariane.errors import ConfigError


def test_parse_java_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! another\n"
        "a=1\n"
        "b : 2\n"
        "c   3\n"
        "   indented=yes\n"
        "long=first \\\n"
        "     second\n"
        "k\\ ey=v\\u0041\\t\n"
        "empty=\n"
        "onlykey\n"
        "url=http://h:80/x=y\n"
        "a=override\n"
    )
    assert parse_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "indented": "yes",
        "long": "first second",
        "k ey": "vA\t",
        "empty": "",
        "onlykey": "",
        "url": "http://h:80/x=y",
    }


_keys = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
_values = st.text(st.characters(codec="utf-8"), max_size=12)


@given(st.dictionaries(_keys, _values, max_size=6))
def test_format_then_parse_round_trips(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props)) == props


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    port: int = field(default=1, metadata={PROPERTY: "listenPort"})
    ratio: float = field(default=0.5, metadata={PROPERTY: "ratio"})
    on: bool = field(default=False, metadata={PROPERTY: "enableThing"})
    name: str = field(default="x", metadata={PROPERTY: "name"})
    internal: int = 0

    def __post_init__(self) -> None:
        if self.port < 0:
            raise ConfigError("listenPort", "must be >= 0")


def test_config_from_properties() -> None:
    config, unknown = config_from_properties(
        Sample,
        {
            "listenPort": " 9876 ",
            "enableThing": "TRUE",
            "ratio": "0.75",
            "name": " n ",
            "bogus": "1",
            "old": "2",
        },
        ignored=frozenset({"old"}),
    )
    assert config == Sample(port=9876, ratio=0.75, on=True, name=" n ")
    assert unknown == ["bogus"]
    assert config_to_properties(config) == {
        "listenPort": "9876",
        "ratio": "0.75",
        "enableThing": "true",
        "name": " n ",
    }
    updated, _ = config_from_properties(Sample, {"name": "y"}, config)
    assert updated == Sample(port=9876, ratio=0.75, on=True, name="y")


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listenPort": "x"}, "listenPort"),
        ({"listenPort": "-1"}, "listenPort"),
        ({"enableThing": "yes"}, "enableThing"),
        ({"ratio": "half"}, "ratio"),
    ],
)
def test_bad_values_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_properties(Sample, props)
    assert info.value.key == key
