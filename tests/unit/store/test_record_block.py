"""Packed records written as a block (``CommitLog.put_block``, ``MessageStore.submit_block``)
make the same CommitLog bytes, queue offsets and dispatch requests as the same messages put one
by one through ``put_prepared``, across file ends; a store refusing writes stores none."""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common.clock import ManualClock
from ariane.common.message import HostPort
from ariane.common.record import decode_records
from ariane.common.sysflag import TRANSACTION_PREPARED_TYPE
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.store.commit_log import CommitLog, PreparedOne
from ariane.store.dispatch_block import DispatchBlock
from ariane.store.format import DispatchRequest
from ariane.store.inner import MessageInner
from ariane.store.record_block import BlockProgress, pack
from ariane.store.results import PutResult, PutStatus
from tests.unit.store.helpers import HOST, msg, open_store, small_config

_HOSTS = st.sampled_from([HOST, HostPort(bytes(range(16)), 10911)])
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=8)


@st.composite
def messages(draw: st.DrawFn) -> MessageInner:
    return MessageInner(
        topic=draw(st.sampled_from(["T", "U", "A" * 130])),
        queue_id=draw(st.integers(0, 3)),
        body=draw(st.binary(max_size=40) | st.just(b"x" * 9_000)),
        flag=draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        properties=draw(st.dictionaries(_TEXT, _TEXT, max_size=3)),
        sys_flag=draw(st.sampled_from([0, 0x1, TRANSACTION_PREPARED_TYPE, 0x8])),
        born_timestamp_ms=draw(st.integers(0, 1 << 50)),
        born_host=draw(_HOSTS),
        store_host=draw(_HOSTS),
        reconsume_times=draw(st.integers(0, 16)),
    )


def _log(root: str) -> CommitLog:
    config = small_config(root, max_message_size=16 * 1024, max_topic_length=255)
    return CommitLog(config, ManualClock())


def _prepared(log: CommitLog, batch: list[MessageInner]) -> list[PreparedOne]:
    ones = [log.prepare_one(m) for m in batch]
    assert all(isinstance(one, PreparedOne) for one in ones)
    return ones  # type: ignore[return-value]


def _written(log: CommitLog) -> bytes:
    return log.get_data(0, log.max_offset) or b"" if log.max_offset else b""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=40), st.integers(0, 4))
def test_block_writes_what_put_prepared_writes(batch: list[MessageInner], before: int) -> None:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        one_by_one, block = _log(a), _log(b)
        try:
            lead = [msg("T", 0, b"lead" * 50) for _ in range(before)]  # other puts before
            for log in (one_by_one, block):
                for m in lead:
                    assert log.put_message(m).status is PutStatus.PUT_OK
            out: list[PutResult] = []
            one_by_one.put_prepared(_prepared(one_by_one, batch), out)
            recs = [pack(one) for one in _prepared(block, batch)]
            progress = BlockProgress()
            block.put_block([r for r in recs if r is not None], progress)
            assert progress.written == len(batch)
            assert progress.first_offset == out[0].wrote_offset
            assert progress.end_offset == out[-1].wrote_offset + out[-1].wrote_bytes
            assert progress.store_timestamp_ms == out[-1].store_timestamp_ms
            assert _written(block) == _written(one_by_one)
            # the same requests, but for the properties (None: see record_block), the block's
            # as one DispatchBlock per run (one per file the batch spans)
            expected = list(one_by_one.pending)
            expected[before:] = [r._replace(properties=None) for r in expected[before:]]
            got = list(block.pending)
            assert all(type(r) is DispatchRequest for r in got[:before])
            assert all(type(r) is DispatchBlock for r in got[before:])
            assert block.blocks_queued == len(got) - before
            assert got[:before] + [q for r in got[before:] for q in r.requests()] == expected
            assert block.topic_queue_table == one_by_one.topic_queue_table
            assert block.put_times_total == one_by_one.put_times_total
            assert block.put_size_total == one_by_one.put_size_total
        finally:
            one_by_one.shutdown()
            block.shutdown()


def test_schedule_topic_records_are_not_packed(tmp_path: Path) -> None:
    log = _log(str(tmp_path))
    try:
        one = log.prepare_one(msg(SCHEDULE_TOPIC, 2, b"x", DELAY="3"))
        assert isinstance(one, PreparedOne)
        assert pack(one) is None
        plain = log.prepare_one(msg("T", 2, b"x", KEYS="k"))
        assert isinstance(plain, PreparedOne)
        packed = pack(plain)
        assert packed is not None
        assert packed[2:4] + packed[6:7] == ("T", 2, "k")
        gc.collect()
        assert not gc.is_tracked(packed)  # atomic values only
    finally:
        log.shutdown()


def test_submit_block_stores_and_dispatches_in_order(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        assert store.writes_blocks
        batch = [msg("T", i % 2, b"m%d" % i, KEYS=f"k{i}") for i in range(700)]
        recs = [pack(store.prepare_message(m)) for m in batch]  # type: ignore[arg-type]
        stored, refusal, durable = store.submit_block(recs)  # type: ignore[arg-type]
        assert (stored, refusal) == (700, None)
        assert durable.result().status is PutStatus.PUT_OK
        store.wait_dispatched()
        for q in (0, 1):
            bodies: list[bytes] = []
            offset = 0
            while offset < 350:
                got = store.get_message("G", "T", q, offset, 32)
                bodies += [m.body for m in decode_records(b"".join(got.messages))]
                offset = got.next_begin_offset
            assert bodies == [b"m%d" % i for i in range(q, 700, 2)]
        assert store.query_message("T", "k699", 4, 0, 1 << 62).messages


def test_submit_block_on_a_store_refusing_writes_stores_nothing(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        recs = [pack(store.prepare_message(msg("T", 0, b"x"))) for _ in range(3)]  # type: ignore[arg-type]
        store.set_replica_mode(True)
        stored, refusal, durable = store.submit_block(recs)  # type: ignore[arg-type]
        assert stored == 0
        assert refusal is not None
        assert refusal.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert durable.result().msg_num == 0
        assert store.commit_log.max_offset == 0
