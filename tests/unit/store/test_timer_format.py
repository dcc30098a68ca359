"""The timer's files byte by byte (RocketMQ 5's layouts) and the wheel/log primitives."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import CorruptionError
from ariane.store.timer.files import TimerCheckpointFile, TimerLog, TimerWheel
from ariane.store.timer.format import (
    BLANK_MAGIC,
    UNIT_SIZE,
    WHEEL_FILE_SIZE,
    Checkpoint,
    Slot,
    Unit,
    is_filler,
    java_string_hash,
    slot_time,
)


def test_unit_bytes_match_the_worked_example() -> None:
    unit = Unit(-1, 1, 1_700_000_000_000, 30_000, 123_456, 250, java_string_hash("TopicTest"))
    expected = bytes.fromhex(
        "00000034" "ffffffffffffffff" "00000001" "0000018bcfe56800" "00007530"
        "000000000001e240" "000000fa" "8e987641" "0000000000000000"
    )  # fmt: skip
    assert unit.pack() == expected
    assert len(expected) == UNIT_SIZE
    assert Unit.unpack(expected) == unit
    assert unit.slot_time_ms == 1_700_000_030_000
    with pytest.raises(CorruptionError):
        Unit.unpack(b"\0" * UNIT_SIZE)
    with pytest.raises(CorruptionError):
        Unit.unpack(expected[:-1])
    bad_magic = expected[:12] + (0x11).to_bytes(4, "big") + expected[16:]
    with pytest.raises(CorruptionError):
        Unit.unpack(bad_magic)


@settings(max_examples=200)
@given(
    st.integers(-1, 2**62), st.integers(1, 7).map(lambda m: m | 1), st.integers(0, 2**62),
    st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**62), st.integers(0, 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
)  # fmt: skip
def test_unit_round_trips(
    prev: int, magic: int, enq: int, delta: int, phys: int, size: int, h: int
) -> None:
    unit = Unit(prev, magic, enq, delta, phys, size, h)
    data = unit.pack()
    assert Unit.unpack(b"junk" + data + b"tail", 4) == unit


def test_java_string_hash() -> None:
    assert java_string_hash("TopicTest") == -1_902_610_879
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("é€") == (233 * 31 + 8364)


def test_slot_rounding() -> None:
    assert slot_time(10_500, 1000) == 10_000
    assert slot_time(11_000, 1000) == 10_000
    assert slot_time(11_001, 1000) == 11_000
    assert slot_time(1_700_000_030_500, 1000) == 1_700_000_030_000
    assert slot_time(250, 100) == 200


def test_checkpoint_forms() -> None:
    cp = Checkpoint(1, 2, 3, 4, 5, 6, 7)
    data = cp.pack()
    assert len(data) == 56
    assert data[:8] == (1).to_bytes(8, "big")
    assert Checkpoint.unpack(data) == cp
    assert Checkpoint.unpack(data[:32]) == Checkpoint(1, 2, 3, 4)
    with pytest.raises(CorruptionError):
        Checkpoint.unpack(data[:31])


def test_wheel_file_layout(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    wheel = TimerWheel(str(path), 1000)
    assert path.stat().st_size == WHEEL_FILE_SIZE == 38_707_200
    t = 1_700_000_030_000
    assert wheel.get_slot(t) == Slot.empty()
    wheel.put_slot(t, 100, 152, 2, 0)
    wheel.flush()
    raw = path.read_bytes()[16_384_960 : 16_384_960 + 32]
    assert raw == Slot(t, 100, 152, 2, 0).pack(1000)
    assert raw[:8] == (1_700_000_030).to_bytes(8, "big")
    # the same index one wheel turn later is another time: empty for it
    assert wheel.get_slot(t + 1_209_600 * 1000) == Slot.empty()
    assert wheel.get_slot(t + 999) == Slot(t, 100, 152, 2, 0)
    wheel.revise(t, 300)
    assert wheel.get_slot(t).last_pos == 300
    wheel.revise(t + 5000, 400)
    assert wheel.get_slot(t + 5000) == Slot(t + 5000, 400, 400, 0, 0)
    assert wheel.units_behind(t, t + 10_000) == 2
    wheel.close()
    (tmp_path / "bad").write_bytes(b"x" * 100)
    with pytest.raises(CorruptionError):
        TimerWheel(str(tmp_path / "bad"), 1000)


def test_timer_log_fills_file_ends_and_recovers(tmp_path: Path) -> None:
    size = 52 * 10 + 30  # room for 10 units, then 30 bytes: a filler
    log = TimerLog(str(tmp_path / "timerlog"), size)
    log.load()
    positions = [log.append(Unit(-1, 1, 0, i, i, 1)) for i in range(12)]
    assert positions[:10] == [52 * i for i in range(10)]
    assert positions[10:] == [size, size + 52]  # the 11th went to the next file
    first = log.queue.files[0]
    assert is_filler(first.mm, 520)
    assert int.from_bytes(first.mm[520:524], "big") == 30
    assert int.from_bytes(first.mm[532:536], "big") == BLANK_MAGIC
    assert log.read(positions[11]) == Unit(-1, 1, 0, 11, 11, 1)
    log.flush()
    # a torn unit at the end: recovery cuts there
    second = log.queue.files[1]
    second.mm[104:112] = b"\x00\x00\x00\x34\xff\xff\xff\xff"
    second.wrote_position = 112
    log.shutdown()
    again = TimerLog(str(tmp_path / "timerlog"), size)
    again.load()
    found: list[tuple[int, Unit]] = []
    end = again.recover(0, found)
    assert [p for p, _ in found] == positions
    assert end == size + 104
    assert again.append(Unit(-1, 1, 0, 99, 99, 1)) == size + 104
    again.shutdown()


def test_checkpoint_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    f = TimerCheckpointFile(str(path))
    assert f.read() == Checkpoint()
    f.write(Checkpoint(5, 6, 7, 8, 0, 9, 1))
    f.flush()
    f.close()
    assert path.stat().st_size == 4096
    assert TimerCheckpointFile(str(path)).read() == Checkpoint(5, 6, 7, 8, 0, 9, 1)
