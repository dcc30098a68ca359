"""The bulk pulls' receive buffers: ``take_buffer`` reuses a spare body at any size."""

from __future__ import annotations

from ariane.spark._direct import take_buffer


def test_a_new_buffer_without_spares() -> None:
    spare: list[bytearray] = []
    buf = take_buffer(spare, 5)
    assert buf == bytearray(5)
    assert spare == []


def test_the_last_spare_is_taken_and_shrunk() -> None:
    first, last = bytearray(b"abcdefgh"), bytearray(b"ABCDEFGH")
    spare = [first, last]
    buf = take_buffer(spare, 3)
    assert buf is last
    assert buf == b"ABC"
    assert spare == [first]


def test_a_smaller_spare_grows_to_the_size() -> None:
    small = bytearray(b"xyz")
    spare = [small]
    buf = take_buffer(spare, 7)
    assert buf is small
    assert len(buf) == 7
    assert buf[:3] == b"xyz"
    assert spare == []


def test_a_spare_of_the_size_is_taken_as_it_is() -> None:
    same = bytearray(b"1234")
    buf = take_buffer([same], 4)
    assert buf is same
    assert buf == b"1234"
