from hypothesis import given
from hypothesis import strategies as st

from ariane.common.properties import decode_properties, encode_properties


def test_encode_layout() -> None:
    assert encode_properties({"KEYS": "k1 k2", "TAGS": "A"}) == "KEYS\x01k1 k2\x02TAGS\x01A\x02"
    assert encode_properties({}) == ""


def test_decode_drops_malformed_segments() -> None:
    text = "A\x011\x02\x01x\x02y\x01\x02noseparator\x02B\x012\x02"
    assert decode_properties(text) == {"A": "1", "B": "2"}
    assert decode_properties("") == {}
    assert decode_properties("K\x01v") == {"K": "v"}


_names = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
)


@given(st.dictionaries(_names, _names))
def test_round_trip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props


@given(st.text())
def test_decode_never_raises(text: str) -> None:
    decode_properties(text)
