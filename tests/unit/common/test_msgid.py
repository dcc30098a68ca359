import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common.msgid import (
    UniqueIdGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    host_to_bytes,
)
from ariane.errors import InvalidArgumentError


def test_offset_msg_id_example_from_spec() -> None:
    msg_id = create_offset_msg_id(host_to_bytes("10.0.0.5"), 10911, 123456)
    assert msg_id == "0A00000500002A9F000000000001E240"
    decoded = decode_offset_msg_id(msg_id)
    assert (decoded.host, decoded.port, decoded.phys_offset) == ("10.0.0.5", 10911, 123456)


def test_ipv6_offset_msg_id_is_56_chars() -> None:
    msg_id = create_offset_msg_id(host_to_bytes("::1"), 10911, 7)
    assert len(msg_id) == 56
    assert decode_offset_msg_id(msg_id).host == "::1"


@pytest.mark.parametrize("bad", ["", "zz", "0A000005", "0A00000500002A9F000000000001E24", "x" * 32])
def test_bad_offset_msg_ids(bad: str) -> None:
    with pytest.raises(InvalidArgumentError):
        decode_offset_msg_id(bad)


@given(st.binary(min_size=4, max_size=4), st.integers(0, 65535), st.integers(0, 2**63 - 1))
def test_offset_msg_id_round_trip(ip: bytes, port: int, off: int) -> None:
    decoded = decode_offset_msg_id(create_offset_msg_id(ip, port, off))
    assert (host_to_bytes(decoded.host), decoded.port, decoded.phys_offset) == (ip, port, off)


def test_unique_ids_are_32_hex_and_distinct() -> None:
    gen = UniqueIdGenerator(bytes([127, 0, 0, 1]))
    ids = [gen.next_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert ids[0].startswith("7F000001")


def test_ids_taken_at_once_are_the_ids_taken_one_by_one_in_that_millisecond() -> None:
    gen = UniqueIdGenerator(bytes([127, 0, 0, 1]))
    first = gen.next_id()
    block = gen.next_ids(70_000)  # past the 16-bit sequence's wrap
    after = gen.next_id()
    assert len(block) == 70_000
    assert all(len(i) == 32 and i.startswith(first[:20]) for i in block)
    seqs = [int(i[-4:], 16) for i in [first, *block, after]]
    assert seqs == [n & 0xFFFF for n in range(70_002)]
    assert len({i[:-4] for i in block}) == 1  # one clock read for the block
    assert gen.next_ids(0) == []


def test_ids_follow_the_clock_millisecond_by_millisecond_and_across_months(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ariane.common import msgid

    gen = UniqueIdGenerator(bytes([127, 0, 0, 1]))
    now = [1_700_000_000.1234]
    monkeypatch.setattr(msgid.time, "time", lambda: now[0])

    def expected(seq: int) -> str:
        ms = int(now[0] * 1000)
        start = msgid._month_start_ms(ms)
        return f"{gen._prefix}{(ms - start) & 0xFFFFFFFF:08X}{seq & 0xFFFF:04X}"

    steps = [0.0, 0.0002, 0.001, 0.001, -0.005, 40 * 86_400.0, 0.0, 0.003]
    for seq, step in enumerate(steps):
        now[0] += step
        assert gen.next_id() == expected(seq)
