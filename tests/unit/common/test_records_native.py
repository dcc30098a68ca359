"""A whole PULL body decoded in one compiled call (``decode_records_v4``) against its pure
reference ``record._decode_records_py`` (issue 18, consume path).

The compiled twin builds each ``MessageExt`` by writing its slots (no ``__init__``) and reuses
a HostPort equal to the previous record's; the messages must still equal the pure ones in every
field, with the same types, and every odd body (IPv6 hosts, compressed bodies to inflate,
damage, truncation) must end in the pure outcome. Runs on both builds (``ARIANE_PURE=1``: the
pure side against itself and the public ``decode_records``).
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native, record
from ariane.common.message import HostPort, MessageExt
from ariane.common.record import decode_records, encode_record
from ariane.errors import CorruptionError

_HOST = HostPort(b"\x7f\x00\x00\x01", 10911)
_OTHER = HostPort(b"\x0a\x00\x00\x07", 40001)
_V6 = HostPort(b"\x00" * 15 + b"\x01", 10911)
_FIELDS = [f.name for f in dataclasses.fields(MessageExt)]


def _msg(i: int, *, born: HostPort = _HOST, compressed: bool = False, v2: bool = False) -> bytes:
    body = bytes([i % 251]) * (i * 13 % 300)
    if compressed:
        body = zlib.compress(body)
    props = {"TAGS": f"T{i % 3}", "UNIQ_KEY": f"{i:032X}"} if i % 4 else {}
    msg = MessageExt(
        topic=f"Topic{i % 2}é", body=body, flag=i - 5, properties=props, queue_id=i % 8,
        queue_offset=2**40 + i, sys_flag=1 if compressed else 0,
        born_timestamp_ms=1_700_000_000_000 + i, born_host=born,
        store_timestamp_ms=1_700_000_000_007 + i, store_host=_HOST if i % 5 else _OTHER,
        reconsume_times=i % 3, prepared_transaction_offset=i * 3, commit_log_offset=i * 1000,
    )  # fmt: skip
    return encode_record(msg, v2=v2)


def _fields(msgs: list[MessageExt]) -> list[list[tuple[type, object]]]:
    """Every field of every message with its exact type (equality alone would let an int
    subclass or a plain tuple for a HostPort through)."""
    return [[(type(getattr(m, n)), getattr(m, n)) for n in _FIELDS] for m in msgs]


def _outcome(decode: object, buf: bytes, decompress: bool) -> object:
    try:
        got = decode(buf, False, decompress)  # type: ignore[operator]
    except CorruptionError as exc:
        return ("corrupt", str(exc), exc.pos)
    return _fields(got)


def _public(buf: bytes, check_crc: bool, decompress: bool) -> list[MessageExt]:
    return decode_records(buf, check_crc=check_crc, decompress=decompress)


def test_plain_body_takes_the_compiled_call_and_matches_the_reference() -> None:
    buf = b"".join(_msg(i, v2=i % 7 == 0) for i in range(64))
    pure = record._decode_records_py(buf)
    assert len(pure) == 64
    assert [m.queue_offset for m in pure] == [2**40 + i for i in range(64)]
    if native.speedups is None:
        assert record._FAST_ALL is None
    else:
        fast = record._FAST_ALL(buf, 0)
        assert fast is not None  # the plain case must not fall back
        assert _fields(fast) == _fields(pure)
        assert all(type(m) is MessageExt for m in fast)
        # each message owns its properties dict (a listener may change one)
        fast[1].properties["x"] = "y"
        assert "x" not in fast[2].properties
    assert _fields(decode_records(buf)) == _fields(pure)
    assert decode_records(b"") == []


def test_odd_records_fall_back_to_the_reference() -> None:
    plain = b"".join(_msg(i) for i in range(1, 6))
    v6 = _msg(7, born=_V6)
    packed = _msg(9, compressed=True)
    for buf in (plain + v6 + plain, plain + packed, packed + plain):
        for inflate in (False, True):
            assert _outcome(_public, buf, inflate) == _outcome(
                record._decode_records_py, buf, inflate
            )
    if native.speedups is not None:
        assert record._FAST_ALL(plain + v6, 0) is None
        assert record._FAST_ALL(plain + packed, 1) is None  # inflating is the pure path's
        assert record._FAST_ALL(plain + packed, 0) is not None
    inflated = decode_records(plain + packed, decompress=True)[-1]
    assert inflated.body == bytes([9]) * (9 * 13 % 300)
    assert inflated.sys_flag == 0


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(1, 6),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 2200),
    inflate=st.booleans(),
)
def test_damaged_bodies_end_as_the_reference(
    count: int, flips: list[tuple[int, int]], cut: int, inflate: bool
) -> None:
    whole = b"".join(_msg(i, compressed=i == 3, v2=i == 2) for i in range(1, count + 1))
    damaged = bytearray(whole[:cut] if cut < len(whole) else whole)
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    buf = bytes(damaged)
    assert _outcome(_public, buf, inflate) == _outcome(record._decode_records_py, buf, inflate)


def test_a_crc_check_is_the_reference_one() -> None:
    rec = bytearray(_msg(5))
    struct.pack_into(">i", rec, 8, 12345)  # BODYCRC no longer matches the body
    with pytest.raises(CorruptionError, match="body CRC mismatch"):
        decode_records(bytes(rec), check_crc=True)
    assert decode_records(bytes(rec))[0].body_crc == 12345
