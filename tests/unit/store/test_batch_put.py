"""A SEND_BATCH body put straight into the CommitLog (``ariane.store.batch_put``): the compiled
``batch_scan``/``batch_write`` give what their pure twins give (columns, record bytes, sizes,
errors), the twins accept exactly the batches the bulk path stamps in bulk, and a put from the
body stores the records, results and dispatch requests ``CommitLog.put_messages`` stores for
the stamped items (properties aside: a block's requests carry none)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ariane.broker.processors.batch_bulk import bulk_items
from ariane.common import native
from ariane.common.batch import decode_batch_py, encode_batch
from ariane.common.message import HostPort
from ariane.common.msgid import offset_msg_ids, offset_msg_ids_py
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    KEYS,
    MSG_REGION,
    TRACE_SWITCH,
    UNIQ_KEY,
    decode_properties,
)
from ariane.common.record import MESSAGE_MAGIC_CODE_V1, decode_record, decode_records
from ariane.store import batch_put
from ariane.store.dispatch_block import DispatchBlock
from ariane.store.format import DispatchRequest
from ariane.store.inner import BatchItem, MessageBatchInner
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus, PutStatus
from ariane.store.tools.verify import verify
from tests.unit.store.helpers import open_store
from tests.unit.store.test_put_paths import _log, vars_of

_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
_STAMP_MAP = {CLUSTER: "C", MSG_REGION: "R", TRACE_SWITCH: "true"}
_STAMP = b"CLUSTER\x01C\x02MSG_REGION\x01R\x02TRACE_ON\x01true\x02"
_NAMES = st.sampled_from(
    [UNIQ_KEY, DEDUP, KEYS, "a", "b", "TAGS", "DELAY", "CLUSTER", "TRAN_MSG", "MSG_REGION",
     "TRACE_ON", "XDELAY", "é", ""]
)  # fmt: skip
_VALUES = st.sampled_from(["", "u1", "u2", "k1 k2", "x\x01y", "é"]) | st.text("ab", max_size=3)
_IDS = st.sampled_from(["u1", "u2", "u3"])
_V4, _V6 = HostPort(b"\x0a\x00\x00\x05", 10911), HostPort(bytes(range(16)), 7)
_FAST = native.speedups


@st.composite
def _props(draw: st.DrawFn, common: bool = False) -> str:
    """Properties text: the sink's shape (always when ``common``), or anything."""
    if common or draw(st.booleans()):
        uniq = draw(_IDS)
        pairs = [(UNIQ_KEY, uniq)]
        dedup = draw(st.sampled_from([None, "same", "other"]))
        if dedup is not None:
            pairs.append((DEDUP, uniq if dedup == "same" else draw(_IDS)))
        if draw(st.booleans()):
            pairs.append((KEYS, draw(st.sampled_from(["k1", "k1 k2"]))))
        pairs += draw(st.lists(st.tuples(st.sampled_from(["a", "b"]), _VALUES), max_size=2))
        pairs = draw(st.permutations(pairs))
    else:
        pairs = draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=4))
    tail = "" if common else draw(st.sampled_from(["", "", "\x02", "z", "\x01"]))
    return "".join(f"{n}\x01{v}\x02" for n, v in pairs) + tail


@st.composite
def bodies(draw: st.DrawFn, common: bool = False) -> bytes:
    """A SEND_BATCH body, now and then cut short (``common``: of the sink's shape)."""
    entries = draw(
        st.lists(
            st.tuples(st.binary(max_size=40), _INT32, _props(common)),
            min_size=1 if common else 0,
            max_size=5,
        )
    )
    data = encode_batch(entries)
    cut = 0 if common else draw(st.sampled_from([0, 0, 0, 1, 3]))
    return data[: len(data) - cut]


_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(bodies(common=True) | bodies(), st.sampled_from([b"", _STAMP]), st.sampled_from([32767, 60]))
@example(  # a name that ends with a slow key (DELAY) is an ordinary property (CI found it)
    b"\x00\x00\x00+" + bytes(17) + b"\x15UNIQ_KEY\x01u1\x02XDELAY\x01a\x02", b"", 32767
)
def test_scan_twins_agree_and_take_what_the_bulk_path_takes(
    data: bytes, stamp: bytes, max_props: int
) -> None:
    got = batch_put.scan_py(data, len(stamp), max_props)
    if _FAST is not None:
        assert _FAST.batch_scan(data, len(stamp), max_props) == got
    if got is None:
        return
    uniq, dedup, keys, total, top = got
    entries = decode_batch_py(data)
    bulk = bulk_items(entries, dict(_STAMP_MAP), _STAMP.decode())
    assert bulk is not None  # every scanned batch is one the bulk path stamps in bulk
    items, ids = bulk
    assert ids == dedup
    assert uniq == [i.properties[UNIQ_KEY] for i in items]
    assert keys == [i.properties.get(KEYS) for i in items]
    sizes = [len(e.body) + len(e.properties.encode()) for e in entries]
    assert (total, top) == (sum(sizes), max(sizes))
    assert all(len(e.properties) + len(stamp) <= max_props for e in entries)


def test_scan_refuses_other_shapes() -> None:
    ok = f"{UNIQ_KEY}\x01u\x02"
    for props in ["", "a\x01b\x02", f"{ok}TAGS\x01t\x02", f"{ok}DELAY\x013\x02", f"{ok}{ok}",
                  f"{UNIQ_KEY}\x01u", f"{ok}\x02", f"{ok}é\x01v\x02", f"{ok}a\x01\x02"]:  # fmt: skip
        data = encode_batch([(b"x", 0, ok), (b"y", 0, props)])
        assert batch_put.scan_py(data, 0, 32767) is None, props
        if _FAST is not None:
            assert _FAST.batch_scan(data, 0, 32767) is None, props
    assert batch_put.scan_py(encode_batch([(b"x", 0, ok)]), 0, 32767) is not None


def _write(fn: Any, size: int, pos: int, *args: Any) -> tuple[Any, bytes]:
    mm = bytearray(b"\xee" * size)
    try:
        out = fn(mm, pos, *args)
    except Exception as exc:  # the twins raise the same error
        out = (type(exc), str(exc))
    return out, bytes(mm)


@_SETTINGS
@given(
    bodies(common=True), st.sampled_from([b"", _STAMP]), st.sampled_from([_V4, _V6]),
    st.sampled_from([_V4, _V6]), st.integers(0, 20), st.integers(-8, 8),
    st.tuples(st.sampled_from([MESSAGE_MAGIC_CODE_V1]) | _INT32, st.integers(0, (1 << 31) - 1), st.sampled_from([0]) | _INT32, st.integers(0, 1 << 62),
              _INT32),
    st.integers(0, 1 << 50), st.integers(0, 1 << 40),
)  # fmt: skip
def test_write_twins_agree(
    data: bytes,
    stamp: bytes,
    born: HostPort,
    store: HostPort,
    pos: int,
    room: int,
    fields: tuple[int, int, int, int, int],
    phys: int,
    queue_offset: int,
) -> None:
    scanned = batch_put.scan_py(data, len(stamp), 32767)
    assume(scanned is not None)  # what the put calls it on; test_write_errors for the rest
    assert scanned is not None
    magic, queue_id, sys_flag, born_ts, reconsume = fields
    size = pos + max(
        0, scanned[3] + 200 * len(scanned[0]) + len(stamp) * len(scanned[0]) + room - 100
    )
    args = (
        data, stamp, b"\x01T", magic, queue_id, sys_flag, born_ts, born.addr, born.port,
        store.addr, store.port, reconsume, phys, queue_offset, 1_700_000_000_123,
    )  # fmt: skip
    pure = _write(batch_put.write_py, size, pos, *args)
    if _FAST is not None:
        assert _write(_FAST.batch_write, size, pos, *args) == pure
    readable = magic == MESSAGE_MAGIC_CODE_V1 and sys_flag == 0 and born is store is _V4
    if isinstance(pure[0], list) and readable:
        records = decode_records(pure[1][pos : pos + sum(pure[0])])
        assert [r.body for r in records] == [e.body for e in decode_batch_py(data)]
        assert [r.queue_offset for r in records] == list(
            range(queue_offset, queue_offset + len(records))
        )


def test_write_errors() -> None:
    data = encode_batch([(b"x", 0, f"{UNIQ_KEY}\x01u\x02")])
    cases = [
        (bytearray(300), 0, data, b"\x01\x02\x03"),  # a bad host
        (bytearray(30), 0, data, _V4.addr),  # does not fit
        (bytearray(300), 0, data[:-1], _V4.addr),  # not a batch body
        (bytearray(300), 0, encode_batch([(b"x", 0, "p" * 32767)]), _V4.addr),  # too long
    ]
    for mm, pos, body, addr in cases:
        args = (body, _STAMP, b"\x01T", 1, 0, 0, 0, addr, 1, _V4.addr, 2, 0, 0, 0, 0)
        with pytest.raises(ValueError) as pure:
            batch_put.write_py(mm, pos, *args)
        if _FAST is not None:
            with pytest.raises(ValueError) as fast:
                _FAST.batch_write(bytearray(mm), pos, *args)
            assert str(fast.value) == str(pure.value)


def _requests(pending: Any) -> list[DispatchRequest]:
    out: list[DispatchRequest] = []
    for p in pending:
        out += p.requests() if isinstance(p, DispatchBlock) else [p._replace(properties=None)]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(bodies(common=True) | bodies(), min_size=1, max_size=3), st.sampled_from([_V4, _V6])
)
def test_a_put_from_the_body_stores_what_put_messages_stores(
    datas: list[bytes], born: HostPort
) -> None:
    """Small limits (1,024-byte messages, 256-byte properties): a batch the CommitLog refuses
    is never put from its body (``check_scanned`` None), the caller's path says why."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        scanned_log, bulk_log = _log(a), _log(b)
        try:
            for data in datas:
                scanned = batch_put.scan(data, len(_STAMP), 256)
                if scanned is None:
                    continue
                batch = MessageBatchInner("T", 1, [], 0, 5, born, _V4, 0)
                items = [
                    BatchItem(e.body, e.flag, decode_properties(e.properties) | _STAMP_MAP,
                              e.properties + _STAMP.decode())
                    for e in decode_batch_py(data)
                ]  # fmt: skip
                want = bulk_log.put_messages(MessageBatchInner("T", 1, items, 0, 5, born, _V4, 0))
                ready = batch_put.check_scanned(scanned_log, batch, data, _STAMP, scanned)
                if ready is None:
                    assert want.status is not PutStatus.PUT_OK
                    continue
                assert vars_of(batch_put.put_scanned(scanned_log, ready)) == vars_of(want)
            end = scanned_log.max_offset
            assert end == bulk_log.max_offset
            assert scanned_log.get_message(0, end) == bulk_log.get_message(0, end)
            assert _requests(scanned_log.pending) == _requests(bulk_log.pending)
            assert scanned_log.topic_queue_table == bulk_log.topic_queue_table
        finally:
            scanned_log.shutdown()
            bulk_log.shutdown()


def _sink_body(first: int, n: int, size: int = 700) -> bytes:
    return encode_batch(
        (b"%05d" % i * (size // 5), 0, f"{UNIQ_KEY}\x01u{i}\x02{DEDUP}\x01u{i}\x02KEYS\x01k{i}\x02")
        for i in range(first, first + n)
    )


def test_batches_put_from_their_bodies_are_dispatched_and_recovered(tmp_path: Path) -> None:
    """Many batches across CommitLog files (64 KiB): consume queues and the index from the
    blocks, then the same after a clean restart and after a crash (no checkpointed
    dispatch), and the records verify."""
    bodies = [_sink_body(15 * k, 15) for k in range(32)]  # ~12 KiB a batch
    with open_store(tmp_path) as store:
        for data in bodies:
            scanned = batch_put.scan(data, len(_STAMP), 32767)
            assert scanned is not None
            batch = MessageBatchInner("TopicA", 0, [], 0, 5, _V4, _V4, 0)
            appended = store.append_scanned(batch, data, _STAMP, scanned)
            assert appended is not None
            assert appended[0].status is PutStatus.PUT_OK
        assert store.wait_dispatched()
        _check(store, 480)
    with open_store(tmp_path) as store:
        _check(store, 480)
    (tmp_path / "abort").touch()  # as if the broker had been killed
    for cq in (tmp_path / "consumequeue").rglob("0*"):
        if cq.is_file():
            cq.unlink()
    with open_store(tmp_path) as store:
        assert store.wait_dispatched()
        _check(store, 480)
    assert verify(str(tmp_path))[0] == []


def _check(store: MessageStore, n: int) -> None:
    got: list[Any] = []
    while len(got) < n:
        res = store.get_message("g", "TopicA", 0, len(got), 32)
        assert res.status is GetStatus.FOUND
        got += [decode_record(m, check_crc=True)[0] for m in res.messages]
    assert [m.body for m in got] == [b"%05d" % i * 140 for i in range(n)]
    assert [m.queue_offset for m in got] == list(range(n))
    assert got[7].properties == {UNIQ_KEY: "u7", DEDUP: "u7", KEYS: "k7", **_STAMP_MAP}
    for key in ("k7", "u300"):
        found = store.query_message("TopicA", key, 5, 0, 2**62).messages
        assert len(found) == 1


@_SETTINGS
@given(
    st.sampled_from(["", "0A00000500002A9F", "é"]),
    st.lists(st.integers(0, (1 << 63) - 1) | st.integers(-5, -1) | st.just(1 << 64), max_size=6),
)
def test_offset_msg_ids_twins_agree(prefix: str, offsets: list[int]) -> None:
    want = offset_msg_ids_py(prefix, offsets)
    assert offset_msg_ids(prefix, offsets) == want
    assert offset_msg_ids(prefix, tuple(offsets)) == want
    if _FAST is not None and prefix.isascii() and all(0 <= o < 1 << 63 for o in offsets):
        assert _FAST.offset_msg_ids(prefix, offsets) == want  # not left to the twin
    if offsets and 0 <= offsets[0] < 1 << 63:
        assert want.split(",")[0] == f"{prefix}{offsets[0]:016X}"
