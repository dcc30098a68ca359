"""The records' BODYCRC code in C (``crc32`` of ``_speedups``: carry-less multiplication on
x86-64 CPUs that have it, the slice-by-8 table elsewhere and for the tail) against its
reference, ``zlib.crc32``: every length up to past the 64-byte fold and the 16-byte steps,
any bytes, unaligned buffers, and the CRC the single and batch puts write. Skipped in the pure
build (the puts then use ``zlib.crc32`` itself)."""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native

fast = native.speedups
pytestmark = pytest.mark.skipif(fast is None or not hasattr(fast, "crc32"), reason="pure build")


def test_every_length_up_to_1100_bytes() -> None:
    rng = random.Random(18)
    for n in range(1101):
        for data in (rng.randbytes(n), b"\xff" * n, bytes(n)):
            assert fast.crc32(data) == zlib.crc32(data), n


def test_unaligned_views_of_one_buffer() -> None:
    data = random.Random(7).randbytes(4200)
    view = memoryview(data)
    for start in range(17):
        for n in (63, 64, 65, 79, 80, 127, 128, 129, 1024, 4096):
            part = view[start : start + n]
            assert fast.crc32(part) == zlib.crc32(part), (start, n)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_any_bytes(data: bytes) -> None:
    assert fast.crc32(data) == zlib.crc32(data)
    assert fast.crc32(bytearray(data)) == zlib.crc32(data)


def test_refuses_what_is_not_a_buffer() -> None:
    with pytest.raises(TypeError):
        fast.crc32("text")
