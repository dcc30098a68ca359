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


def test_a_sends_property_names_are_shared_objects_in_the_compiled_decoder() -> None:
    """The names every send carries come out of the compiled decoder as one interned object
    each (hashed once); any other name is a str of its own; the dict is equal either way."""
    from ariane.common import native
    from ariane.common.properties import decode_properties_py

    known = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "CLUSTER", "MSG_REGION", "TRACE_ON"]
    others = ["UNIQ", "UNIQ_KEYS", "tags", "KEYS\u00e9", "WAIT\u00ff", "XY"]
    text = "".join(f"{name}\x01v{i}\x02" for i, name in enumerate(known + others))
    wide = text + "\u0101\x01w\x02"  # a 2-byte-kind text: names are new str objects
    for source in (text, wide):
        first, second = decode_properties(source), decode_properties(source)
        assert first == second == decode_properties_py(source)
        assert list(first) == list(decode_properties_py(source))
        if getattr(native.speedups, "RAW_SEND_SLOTS", None) is None:
            continue  # the pure build, or an extension built before the shared names
        for a, b in zip(first, second, strict=True):
            assert (a is b) == (a in known and source is text), a
