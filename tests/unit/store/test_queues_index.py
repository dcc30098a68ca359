from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.clock import ManualClock
from ariane.common.hashing import index_key_hash
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.format import (
    CQ_BLANK_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT,
    DispatchRequest,
)
from ariane.store.index_file import IndexFile, IndexService
from ariane.store.index_repair import newest_before, relink_if_torn
from ariane.store.mapped_file import MappedFile
from ariane.store.results import PutStatus

from .helpers import msg, open_store


def test_consume_queue_put_is_idempotent_and_pads(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, str(tmp_path), 10 * 20)
    # a queue whose first entry is offset 25 (older files deleted): padded with blanks
    assert cq.put(1000, 50, 7, 25)
    assert cq.min_offset_in_queue == 25
    assert cq.max_offset_in_queue == 26
    first = cq.queue.files[0]
    assert first.file_from_offset == 400
    assert first.mm[0:20] == CQ_BLANK_ENTRY
    assert not cq.put(1000, 50, 7, 25)  # duplicate by physical offset
    assert not cq.put(900, 50, 7, 26)  # older physical offset
    for i in range(26, 40):
        assert cq.put(2000 + i * 100, 50, i, i)
    assert cq.max_offset_in_queue == 40
    assert cq.get_entry(30) == (2000 + 3000, 50, 30)
    assert cq.get_entries(19, 5) is None
    cq.truncate_dirty_logic_files(2000 + 35 * 100)
    assert cq.max_offset_in_queue == 35
    assert cq.max_physic_offset == 2000 + 34 * 100
    cq.truncate_dirty_logic_files(1500)
    assert cq.max_offset_in_queue == 26
    cq.shutdown()
    again = ConsumeQueue("T", 0, str(tmp_path), 10 * 20)
    again.load()
    again.recover()
    again.correct_min_offset(0)
    assert again.max_offset_in_queue == 26
    assert again.max_physic_offset == 1000
    assert again.min_offset_in_queue == 25
    again.shutdown()


def test_index_file_chain_header_and_rolling(tmp_path: Path) -> None:
    f = IndexFile(str(tmp_path / "20240101000000000"), 4, 6, create=True)
    assert f.index_count == 1  # entry 0 is reserved
    for i in range(5):
        assert f.put_key(f"T#k{i % 2}", 100 + i, 1_000_000 + i * 1000)
    assert not f.put_key("T#x", 200, 2_000_000)  # full: 1 + 5 entries
    assert f.is_write_full
    assert f.select_phy_offsets("T#k0", 10, 0, 2**62) == [104, 102, 100]
    assert f.select_phy_offsets("T#k0", 2, 0, 2**62) == [104, 102]
    assert f.select_phy_offsets("T#k1", 10, 1_002_500, 2**62) == [103]
    f.flush()
    header = INDEX_HEADER.unpack_from(f.mf.mm, 0)
    assert header == (1_000_000, 1_004_000, 100, 104, header[4], 6)
    f.mf.close()
    assert IndexService(str(tmp_path), 4, 3, ManualClock()).load(True, 0) == 0  # wrong size
    assert not (tmp_path / "20240101000000000").exists()
    svc = IndexService(str(tmp_path / "idx"), 4, 3, ManualClock())
    assert svc.load(True, 0) is None
    svc.ensure_file()
    svc.build_index(
        [("T", 0, 10 * i, 10, 0, 5000 + i, i, f"a{i} b", f"U{i}", 0, None) for i in range(4)]
    )
    assert len(svc.files) >= 4  # 2 usable entries per file
    offs, last_ts, last_phy = svc.query_offsets("T", "b", 10, 0, 2**62)
    assert offs == [30, 20, 10, 0]
    assert (last_ts, last_phy) == (5003, 30)
    assert svc.query_offsets("T", "U2", 10, 0, 2**62)[0] == [20]
    assert svc.delete_expired_files(25) >= 1
    assert svc.query_offsets("T", "b", 10, 0, 2**62)[0][:2] == [30, 20]
    svc.shutdown()


def test_entries_past_a_stale_header_are_found_and_kept(tmp_path: Path) -> None:
    # the header is written after each dispatch batch: a crash in the middle of a batch (or
    # when a full file rolls) leaves entries and slots past the header's index_count
    path = str(tmp_path / "20240101000000000")
    f = IndexFile(path, 4, 10, create=True)
    for i in range(3):
        assert f.put_key(f"T#k{i}", 100 + i, 1_000_000 + i * 1000)
    f.write_header()
    for i in range(3, 6):
        assert f.put_key(f"T#k{i}", 100 + i, 1_000_000 + i * 1000)
    assert INDEX_HEADER.unpack_from(f.mf.mm, 0)[5] == 4  # stale: 3 entries + entry 0
    f.mf.close()
    g = IndexFile(path, 4, 10, create=False)
    assert (g.index_count, g.end_phy_offset, g.end_timestamp) == (7, 105, 1_005_000)
    for i in range(6):
        assert g.select_phy_offsets(f"T#k{i}", 4, 0, 2**62) == [100 + i]
    assert g.put_key("T#k6", 106, 1_006_000)  # appended after them, overwriting nothing
    for i in range(7):
        assert g.select_phy_offsets(f"T#k{i}", 4, 0, 2**62) == [100 + i]
    g.mf.close()


def test_index_flush_claims_only_what_it_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the checkpoint time is read before any file is forced, and a file is marked clean
    # before its force: a key put during the force (the dispatch thread does not wait for
    # the flush thread) leaves it dirty for the next flush
    svc = IndexService(str(tmp_path), 4, 20, ManualClock())
    assert svc.load(True, 0) is None
    svc.ensure_file()

    def req(i: int, ts: int) -> DispatchRequest:
        return DispatchRequest("T", 0, 10 * i, 10, 0, ts, i, f"k{i}", None, 0, None)

    svc.build_index([req(0, 5000), req(1, 5001)])
    f = svc.files[-1]
    forced = MappedFile.sync
    puts = [req(2, 5002)]

    def force_then_put(mf: MappedFile) -> None:
        forced(mf)
        if puts:
            svc.build_index([puts.pop()])

    monkeypatch.setattr(MappedFile, "sync", force_then_put)
    assert svc.flush() == 5001
    assert f.dirty
    assert svc.flush() == 5002
    assert not f.dirty
    svc.shutdown()


def test_recheck_puts_back_only_the_keys_no_file_holds(tmp_path: Path) -> None:
    svc = IndexService(str(tmp_path), 4, 20, ManualClock())
    assert svc.load(True, 0) is None
    svc.ensure_file()
    reqs = [
        DispatchRequest("T", 0, 10 * i, 10, 0, 5000 + i // 2, i, f"k{i} s", f"U{i}", 0, None)
        for i in range(4)
    ]
    svc.build_index(reqs[:2])
    f = svc.files[-1]
    assert newest_before(svc, lambda phys: phys < 10) == 0
    assert newest_before(svc, lambda phys: phys < 0) is None
    assert svc.recheck_keys(reqs[:2]) == 0
    assert svc.recheck_keys(reqs) == 6  # records 2 and 3 lost their 3 keys each
    assert (f.end_phy_offset, f.end_timestamp) == (30, 5001)
    # an older record's lost key goes back without moving the end (build_index skips below)
    assert svc.recheck_keys([reqs[1]._replace(keys="k1 s extra")]) == 1
    assert (f.end_phy_offset, f.end_timestamp) == (30, 5001)
    assert svc.query_offsets("T", "extra", 8, 0, 2**62)[0] == [10]
    for i in range(4):
        assert svc.query_offsets("T", f"k{i}", 8, 0, 2**62)[0] == [10 * i]
        assert svc.query_offsets("T", f"U{i}", 8, 0, 2**62)[0] == [10 * i]
    assert sorted(svc.query_offsets("T", "s", 8, 0, 2**62)[0]) == [0, 10, 20, 30]
    svc.shutdown()


def test_a_file_torn_by_a_power_cut_is_relinked(tmp_path: Path) -> None:
    # 2 slots: every chain holds several keys. Entries put after the index checkpoint live
    # on pages the power may keep or lose apart from the slots and the header
    base = 1_000_000_000
    f = IndexFile(str(tmp_path / "20240101000000000"), 2, 40, create=True)
    for i in range(12):
        assert f.put_key(f"T#k{i}", 100 + i, base + i * 400)  # 5 seconds
    mark = base + 8 * 400  # k8 and later may be lost; k0-k7 were forced
    assert not relink_if_torn(f, mark)  # intact: left alone

    def found() -> list[int]:
        return [i for i in range(12) if f.select_phy_offsets(f"T#k{i}", 4, 0, 2**62)]

    at = f.entries_at + 10 * INDEX_ENTRY_SIZE  # k9 (entry 10) lost, the slot pointing at it kept
    f.mf.mm[at : at + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
    assert len(found()) < 11  # the chain through k9 is cut
    assert relink_if_torn(f, mark)
    assert found() == [i for i in range(12) if i != 9]
    assert not relink_if_torn(f, mark)
    # a slot page older than the entries (k11 kept, its slot still pointing at an older one)
    slot_at = INDEX_HEADER_SIZE + (index_key_hash("T#k11") % 2) * 4
    INDEX_SLOT.pack_into(f.mf.mm, slot_at, 1)
    assert 11 not in found()
    assert relink_if_torn(f, mark)
    assert found() == [i for i in range(12) if i != 9]
    f.mf.close()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "Aa", "BB", "k"]), st.integers(0, 100)), max_size=40
    )
)
def test_index_round_trip(tmp_path_factory: object, entries: list[tuple[str, int]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(f"{d}/20240101000000000", 7, 64, create=True)
        for phys, (key, ts) in enumerate(entries):
            assert f.put_key(key, phys, 1_000_000 + ts * 1000, "T#")
        for key in {"a", "b", "Aa", "BB", "k"}:
            want = [p for p, (k, _) in enumerate(entries) if k == key][::-1]
            got = f.select_phy_offsets(f"T#{key}", 100, 0, 2**62)
            # hashes collide ("Aa"/"BB"): the index may return more, never less
            assert [p for p in got if entries[p][0] == key] == want
        f.mf.destroy()


@given(st.lists(st.integers(0, 2**62), min_size=5, max_size=5))
def test_checkpoint_round_trip(values: list[int]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        cp = StoreCheckpoint(f"{d}/checkpoint")
        (
            cp.physic_msg_timestamp,
            cp.logics_msg_timestamp,
            cp.index_msg_timestamp,
            cp.master_flushed_offset,
            cp.confirm_phy_offset,
        ) = values
        cp.flush()
        again = StoreCheckpoint(f"{d}/checkpoint")
        assert [
            again.physic_msg_timestamp,
            again.logics_msg_timestamp,
            again.index_msg_timestamp,
            again.master_flushed_offset,
            again.confirm_phy_offset,
        ] == values
        assert again.min_timestamp == max(0, min(values[0], values[1]) - 3000)


def test_dispatch_failure_blocks_writes_until_it_recovers(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        real = store.dispatcher.dispatch
        calls = {"n": 0}

        def broken(batch: list[object]) -> None:
            calls["n"] += 1
            raise OSError("no space for a ConsumeQueue file")

        store.dispatcher.dispatch = broken  # type: ignore[method-assign,assignment]
        assert store.put_message(msg()).ok
        import time

        deadline = time.monotonic() + 5
        while store.is_writeable and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = store.put_message(msg())
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "dispatch" in (refused.remark or "")
        store.dispatcher.dispatch = real  # type: ignore[method-assign]
        store.reput.wakeup()
        assert store.wait_dispatched()
        deadline = time.monotonic() + 5
        while not store.is_writeable and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.put_message(msg()).ok
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 2
