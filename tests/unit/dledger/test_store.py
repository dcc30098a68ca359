"""The DLedger store: puts commit through a quorum, followers hold the same bytes at the same
offsets, only committed records reach the ConsumeQueues, truncation keeps copies, recovery,
batches, file rolls and refusals."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ariane.common.record import decode_record
from ariane.dledger.format import ENTRY_HEADER_SIZE, decode_header
from ariane.dledger.message_store import DLedgerMessageStore
from ariane.raft import Role
from ariane.store import GetStatus, MessageBatchInner, PutStatus
from ariane.store.commit_log import PreparedOne
from ariane.store.format import INDEX_ENTRY_SIZE
from ariane.store.inner import BatchItem
from tests.unit.dledger.group import HOST, Group, message


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    g = Group(str(tmp_path))
    yield g
    g.close()


def read_queue(group: Group, node: str, topic: str, queue_id: int = 0) -> list[bytes]:
    store = group.stores[node]
    out: list[bytes] = []
    offset = 0
    while True:
        got = store.get_message("g", topic, queue_id, offset, 32)
        if got.status is not GetStatus.FOUND:
            return out
        out.extend(decode_record(r)[0].body for r in got.messages)
        offset = got.next_begin_offset


def test_puts_commit_on_a_quorum_and_every_node_holds_the_same_log(group: Group) -> None:
    leader = group.elect("n0")
    futures = group.put(leader, [message("T", b"m%d" % i) for i in range(20)])
    results = [f.result(timeout=5) for f in futures]
    assert [r.status for r in results] == [PutStatus.PUT_OK] * 20
    assert [r.logics_offset for r in results] == list(range(20))
    group.dispatched()
    for node in group.ids:
        assert read_queue(group, node, "T") == [b"m%d" % i for i in range(20)]
    # the wrote offset is the body's offset inside the DLedger entry, and the record says so
    store = group.stores["n1"]
    for r in results:
        record = store.commit_log.get_message(r.wrote_offset, r.wrote_bytes)
        assert record is not None
        msg, _ = decode_record(record)
        assert msg.commit_log_offset == r.wrote_offset
        head = decode_header(
            store.commit_log.get_message(r.wrote_offset - ENTRY_HEADER_SIZE, 48) or b""
        )
        assert head.pos == r.wrote_offset - ENTRY_HEADER_SIZE
    data = {n: _data_bytes(group, n) for n in group.ids}
    assert data["n0"] == data["n1"] == data["n2"]


def _data_bytes(group: Group, node: str) -> bytes:
    cl = group.stores[node].commit_log
    return b"".join(mf.mm[: mf.wrote_position] for mf in cl.files.data.files)


def test_a_follower_refuses_puts(group: Group) -> None:
    group.elect("n0")
    result = group.stores["n1"].submit_message(message("T", b"x")).result(timeout=1)
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "slave mode" in (result.remark or "")
    # the log itself refuses as DLedger does
    result = group.stores["n1"].commit_log.submit_one(message("T", b"x")).result(timeout=1)
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "NOT_LEADER" in (result.remark or "")


def test_nothing_uncommitted_is_visible(group: Group) -> None:
    leader = group.elect("n0")
    group.cut = {"n1", "n2"}
    futures = group.put(leader, [message("T", b"lonely")])
    group.stores[leader].wait_dispatched(1.0)
    assert not futures[0].done()
    assert read_queue(group, leader, "T") == []
    group.cut = set()
    group.tick(50, times=4)  # the push is sent again after maxPushTimeOutMs
    assert futures[0].result(timeout=5).status is PutStatus.PUT_OK
    group.dispatched()
    assert read_queue(group, leader, "T") == [b"lonely"]


def test_a_minority_leader_acks_nothing_and_its_entries_are_cut(group: Group) -> None:
    leader = group.elect("n0")
    ok = group.put(leader, [message("T", b"committed")])
    assert ok[0].result(timeout=5).status is PutStatus.PUT_OK
    group.cut = {"n0"}
    lost = group.put(leader, [message("T", b"lost-%d" % i) for i in range(3)])
    new = group.elect("n1")
    assert new == "n1"
    later = group.put(new, [message("T", b"after")])
    assert later[0].result(timeout=5).status is PutStatus.PUT_OK
    group.tick(100, times=40)  # the old leader steps down
    assert all(f.done() for f in lost)
    assert {f.result().status for f in lost} <= {
        PutStatus.UNKNOWN_ERROR,
        PutStatus.OS_PAGECACHE_BUSY,
    }
    group.cut = set()
    group.tick(50, times=20)
    group.dispatched()
    for node in group.ids:
        assert read_queue(group, node, "T") == [b"committed", b"after"], node
    assert _data_bytes(group, "n0") == _data_bytes(group, "n1")
    cut = Path(group.root) / "n0" / "dledger-n0" / "cut"
    kept = b"".join(p.read_bytes() for p in cut.iterdir())
    assert b"lost-0" in kept
    assert b"lost-2" in kept


def test_batch_is_one_entry_per_message(group: Group) -> None:
    leader = group.elect("n0")
    items = [BatchItem(b"b%d" % i, 0, {"UNIQ_KEY": f"u{i}"}) for i in range(5)]
    batch = MessageBatchInner("B", 1, items, 0, 1, HOST, HOST, 0)
    future = group.stores[leader].submit_messages(batch)
    group.pump()
    group.tick()
    result = future.result(timeout=5)
    assert result.status is PutStatus.PUT_OK
    assert result.msg_num == 5
    assert len(result.offsets) == 5
    assert all(b - a > 48 for a, b in zip(result.offsets, result.offsets[1:], strict=False))
    group.dispatched()
    assert read_queue(group, "n2", "B", 1) == [b"b%d" % i for i in range(5)]


def test_files_roll_the_same_way_everywhere(group: Group) -> None:
    leader = group.elect("n0")
    body = b"z" * 3000
    futures = group.put(leader, [message("R", body + bytes([i])) for i in range(60)])
    assert all(f.result(timeout=5).stored for f in futures)
    group.dispatched()
    names = {
        n: [m.file_name for m in group.stores[n].commit_log.files.data.files] for n in group.ids
    }
    assert len(names["n0"]) >= 3
    assert names["n0"] == names["n1"] == names["n2"]
    assert len(read_queue(group, "n1", "R")) == 60


def test_wait_false_answers_once_appended(group: Group) -> None:
    leader = group.elect("n0")
    group.cut = {"n1", "n2"}
    msg = message("T", b"nowait")
    msg.properties["WAIT"] = "false"
    future = group.stores[leader].submit_message(msg)
    assert future.done()
    assert future.result().status is PutStatus.PUT_OK


def test_a_restarted_follower_recovers_and_catches_up(group: Group) -> None:
    leader = group.elect("n0")
    group.put(leader, [message("T", b"a%d" % i) for i in range(10)])
    group.crash("n2")
    more = group.put(leader, [message("T", b"b%d" % i) for i in range(10)])
    assert all(f.result(timeout=5).stored for f in more)
    group.start("n2")
    group.tick(50, times=10)
    group.dispatched()
    expected = [b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(10)]
    assert read_queue(group, "n2", "T") == expected
    assert group.role("n2") is Role.FOLLOWER


def test_recovery_cuts_a_torn_entry_and_keeps_its_bytes(group: Group) -> None:
    leader = group.elect("n0")
    futures = group.put(leader, [message("T", b"c%d" % i) for i in range(5)])
    last = futures[-1].result(timeout=5)
    cl = group.stores["n1"].commit_log
    mf = cl.files.data.find_mapped_file_by_offset(last.wrote_offset)
    assert mf is not None
    at = last.wrote_offset - mf.file_from_offset + 20
    mf.mm[at : at + 4] = b"\xff\xff\xff\xff"  # a torn write in the last entry's body
    group.crash("n1")
    store = group.start("n1")
    assert store.commit_log.files.end == cl.files.end - 1 or store.commit_log.files.end >= 0
    cut = Path(group.root) / "n1" / "dledger-n1" / "cut"
    assert any(p.stat().st_size > 0 for p in cut.iterdir())
    group.tick(100, times=15)  # the next COMMIT push shows the leader what n1 lacks
    group.dispatched()
    assert read_queue(group, "n1", "T") == [b"c%d" % i for i in range(5)]


def test_identity_of_offsets_after_a_leader_change(group: Group) -> None:
    leader = group.elect("n0")
    first = group.put(leader, [message("Q", b"x%d" % i) for i in range(3)])
    group.cut = {"n0"}
    new = group.elect("n2")
    second = group.put(new, [message("Q", b"y%d" % i) for i in range(3)])
    offsets = [f.result(timeout=5).logics_offset for f in first + second]
    assert offsets == [0, 1, 2, 3, 4, 5]
    assert os.path.isdir(group.root)


def test_prepared_puts_go_through_the_quorum(group: Group) -> None:
    """The timer wheel's prepared copies (``submit_prepared``) are proposed one entry each,
    committed on a quorum, in order, like any put."""
    leader = group.elect("n0")
    store = group.stores[leader]
    ones = []
    for i in range(5):
        one = store.prepare_message(message("T", b"p%d" % i))
        assert isinstance(one, PreparedOne)
        ones.append(one)
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(store.submit_prepared, ones)
        for _ in range(1000):
            if job.done():
                break
            group.pump()
            group.tick()
        results, durable = job.result(timeout=10)
    assert [r.status for r in results] == [PutStatus.PUT_OK] * 5
    assert durable.result(timeout=5).status is PutStatus.PUT_OK
    group.dispatched()
    for node in group.ids:
        assert read_queue(group, node, "T") == [b"p%d" % i for i in range(5)]


def test_index_keys_of_the_checkpoints_millisecond_survive_a_power_cut(group: Group) -> None:
    # the index checkpoint promises the keys of records stored before it (T); keys of
    # records stored at T can lose their entry page with the power while the file's header
    # (end time T, end offset past them) is kept, so the file is kept and re-dispatch starts
    # after them: recovery must put them back. A batch's records share one store time.
    leader = group.elect("n0")
    singles = group.put(leader, [message("T", b"r%d" % i, keys=f"key{i}") for i in range(4)])
    assert all(f.result(timeout=5).stored for f in singles)
    items = [BatchItem(b"r%d" % i, 0, {"UNIQ_KEY": f"u{i}", "KEYS": f"key{i}"}) for i in (4, 5)]
    batch = group.stores[leader].submit_messages(
        MessageBatchInner("T", 0, items, 0, 1, HOST, HOST, 0)
    )
    group.pump()
    group.tick()
    assert batch.result(timeout=5).status is PutStatus.PUT_OK
    group.dispatched()
    store = group.stores["n1"]
    index, checkpoint = store.index, store.checkpoint
    assert index is not None
    assert checkpoint is not None

    def bodies(s: DLedgerMessageStore, key: str) -> list[bytes]:
        return [decode_record(r)[0].body for r in s.query_message("T", key, 8, 0, 2**62).messages]

    checkpoint.index_msg_timestamp = index.flush()  # T: the batch's store time
    checkpoint.flush()
    f = index.files[-1]
    at = f.entries_at + (f.index_count - 3) * INDEX_ENTRY_SIZE  # r4's KEYS (then u5, key5)
    f.mf.mm[at : at + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
    assert bodies(store, "key4") == []  # lost with the power
    group.crash("n1")
    again = group.start("n1")
    for i in range(6):  # put back; the others are still found once
        assert bodies(again, f"key{i}") == [b"r%d" % i]
