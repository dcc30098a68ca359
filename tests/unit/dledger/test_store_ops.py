"""Operating a DLedger store: ``ariane store dump/verify`` on it, deletion of expired files
(and the log's new beginning), the checkpoint, and the upgrade from a master/slave store whose
old messages stay readable by key and offset."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ariane.cli import main
from ariane.common.record import decode_record
from ariane.dledger.files import DLedgerFiles
from ariane.dledger.format import encode_entry
from ariane.errors import CorruptionError
from ariane.store import GetStatus, MessageStore, PutStatus
from tests.unit.dledger.group import Group, message, store_config


def test_dump_and_verify_a_dledger_store(tmp_path: Path) -> None:
    group = Group(str(tmp_path))
    try:
        leader = group.elect("n0")
        futures = group.put(leader, [message("D", b"d%03d" % i + b"." * 2000) for i in range(40)])
        assert all(f.result(timeout=5).stored for f in futures)
        group.dispatched()
    finally:
        group.close()
    root = tmp_path / "n1"
    runner = CliRunner()
    out = runner.invoke(main, ["store", "dump", str(root)])
    assert out.exit_code == 0, out.output
    assert "40 record(s)" in out.output
    assert "entry=0/" in out.output
    assert "BLANK" in out.output  # the data files rolled
    first = futures[0].result()
    assert out.output.splitlines()[0].split()[0] == str(first.wrote_offset)
    ok = runner.invoke(main, ["store", "verify", str(root)])
    assert ok.exit_code == 0, ok.output
    assert "40 record(s)" in ok.output
    data = sorted((root / "dledger-n1" / "data").glob("0*"))[0]
    raw = bytearray(data.read_bytes())
    raw[300] ^= 0x55
    data.write_bytes(bytes(raw))
    bad = runner.invoke(main, ["store", "verify", str(root)])
    assert bad.exit_code == 1
    assert "CRC" in bad.output


def test_expired_data_files_are_deleted_and_the_log_begins_later(tmp_path: Path) -> None:
    group = Group(str(tmp_path), file_reserved_time_hours=1)
    try:
        leader = group.elect("n0")
        for batch in range(3):
            futures = group.put(
                leader, [message("E", b"e%d-%02d" % (batch, i) + b"." * 3000) for i in range(20)]
            )
            assert all(f.result(timeout=5).stored for f in futures)
        group.dispatched()
        store = group.stores["n1"]
        cl = store.commit_log
        files_before = [mf.file_from_offset for mf in cl.files.data.files]
        assert len(files_before) >= 3
        old = time.time() - 3 * 3600
        for mf in cl.files.data.files[:2]:
            os.utime(mf.path, (old, old))
        deleted = cl.delete_expired_files(int(time.time() * 1000), 3_600_000, False, 10)
        assert deleted == 2
        begin = cl.files.begin
        assert begin.pos == files_before[2]
        node = cl.replica.node
        assert node is not None
        assert node.log.begin == begin.index
        assert cl.min_offset == files_before[2]
        got = store.get_message("g", "E", 0, 0, 5)
        assert got.status in (
            GetStatus.OFFSET_FOUND_NULL,
            GetStatus.OFFSET_TOO_SMALL,
            GetStatus.FOUND,
        )
        # it restarts from the new beginning
        group.crash("n1")
        again = group.start("n1")
        assert again.commit_log.files.begin == begin
        group.tick(100, times=5)
    finally:
        group.close()


def test_a_follower_behind_the_leaders_beginning_is_wiped_and_refilled(tmp_path: Path) -> None:
    group = Group(str(tmp_path))
    try:
        leader = group.elect("n0")
        group.crash("n2")
        for batch in range(3):
            futures = group.put(
                leader, [message("W", b"w%d-%02d" % (batch, i) + b"." * 3000) for i in range(20)]
            )
            assert all(f.result(timeout=5).stored for f in futures)
        cl = group.stores[leader].commit_log
        assert cl.delete_expired_files(int(time.time() * 1000), 0, True, 2) == 2
        begin = cl.files.begin
        group.start("n2")
        group.tick(100, times=20)
        group.dispatched()
        follower = group.stores["n2"].commit_log
        assert follower.files.begin.index == begin.index
        assert follower.files.begin.pos == begin.pos
        assert follower.files.end == cl.files.end
        last = cl.files.entry(cl.files.end)
        assert follower.files.entry(cl.files.end) == last
    finally:
        group.close()


def test_checkpoint_is_written_at_shutdown(tmp_path: Path) -> None:
    group = Group(str(tmp_path))
    try:
        leader = group.elect("n0")
        futures = group.put(leader, [message("C", b"c")])
        futures[0].result(timeout=5)
        group.tick(100, times=15)
    finally:
        group.close()
    text = (tmp_path / "n1" / "dledger-n1" / "checkpoint").read_text()
    assert "committedIndex=" in text
    assert "endIndex=" in text


def test_upgrade_from_a_master_slave_store(tmp_path: Path) -> None:
    # a plain broker's store: messages with keys, one file part-filled
    plain_root = tmp_path / "n0"
    old = MessageStore(store_config(str(plain_root)))
    assert old.load()
    old.start()
    old_offsets = []
    for i in range(30):
        r = old.put_message(message("U", b"old-%02d" % i + b"." * 1500, keys=f"key{i}"))
        assert r.status is PutStatus.PUT_OK
        old_offsets.append(r.wrote_offset)
    old.shutdown()
    old_files = sorted((plain_root / "commitlog").glob("0*"))
    end_of_old = int(old_files[-1].name) + 64 * 1024
    # the same directory (and two copies of it) become a DLedger group
    import shutil

    for other in ("n1", "n2"):
        shutil.copytree(plain_root, tmp_path / other)
    group = Group(str(tmp_path))
    try:
        leader = group.elect("n0")
        cl = group.stores[leader].commit_log
        assert cl.divided_offset == end_of_old
        futures = group.put(leader, [message("U", b"new-%d" % i, keys=f"new{i}") for i in range(3)])
        results = [f.result(timeout=5) for f in futures]
        assert all(r.stored for r in results)
        assert results[0].wrote_offset == end_of_old + 48 or results[0].wrote_offset > end_of_old
        assert [r.logics_offset for r in results] == [30, 31, 32]
        group.dispatched()
        for node in group.ids:
            store = group.stores[node]
            found = store.query_message("U", "key7", 10, 0, 2**62)
            assert [decode_record(m)[0].body[:6] for m in found.messages] == [b"old-07"]
            assert store.query_message("U", "new1", 10, 0, 2**62).messages
            record = store.commit_log.get_message(old_offsets[3], 200)
            assert record is not None
            assert b"old-03" in record
            # a consumer's pull reads across the division: the old records, then the new
            # ones (32 per pull at most, RocketMQ's maxTransferCountOnMessageInMemory)
            first = store.get_message("g", "U", 0, 0, 32)
            rest = store.get_message("g", "U", 0, first.next_begin_offset, 32)
            bodies = [decode_record(m)[0].body[:6] for m in first.messages + rest.messages]
            expected = [b"old-%02d" % i for i in range(30)] + [b"new-0", b"new-1", b"new-2"]
            # (a follower learns that the last new entries are committed with the next push)
            assert bodies == expected[: len(bodies)]
            assert len(bodies) == 33 if node == leader else len(bodies) >= 30
            offsets = first.message_queue_offsets + rest.message_queue_offsets
            assert offsets == list(range(len(bodies)))
        # the last old file was sealed with a BLANK record
        tail = old_files[-1].read_bytes()
        assert b"\xcb\xd4\x31\x94" in tail
    finally:
        group.close()
    files = DLedgerFiles(str(tmp_path / "n1" / "dledger-n1"), 64 * 1024, 32 * 64)
    files.load()
    assert files.begin.pos == end_of_old
    files.shutdown()


def test_follower_refuses_a_damaged_entry(tmp_path: Path) -> None:
    """Where a corrupt copy is caught: the entry's body CRC (over the whole CommitLog record)
    is checked before anything is written; the record's own decoding comes after, for
    dispatch."""
    files = DLedgerFiles(str(tmp_path / "dledger-n1"), 64 * 1024, 32 * 64)
    files.load()
    try:
        entry = encode_entry(0, 1, 0, b"a CommitLog record would be here")
        damaged = bytearray(entry)
        damaged[-1] ^= 0x01
        with pytest.raises(CorruptionError, match="entry 0 from the leader does not check"):
            files.append_copy(bytes(damaged))
        assert files.end == -1
        head, pos = files.append_copy(entry)
        assert (head.index, head.term, pos, files.end) == (0, 1, 0, 0)
        assert files.entries(0, 0) == [entry]
    finally:
        files.shutdown()
