"""Replicated appends (a slave's CommitLog): byte identity, dispatch, refusals, cut points."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.record import decode_record
from ariane.store.message_store import MessageStore
from ariane.store.replica import ReplicaStatus, scan_replica_bytes
from ariane.store.results import GetStatus, PutStatus
from ariane.store.tools.verify import verify

from .helpers import msg, open_store

FILE = 64 * 1024


def log_bytes(store: MessageStore, start: int = 0) -> bytes:
    """The whole CommitLog from ``start`` as one string (BLANK fillers included)."""
    out = []
    pos = start
    end = store.max_phy_offset
    while pos < end:
        chunk = store.get_commit_log_data(pos)
        assert chunk
        out.append(chunk)
        pos += len(chunk)
    return b"".join(out)


def fill_master(store: MessageStore, n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    bodies = []
    for i in range(n):
        b = bytes([i % 251]) * rng.randrange(1, 3000)
        res = store.put_message(
            msg(topic=f"T{i % 3}", queue_id=i % 2, body=b, KEYS=f"k{i}", TAGS=f"t{i % 4}")
        )
        assert res.status is PutStatus.PUT_OK
        bodies.append(b)
    return bodies


def read_queue(store: MessageStore, topic: str, queue_id: int) -> list[bytes]:
    out: list[bytes] = []
    offset = store.get_min_offset_in_queue(topic, queue_id)
    while True:
        res = store.get_message("g", topic, queue_id, offset, 32)
        if res.status is not GetStatus.FOUND:
            return out
        out.extend(decode_record(m, check_crc=True)[0].body for m in res.messages)
        offset = res.next_begin_offset


def replicate(master: MessageStore, slave: MessageStore, cuts: list[int]) -> None:
    """Copy the master's log to the slave in chunks of the given sizes (cycled)."""
    data = log_bytes(master, slave.max_phy_offset)
    pos = 0
    i = 0
    while pos < len(data):
        offset = slave.replica_writer.received_offset
        size = cuts[i % len(cuts)]
        # like the master's frames: never across a file boundary
        size = min(size, FILE - offset % FILE, len(data) - pos)
        res = slave.append_replica(offset, data[pos : pos + size])
        assert res.ok, res
        pos += size
        i += 1


def test_slave_log_is_byte_identical_and_readable(tmp_path: Path) -> None:
    with (
        open_store(tmp_path / "m") as master,
        open_store(tmp_path / "s") as slave,
    ):
        bodies = fill_master(master, 200)
        assert master.max_phy_offset > 2 * FILE  # rolled
        slave.set_replica_mode(True)
        replicate(master, slave, [1, 7, 1000, 4096, 32 * 1024])
        assert slave.max_phy_offset == master.max_phy_offset
        assert log_bytes(slave) == log_bytes(master)
        assert slave.wait_dispatched()
        for topic in ("T0", "T1", "T2"):
            for qid in (0, 1):
                expect = [
                    b for i, b in enumerate(bodies) if i % 3 == int(topic[1]) and i % 2 == qid
                ]
                assert read_queue(slave, topic, qid) == expect
        hits = slave.query_message("T1", "k4", 5, 0, 2**62).messages
        assert [decode_record(m)[0].body for m in hits] == [bodies[4]]
        # the master's ConsumeQueue is built by its reput thread too: wait for it as for
        # the slave's (a loaded machine can leave it behind the test's thread)
        assert master.wait_dispatched()
        assert slave.get_max_offset_in_queue("T0", 0) == master.get_max_offset_in_queue("T0", 0)
        assert master.get_max_offset_in_queue("T0", 0) == len(range(0, 200, 6))
    # the slave's files are a valid store on their own
    assert verify(str(tmp_path / "s"))[0] == []


def test_slave_refuses_puts_and_can_take_over(tmp_path: Path) -> None:
    with open_store(tmp_path / "m") as master, open_store(tmp_path / "s") as slave:
        fill_master(master, 30)
        slave.set_replica_mode(True)
        refused = slave.put_message(msg(body=b"x"))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "slave" in (refused.remark or "")
        data = log_bytes(master)
        # everything but the last 10 bytes: the last record stays incomplete
        assert slave.append_replica(0, data[:-10]).ok
        slave.set_replica_mode(False)
        assert slave.max_phy_offset < master.max_phy_offset
        res = slave.put_message(msg(topic="T2", queue_id=1, body=b"after"))
        assert res.status is PutStatus.PUT_OK
        # the new record takes the place (and queue offset) of the cut one
        assert master.wait_dispatched()
        last = master.get_max_offset_in_queue("T2", 1) - 1
        assert res.logics_offset == last
        assert slave.wait_dispatched()
        assert read_queue(slave, "T2", 1)[-1] == b"after"


def test_refusals_write_nothing(tmp_path: Path) -> None:
    with open_store(tmp_path / "m") as master, open_store(tmp_path / "s") as slave:
        fill_master(master, 5)
        data = log_bytes(master)
        first = struct.unpack_from(">i", data)[0]
        assert slave.append_replica(0, data).status is ReplicaStatus.UNAVAILABLE
        slave.set_replica_mode(True)
        mid = slave.append_replica(100, data)
        assert mid.status is ReplicaStatus.OFFSET_MISMATCH
        assert "file boundary" in (mid.reason or "")
        # the first record and the head of the second: only the first reaches the file
        res = slave.append_replica(0, data[: first + 50])
        assert res.ok
        assert res.records == 1
        assert slave.max_phy_offset == first
        assert slave.replica_writer.received_offset == first + 50
        assert slave.append_replica(first, data[first:]).status is ReplicaStatus.OFFSET_MISMATCH
        bad = bytearray(data)
        bad[first + 89] ^= 0xFF  # inside the body of the second record: CRC mismatch
        res = slave.append_replica(first + 50, bytes(bad[first + 50 :]))
        assert res.status is ReplicaStatus.CORRUPT
        assert "CRC" in (res.reason or "")
        assert slave.max_phy_offset == first
        # a new connection resends the incomplete record
        slave.replica_writer.reset()
        assert slave.replica_writer.received_offset == first
        assert slave.append_replica(first, data[first:]).ok
        assert log_bytes(slave) == data
        junk = slave.append_replica(len(data), b"\x01\x02\x03\x04\x05\x06\x07\x08\x09")
        assert junk.status is ReplicaStatus.CORRUPT
        assert "magic" in (junk.reason or "")


def test_record_claiming_another_offset_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "m") as master, open_store(tmp_path / "s") as slave:
        fill_master(master, 3)
        data = log_bytes(master)
        slave.set_replica_mode(True)
        first = struct.unpack_from(">i", data)[0]
        assert slave.append_replica(0, data[:first]).ok
        # the second record shifted by 8 bytes: its PHYSICALOFFSET no longer matches
        shifted = bytearray(data[first:])
        shifted[28:36] = struct.pack(">q", first + 8)
        res = slave.append_replica(first, bytes(shifted))
        assert res.status is ReplicaStatus.CORRUPT
        assert "says it is at" in (res.reason or "")


def test_confirm_compares_history(tmp_path: Path) -> None:
    with open_store(tmp_path / "m") as master, open_store(tmp_path / "s") as slave:
        fill_master(master, 40)
        data = log_bytes(master)
        slave.set_replica_mode(True)
        replicate(master, slave, [5000])
        assert slave.confirm_replica(100, data[100:4196])
        assert not slave.confirm_replica(100, data[101:4197])
        assert not slave.confirm_replica(len(data) - 10, data[-10:] + b"x")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=3))
def test_scan_never_raises_on_garbage(junk: bytes, start_kb: int) -> None:
    scan = scan_replica_bytes(junk, start_kb * 1024, FILE, ())
    assert 0 <= scan.consumed <= len(junk)
    assert scan.requests == [] or scan.error is None or scan.consumed > 0


def test_scan_stops_at_an_incomplete_record() -> None:
    head = struct.pack(">ii", 200, -626843481)
    scan = scan_replica_bytes(head + b"\x01" * 50, 0, FILE, ())
    assert scan.error is None
    assert scan.consumed == 0
    assert scan_replica_bytes(head[:5], 0, FILE, ()).error is None


@pytest.mark.parametrize("cut", [1, 91, 4000])
def test_restart_of_a_slave_with_an_incomplete_record(tmp_path: Path, cut: int) -> None:
    """A slave stopped with half a record received has only whole records on disk."""
    with open_store(tmp_path / "m") as master:
        fill_master(master, 10)
        data = log_bytes(master)
    with open_store(tmp_path / "s") as slave:
        slave.set_replica_mode(True)
        assert slave.append_replica(0, data[:-cut]).ok
        end = slave.max_phy_offset
        assert end < len(data)
    with open_store(tmp_path / "s") as slave:
        assert slave.last_exit_ok
        assert slave.max_phy_offset == end
        assert log_bytes(slave) == data[:end]
        slave.set_replica_mode(True)
        assert slave.append_replica(end, data[end:]).ok
        assert log_bytes(slave) == data
