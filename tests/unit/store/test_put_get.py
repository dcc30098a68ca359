from pathlib import Path

from ariane.common.clock import ManualClock
from ariane.common.hashing import java_string_hash
from ariane.common.message import HostPort
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.record import decode_record, encode_record
from ariane.common.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from ariane.store.filter import TagFilter
from ariane.store.inner import BatchItem, MessageBatchInner
from ariane.store.results import GetStatus, PutStatus

from .helpers import BORN, HOST, msg, open_store


def test_put_assigns_offsets_and_ids(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with open_store(tmp_path, clock=clock) as store:
        results = [store.put_message(msg(queue_id=i % 2, body=b"m%d" % i)) for i in range(6)]
        assert all(r.ok for r in results)
        assert [r.logics_offset for r in results] == [0, 0, 1, 1, 2, 2]
        assert results[0].wrote_offset == 0
        assert results[1].wrote_offset == results[0].wrote_bytes
        mid = decode_offset_msg_id(results[3].msg_id)
        assert (mid.host, mid.port, mid.phys_offset) == ("10.0.0.5", 10911, results[3].wrote_offset)
        assert len(results[3].msg_id) == 32
        assert results[0].store_timestamp_ms == clock.now_ms()
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 3
        assert store.get_max_offset_in_queue("TopicA", 1) == 3
        assert store.get_min_offset_in_queue("TopicA", 1) == 0
        assert store.topic_queues() == {"TopicA": [0, 1]}


def test_stored_bytes_equal_the_reference_encoding(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        m = msg(body=b"payload", TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="ABC")
        m.born_host = HostPort(bytes(range(16)), 1234)
        m.flag = 7
        m.reconsume_times = 2
        r = store.put_message(m)
        raw = store.look_message_by_offset(r.wrote_offset)
        assert raw is not None
        ext, _ = decode_record(raw, check_crc=True)
        assert raw == encode_record(ext)
        assert ext.born_host == m.born_host
        assert ext.store_host == HOST
        assert ext.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}
        assert store.look_message_by_offset(r.wrote_offset, r.wrote_bytes) == raw
        assert store.look_message_by_offset(r.wrote_offset + 1) is None


def test_limits_give_clear_statuses(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        assert store.put_message(msg(topic="t" * 128)).status is PutStatus.MESSAGE_ILLEGAL
        assert store.put_message(msg(topic="")).status is PutStatus.MESSAGE_ILLEGAL
        assert store.put_message(msg(topic="../x")).status is PutStatus.MESSAGE_ILLEGAL
        assert store.put_message(msg(queue_id=-1)).status is PutStatus.MESSAGE_ILLEGAL
        big_props = msg(P="v" * 40000)
        r = store.put_message(big_props)
        assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
        assert r.remark
        too_big = store.put_message(msg(body=b"x" * (16 * 1024)))
        assert too_big.status is PutStatus.MESSAGE_ILLEGAL
        assert "limit" in (too_big.remark or "")
        bad_host = msg()
        bad_host.store_host = HostPort(b"\x01\x02", 1)
        assert store.put_message(bad_host).status is PutStatus.MESSAGE_ILLEGAL
        bad_flag = msg()
        bad_flag.flag = 2**31
        assert store.put_message(bad_flag).status is PutStatus.MESSAGE_ILLEGAL
        surrogate = msg(K="\ud800")
        assert store.put_message(surrogate).status is PutStatus.MESSAGE_ILLEGAL
        assert store.max_phy_offset == 0
        ok = store.put_message(msg(body=b"x" * 1000))
        assert ok.ok
        assert ok.wrote_offset == 0


def test_rolling_files_with_blank_records(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        results = [store.put_message(msg(body=bytes([i % 256]) * 3000)) for i in range(60)]
        assert all(r.ok for r in results)
        assert len(store.commit_log.queue.files) >= 3
        assert store.wait_dispatched()
        for i, r in enumerate(results):
            raw = store.look_message_by_offset(r.wrote_offset)
            assert raw is not None
            assert decode_record(raw, check_crc=True)[0].body == bytes([i % 256]) * 3000
        # A record never straddles a file
        size = store.config.mapped_file_size_commit_log
        for r in results:
            assert r.wrote_offset // size == (r.wrote_offset + r.wrote_bytes - 1) // size
        got = []
        offset = 0
        while True:
            res = store.get_message("g", "TopicA", 0, offset, 32)
            if res.status is not GetStatus.FOUND:
                break
            got.extend(res.messages)
            offset = res.next_begin_offset
        assert len(got) == 60


def test_batch_is_atomic_and_contiguous(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put_message(msg(queue_id=3))
        batch = MessageBatchInner(
            topic="TopicA",
            queue_id=3,
            messages=[BatchItem(b"b%d" % i, properties={"KEYS": f"bk{i}"}) for i in range(5)],
            born_host=BORN,
            store_host=HOST,
        )
        r = store.put_messages(batch)
        assert r.ok
        assert r.msg_num == 5
        assert r.logics_offset == 1
        ids = r.msg_id.split(",")
        assert len(ids) == 5
        offs = [decode_offset_msg_id(i).phys_offset for i in ids]
        assert offs[0] == r.wrote_offset
        assert store.wait_dispatched()
        res = store.get_message("g", "TopicA", 3, 1, 32)
        assert [decode_record(m)[0].body for m in res.messages] == [b"b%d" % i for i in range(5)]
        assert [decode_record(m)[0].queue_offset for m in res.messages] == [1, 2, 3, 4, 5]
        assert sum(len(m) for m in res.messages) == r.wrote_bytes
        bad = MessageBatchInner("TopicA", 3, [BatchItem(b"x", properties={"P": "v" * 40000})])
        assert store.put_messages(bad).status is PutStatus.PROPERTIES_SIZE_EXCEEDED
        empty = MessageBatchInner("TopicA", 3, [])
        assert store.put_messages(empty).status is PutStatus.MESSAGE_ILLEGAL
        prepared = MessageBatchInner(
            "TopicA", 3, [BatchItem(b"x")], sys_flag=TRANSACTION_PREPARED_TYPE
        )
        assert store.put_messages(prepared).status is PutStatus.MESSAGE_ILLEGAL
        assert store.get_max_offset_in_queue("TopicA", 3) == 6


def test_transaction_flags(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        prepared = msg(body=b"half", UNIQ_KEY="TX1")
        prepared.sys_flag = TRANSACTION_PREPARED_TYPE
        rollback = msg(body=b"rb", UNIQ_KEY="TX2")
        rollback.sys_flag = TRANSACTION_ROLLBACK_TYPE
        commit = msg(body=b"commit", UNIQ_KEY="TX3")
        commit.sys_flag = TRANSACTION_COMMIT_TYPE
        r1 = store.put_message(prepared)
        r2 = store.put_message(rollback)
        r3 = store.put_message(commit)
        assert (r1.logics_offset, r2.logics_offset, r3.logics_offset) == (0, 0, 0)
        store.put_message(msg(body=b"normal"))
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 2
        res = store.get_message("g", "TopicA", 0, 0, 32)
        assert [decode_record(m)[0].body for m in res.messages] == [b"commit", b"normal"]
        assert len(store.query_message("TopicA", "TX1", 10, 0, 2**62).messages) == 1
        assert store.query_message("TopicA", "TX2", 10, 0, 2**62).messages == []


def test_get_message_statuses(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        assert store.get_message("g", "Nope", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        for i in range(10):
            store.put_message(msg(body=b"%d" % i))
        assert store.wait_dispatched()
        found = store.get_message("g", "TopicA", 0, 2, 3)
        assert found.status is GetStatus.FOUND
        assert (found.next_begin_offset, found.min_offset, found.max_offset) == (5, 0, 10)
        assert found.message_queue_offsets == [2, 3, 4]
        assert found.buffer_total_size == sum(len(m) for m in found.messages)
        one = store.get_message("g", "TopicA", 0, 10, 32)
        assert (one.status, one.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 10)
        bad = store.get_message("g", "TopicA", 0, 50, 32)
        assert (bad.status, bad.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 0)
        assert store.get_message("g", "TopicA", 0, 0, 100).message_count == 10


def test_transfer_limits(tmp_path: Path) -> None:
    with open_store(tmp_path, max_transfer_count_on_message_in_memory=4) as store:
        for _ in range(10):
            store.put_message(msg(body=b"x" * 100))
        assert store.wait_dispatched()
        res = store.get_message("g", "TopicA", 0, 0, 32)
        assert res.message_count == 4
        assert res.next_begin_offset == 4
    with open_store(tmp_path, max_transfer_bytes_on_message_in_memory=1000) as store:
        res = store.get_message("g", "TopicA", 0, 0, 32)
        assert res.buffer_total_size <= 1000
        assert res.message_count >= 1


def test_tag_filter(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for i in range(6):
            store.put_message(msg(body=b"%d" % i, TAGS="A" if i % 3 == 0 else "B"))
        assert store.wait_dispatched()
        res = store.get_message("g", "TopicA", 0, 0, 32, TagFilter.from_expression("A"))
        assert [decode_record(m)[0].body for m in res.messages] == [b"0", b"3"]
        assert res.next_begin_offset == 6
        none = store.get_message("g", "TopicA", 0, 4, 32, TagFilter.from_expression("C || D"))
        assert none.status is GetStatus.NO_MATCHED_MESSAGE
        assert none.next_begin_offset == 6
        every = store.get_message("g", "TopicA", 0, 0, 32, TagFilter.from_expression("*"))
        assert every.message_count == 6
        assert TagFilter(["B", " "]).is_matched_by_consume_queue(java_string_hash("B"))


def test_query_by_key_checks_collisions(tmp_path: Path) -> None:
    assert java_string_hash("TopicA#Aa") == java_string_hash("TopicA#BB")
    clock = ManualClock(1_700_000_000_000)
    with open_store(tmp_path, clock=clock) as store:
        a = store.put_message(msg(body=b"a", KEYS="Aa other"))
        clock.advance(5000)
        b = store.put_message(msg(body=b"b", KEYS="BB"))
        clock.advance(5000)
        c = store.put_message(msg(body=b"c", KEYS="Aa"))
        store.put_message(msg(topic="TopicB", body=b"d", KEYS="Aa"))
        assert store.wait_dispatched()
        res = store.query_message("TopicA", "Aa", 10, 0, 2**62)
        assert [decode_record(m)[0].body for m in res.messages] == [b"c", b"a"]
        assert res.index_last_update_phy_offset >= c.wrote_offset
        assert [
            decode_record(m)[0].body
            for m in store.query_message("TopicA", "BB", 10, 0, 2**62).messages
        ] == [b"b"]
        ranged = store.query_message("TopicA", "Aa", 10, 0, a.store_timestamp_ms + 1000)
        assert [decode_record(m)[0].body for m in ranged.messages] == [b"a"]
        assert len(store.query_message("TopicA", "Aa", 1, 0, 2**62).messages) == 1
        assert store.query_message("TopicA", "zz", 10, 0, 2**62).messages == []
        assert b.ok


def test_time_lookups(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with open_store(tmp_path, clock=clock) as store:
        times = []
        for _ in range(20):
            times.append(store.put_message(msg()).store_timestamp_ms)
            clock.advance(1000)
        assert store.wait_dispatched()
        by_time = store.get_offset_in_queue_by_time
        assert by_time("TopicA", 0, times[7]) == 7
        assert by_time("TopicA", 0, times[7] + 300) == 8  # first stored at or after
        assert by_time("TopicA", 0, times[7] + 700) == 8
        assert by_time("TopicA", 0, times[0] - 10_000) == 0
        assert by_time("TopicA", 0, times[-1] + 10_000) == 20  # all older: the max offset
        assert by_time("TopicA", 0, times[7], upper=True) == 7
        assert by_time("TopicA", 0, times[7] + 300, upper=True) == 7  # last at or before
        assert by_time("TopicA", 0, times[7] - 1, upper=True) == 6
        assert by_time("TopicA", 0, times[0] - 10_000, upper=True) == 0  # all newer: the min
        assert by_time("TopicA", 0, times[-1] + 10_000, upper=True) == 19
        assert by_time("Nope", 0, 1) == 0
        assert store.get_earliest_message_time("TopicA", 0) == times[0]
        assert store.get_message_store_timestamp("TopicA", 0, 5) == times[5]
        assert store.get_message_store_timestamp("TopicA", 0, 99) == -1
        assert store.get_commit_log_offset_in_queue("TopicA", 0, 1) > 0


def test_commit_log_data_and_runtime_info(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        r1 = store.put_message(msg(body=b"one"))
        r2 = store.put_message(msg(body=b"two"))
        data = store.get_commit_log_data(0)
        assert data is not None
        assert len(data) == r1.wrote_bytes + r2.wrote_bytes
        assert (
            store.get_commit_log_data(r2.wrote_offset, 10)
            == data[r1.wrote_bytes : r1.wrote_bytes + 10]
        )
        assert store.get_commit_log_data(store.max_phy_offset) is None
        assert store.min_phy_offset == 0
        assert store.wait_dispatched()
        assert store.dispatch_behind_bytes() == 0
        info = store.runtime_info()
        assert info["putMessageTimesTotal"] == "2"
        assert info["dispatchBehindBytes"] == "0"
        assert info["commitLogMaxOffset"] == str(store.max_phy_offset)
        assert "commitLogDiskRatio" in info
        assert all(isinstance(v, str) for v in info.values())


def test_delete_topics(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put_message(msg(topic="Gone", body=b"x"))
        store.put_message(msg(topic="Kept", body=b"y"))
        assert store.wait_dispatched()
        assert store.delete_topics(["Gone"]) == 1
        assert "Gone" not in store.topic_queues()
        assert not (tmp_path / "consumequeue" / "Gone").exists()
        assert store.get_message("g", "Gone", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        r = store.put_message(msg(topic="Gone", body=b"again"))
        assert r.logics_offset == 0
        assert store.wait_dispatched()
        assert store.get_message("g", "Gone", 0, 0, 32).message_count == 1


def test_arriving_listener(tmp_path: Path) -> None:
    calls: list[tuple[str, int, int, int, dict[str, str] | None]] = []

    def listener(
        topic: str,
        queue_id: int,
        next_offset: int,
        tags: int,
        ts: int,
        props: dict[str, str] | None,
    ) -> None:
        calls.append((topic, queue_id, next_offset, tags, props))

    from ariane.store.message_store import MessageStore

    from .helpers import small_config

    store = MessageStore(small_config(tmp_path), arriving_listener=listener)
    store.load()
    store.start()
    try:
        store.put_message(msg(TAGS="A"))
        assert store.wait_dispatched()
        assert calls[-1] == ("TopicA", 0, 1, java_string_hash("A"), {"TAGS": "A"})
        for _ in range(3):
            store.put_message(msg(queue_id=1, TAGS="B"))
        assert store.wait_dispatched()
        assert max(c[2] for c in calls if c[1] == 1) == 3
    finally:
        store.shutdown()
