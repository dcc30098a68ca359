from hypothesis import given
from hypothesis import strategies as st

from ariane.common.hashing import (
    index_key_hash,
    index_key_hash_with_prefix,
    java_string_hash,
    tags_code,
)


def reference_hash(s: str) -> int:
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def test_known_java_values() -> None:
    # Values computed by java.lang.String#hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("*") == 42
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919


def test_index_key_hash_maps_min_int_to_zero() -> None:
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("hello") == 99162322
    assert index_key_hash("TopicTest#k") == abs(java_string_hash("TopicTest#k"))


def test_non_bmp_counts_two_code_units() -> None:
    assert java_string_hash("\U0001f600") == reference_hash("\U0001f600")
    assert java_string_hash("é") == 233


@given(st.text(max_size=300))
def test_matches_reference(s: str) -> None:
    assert java_string_hash(s) == reference_hash(s)


def test_long_strings_beyond_power_table() -> None:
    s = "x" * 5000 + "é"
    assert java_string_hash(s) == reference_hash(s)


def test_index_key_hash_with_prefix_is_the_hash_of_the_joined_key() -> None:
    for prefix, key in [
        ("TopicTest#", "k"),
        ("T#", "é\U0001f600"),
        ("RMQ_SYS_TRACE_TOPIC#", "x" * 300),
    ]:
        assert index_key_hash_with_prefix(prefix, key) == index_key_hash(prefix + key)
    # a joined key whose Java hash is Integer.MIN_VALUE maps to 0, as IndexFile does
    assert index_key_hash_with_prefix("polygene", "lubricants") == 0
