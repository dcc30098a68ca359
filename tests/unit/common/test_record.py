import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.message import HostPort, MessageExt
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.record import (
    body_crc,
    decode_record,
    decode_records,
    encode_record,
    record_length,
)
from ariane.common.sysflag import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOSTADDRESS_V6_FLAG
from ariane.errors import CorruptionError

hosts = st.builds(
    HostPort,
    st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16)),
    st.integers(0, 65535),
)
names = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FFF, exclude_characters="\x01\x02"),
    min_size=1,
    max_size=20,
)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
messages = st.builds(
    MessageExt,
    topic=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=200),
    body=st.binary(max_size=300),
    flag=int32,
    properties=st.dictionaries(names, names, max_size=5),
    queue_id=int32,
    queue_offset=st.integers(0, 2**62),
    sys_flag=st.integers(0, 0x7FF).map(lambda f: f & ~0x30),
    born_timestamp_ms=int64,
    born_host=hosts,
    store_timestamp_ms=int64,
    store_host=hosts,
    reconsume_times=int32,
    prepared_transaction_offset=int64,
    commit_log_offset=st.integers(0, 2**62),
)


@given(messages)
def test_round_trip(m: MessageExt) -> None:
    data = encode_record(m)
    out, end = decode_record(data, check_crc=True)
    assert end == len(data) == out.store_size
    v6 = (BORNHOST_V6_FLAG if m.born_host.is_ipv6 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if m.store_host.is_ipv6 else 0
    )
    assert out.sys_flag == m.sys_flag | v6
    out.sys_flag = m.sys_flag
    out.store_size = m.store_size
    out.body_crc = m.body_crc
    assert out == m
    topic_len = len(m.topic.encode())
    assert len(data) == record_length(
        len(m.body), topic_len, len(data) - 91 - len(m.body) - topic_len
        - (1 if topic_len > 127 else 0) - (12 if m.born_host.is_ipv6 else 0)
        - (12 if m.store_host.is_ipv6 else 0),
        v2=topic_len > 127, born_v6=m.born_host.is_ipv6, store_v6=m.store_host.is_ipv6,
    )  # fmt: skip


@given(st.lists(messages, max_size=4))
def test_concatenation_round_trip(ms: list[MessageExt]) -> None:
    data = b"".join(encode_record(m) for m in ms)
    out = decode_records(data, check_crc=True)
    assert [(o.topic, o.body, o.properties) for o in out] == [
        (m.topic, m.body, m.properties) for m in ms
    ]


@settings(max_examples=300)
@given(st.binary(max_size=400), st.integers(0, 10))
def test_random_bytes_raise_only_corruption(data: bytes, pos: int) -> None:
    try:
        decode_records(data[pos:], check_crc=True, decompress=True)
    except CorruptionError:
        pass


@given(messages, st.integers(0, 2000), st.binary(min_size=1, max_size=4))
def test_mutated_records_raise_only_corruption(m: MessageExt, at: int, junk: bytes) -> None:
    data = bytearray(encode_record(m))
    at %= len(data)
    data[at : at + len(junk)] = junk
    try:
        decode_record(bytes(data), check_crc=True, decompress=True)
    except CorruptionError:
        pass


def test_known_layout_and_ids() -> None:
    m = MessageExt(
        topic="TopicTest",
        body=b"Hello",
        properties={"TAGS": "TagA"},
        queue_id=3,
        queue_offset=7,
        store_host=HostPort(bytes([10, 0, 0, 5]), 10911),
        commit_log_offset=123456,
    )
    data = encode_record(m)
    assert len(data) == 91 + 5 + 9 + len("TAGS\x01TagA\x02")
    assert data[4:8] == bytes.fromhex("DAA320A7")
    assert (
        int.from_bytes(data[8:12], "big") == zlib.crc32(b"Hello") & 0x7FFFFFFF == body_crc(b"Hello")
    )
    assert m.offset_msg_id == "0A00000500002A9F000000000001E240"
    assert decode_offset_msg_id(m.offset_msg_id).phys_offset == 123456
    long_topic = MessageExt(topic="t" * 130, body=b"")
    assert encode_record(long_topic)[4:8] == bytes.fromhex("DAA320AB")


def test_crc_mismatch_and_decompression() -> None:
    body = zlib.compress(b"x" * 5000)
    m = MessageExt(topic="T", body=body, sys_flag=COMPRESSED_FLAG)
    data = bytearray(encode_record(m))
    out, _ = decode_record(bytes(data), decompress=True)
    assert out.body == b"x" * 5000
    assert out.sys_flag & COMPRESSED_FLAG == 0
    data[100] ^= 0xFF
    with pytest.raises(CorruptionError, match="CRC"):
        decode_record(bytes(data), check_crc=True)


def test_blank_record_is_not_a_message() -> None:
    with pytest.raises(CorruptionError, match="magic"):
        decode_record(bytes.fromhex("00000040CBD43194") + bytes(56))


def test_a_zlib_bomb_is_refused_not_inflated() -> None:
    import zlib

    from ariane.common.record import MAX_INFLATED_BODY_BYTES, _inflate
    from ariane.errors import CorruptionError

    bomb = zlib.compress(b"\0" * (MAX_INFLATED_BODY_BYTES + 1024), 9)
    with pytest.raises(CorruptionError, match="inflates past"):
        _inflate(bomb, 0)
    with pytest.raises(CorruptionError, match="truncated"):
        _inflate(zlib.compress(b"abc" * 1000)[:-5], 0)
    assert _inflate(zlib.compress(b"abc" * 1000), 0) == b"abc" * 1000
