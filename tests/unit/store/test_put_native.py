"""The compiled single put (``_speedups_put.h`` via ``store/put_native.py``) next to its pure
reference (``CommitLog.prepare_one_py`` / ``write_one_py``): for any message, legal or not,
the same PreparedOne or refusal, the same record bytes, PutResult, dispatch request, queue
offsets and counters; the records it writes are read back by recovery's record check (CRC
included). Skipped in the pure build, where only the reference runs."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common.clock import ManualClock
from ariane.common.message import HostPort
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.store import put_native
from ariane.store.commit_log import CommitLog
from ariane.store.format import Decoded, check_record
from ariane.store.inner import MessageInner
from ariane.store.prepared import PreparedOne
from ariane.store.results import PutResult
from tests.unit.store.helpers import small_config

pytestmark = pytest.mark.skipif(put_native.prepare is None, reason="pure build")

_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
_WIDE = st.one_of(_INT32, st.integers(-(1 << 64), 1 << 64))
_V4 = HostPort(b"\x0a\x00\x00\x05", 10911)
_HOSTS = st.one_of(
    st.just(_V4),
    st.sampled_from(
        [
            HostPort(bytes(range(16)), 10911),
            HostPort(b"\x01\x02\x03", 1),  # neither IPv4 nor IPv6
            HostPort(b"\x7f\x00\x00\x01", 1 << 31),  # a port the record cannot hold
            HostPort(b"\x7f\x00\x00\x01", True),  # type: ignore[arg-type]
        ]
    ),
)
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_ODD_TEXT = st.text(max_size=6)  # surrogates too: not UTF-8
_VALUES = st.one_of(_TEXT, _ODD_TEXT, st.none())
_PROPS = st.dictionaries(
    st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY"]), _TEXT, _ODD_TEXT),
    _VALUES,
    max_size=5,
)
_TOPICS = st.sampled_from(["T", "Topic2", "A" * 130, "", "a/b", "A" * 300, "é", SCHEDULE_TOPIC])


@st.composite
def messages(draw: st.DrawFn) -> MessageInner:
    props = draw(_PROPS | st.just({"k": "v" * 300}) | st.just({"TAGS": "TagA", "UNIQ_KEY": "u"}))
    text = draw(st.one_of(st.none(), _TEXT, _ODD_TEXT))
    return MessageInner(
        topic=draw(_TOPICS),
        queue_id=draw(st.one_of(st.integers(-2, 8), _WIDE, st.just(True))),
        body=draw(st.binary(max_size=64) | st.just(b"x" * 1_100) | st.just(bytearray(b"ba"))),
        flag=draw(_WIDE),
        properties=props,
        sys_flag=draw(st.sampled_from([0, 0x1, 0x4, 0x8, 0xC, 0x30]) | _WIDE),
        born_timestamp_ms=draw(_WIDE),
        born_host=draw(_HOSTS),
        store_host=draw(_HOSTS),
        reconsume_times=draw(st.integers(0, 16) | _WIDE),
        prepared_transaction_offset=draw(st.integers(0, 3) | _WIDE),
        properties_string=text,
    )


@st.composite
def common_messages(draw: st.DrawFn) -> MessageInner:
    """Mostly the shape the compiled path takes (a few odd fields still)."""
    props = draw(
        st.dictionaries(
            st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "é"]),
            st.sampled_from(["", "TagA", "x y", "ü"]) | _VALUES,
            max_size=4,
        )
    )
    return MessageInner(
        topic=draw(st.sampled_from(["T", "Topic2", "A" * 130])),
        queue_id=draw(st.integers(0, 3)),
        body=draw(st.binary(max_size=300)),
        flag=draw(st.integers(-3, 3) | _INT32),
        properties=props,
        sys_flag=draw(st.sampled_from([0, 0x1, 0x4, 0x8, 0xC, 0x30, 0x31])),
        born_timestamp_ms=draw(st.integers(0, 1 << 45) | st.just(-(1 << 63))),
        born_host=_V4,
        store_host=draw(st.just(_V4) | _HOSTS),
        reconsume_times=draw(st.integers(0, 3)),
        prepared_transaction_offset=draw(st.integers(0, 1 << 40)),
        properties_string=draw(st.none() | st.none() | _TEXT),
    )


def _result(r: PutResult) -> tuple[object, ...]:
    return tuple(getattr(r, name) for name in PutResult.__slots__)


@contextmanager
def _logs() -> Iterator[tuple[CommitLog, CommitLog]]:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        logs = [
            CommitLog(
                small_config(d, max_message_size=1024, max_properties_length=256), ManualClock()
            )
            for d in (a, b)
        ]
        logs[1]._fast_prepare = logs[1]._fast_write = logs[1]._fast_put = None  # the reference
        try:
            yield logs[0], logs[1]
        finally:
            for log in logs:
                log.shutdown()


def _written(log: CommitLog) -> bytes:
    mf = log.queue.get_last_mapped_file(0)
    assert mf is not None
    return bytes(mf.mm[: mf.wrote_position])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(common_messages() | messages(), min_size=1, max_size=6))
def test_compiled_puts_store_what_the_reference_stores(msgs: list[MessageInner]) -> None:
    """Each message put twice (the second time the topic and tags caches are warm)."""
    with _logs() as (fast, pure):
        for msg in msgs + msgs:
            try:
                expected: object = _result(pure.put_message(msg))
            except Exception as exc:
                expected = type(exc)
            try:
                got: object = _result(fast.put_message(msg))
            except Exception as exc:
                got = type(exc)
            assert got == expected
        assert _written(fast) == _written(pure)
        assert list(fast.pending) == list(pure.pending)
        assert fast.topic_queue_table == pure.topic_queue_table
        assert (fast.put_times_total, fast.put_size_total) == (
            pure.put_times_total,
            pure.put_size_total,
        )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(common_messages() | messages())
def test_a_compiled_preparation_is_the_reference_or_none(msg: MessageInner) -> None:
    with _logs() as (fast, pure):
        for _ in range(2):  # cold, then warm caches
            reference = pure.prepare_one_py(msg)
            fast.prepare_one_py(msg)  # the same caches on both sides
            assert put_native.prepare is not None
            got = put_native.prepare(
                msg, fast._topics, fast._tag_codes, fast._max_props, fast._max_size
            )
            assert got is None or (type(reference) is PreparedOne and got == reference)


def test_the_common_shape_is_compiled_and_recovery_reads_it() -> None:
    """A producer's message takes the compiled path (after the first put fills the caches)
    and its record passes the record check with its CRC, giving the queued request."""
    props = {"TAGS": "TagA", "UNIQ_KEY": "AB" * 16}
    msg = MessageInner("BenchmarkTest", 3, bytes(range(200)), 7, props, 0, 1, _V4, _V4)
    with _logs() as (fast, _):
        assert put_native.prepare is not None
        assert put_native.prepare(msg, fast._topics, fast._tag_codes, 256, 1024) is None  # cold
        fast.put_message(msg)  # the reference fills the topic and tags caches
        one = put_native.prepare(msg, fast._topics, fast._tag_codes, 256, 1024)
        assert type(one) is PreparedOne
        assert one == fast.prepare_one_py(msg)
        small = msg
        first = fast.put_message(small)
        second = fast.put_message(small)
        assert (first.logics_offset, second.logics_offset) == (1, 2)
        data = _written(fast)
        for request in list(fast.pending):
            res = check_record(
                data, request.commit_log_offset, len(data), check_crc=True, want_dispatch=True
            )
            assert type(res) is Decoded
            assert res.dispatch == request


def _files(log: CommitLog) -> list[bytes]:
    return [bytes(mf.mm[: mf.wrote_position]) for mf in log.queue.files]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(common_messages(), min_size=1, max_size=8), st.integers(200, 300))
def test_one_call_puts_across_file_rolls_store_what_the_reference_stores(
    shapes: list[MessageInner], count: int
) -> None:
    """``put_one`` (one C call per put) over enough 1 KiB-ish messages to roll the 64 KiB
    files several times: the same results, files, requests, offsets and counters."""
    with _logs() as (fast, pure):
        assert fast._fast_put is not None
        for i in range(count):
            shape = shapes[i % len(shapes)]
            topic = shape.topic if len(shape.topic) < 128 else "Topic2"  # a legal one: stored
            msg = MessageInner(
                topic, shape.queue_id, bytes([i % 251]) * (300 + i % 300), shape.flag,
                shape.properties, shape.sys_flag, shape.born_timestamp_ms, shape.born_host,
                shape.store_host, shape.reconsume_times, shape.prepared_transaction_offset,
                shape.properties_string,
            )  # fmt: skip
            outcomes = []
            for log in (pure, fast):
                try:
                    outcomes.append(_result(log.put_message(msg)))
                except Exception as exc:  # the reference's error, on both sides
                    outcomes.append(type(exc))
            assert outcomes[1] == outcomes[0]
        assert len(fast.queue.files) > 1 or fast.put_size_total < 64 * 1024
        assert _files(fast) == _files(pure)
        assert list(fast.pending) == list(pure.pending)
        assert fast.topic_queue_table == pure.topic_queue_table
        assert (fast.put_times_total, fast.put_size_total) == (
            pure.put_times_total,
            pure.put_size_total,
        )


def test_put_one_writes_a_record_that_fits_its_room_and_nothing_else() -> None:
    props = {"TAGS": "TagA", "UNIQ_KEY": "AB" * 16}
    msg = MessageInner("BenchmarkTest", 1, bytes(range(100)), 0, props, 0, 1, _V4, _V4)
    with _logs() as (fast, pure):
        pure.put_message(msg)
        fast.put_message(msg)  # the reference fills the topic and tags caches
        one = fast.prepare_one_py(msg)
        assert type(one) is PreparedOne
        put_one = put_native.put_one
        assert put_one is not None
        mm = bytearray(one.total + 8)
        args = (fast._topics, fast._tag_codes, fast._max_props, fast._max_size, mm, 8, 500)
        table, staged = dict(fast.topic_queue_table), list[object]()
        assert put_one(msg, *args, one.total - 1, 7, table, staged) is None
        assert (mm, table, staged) == (bytearray(one.total + 8), fast.topic_queue_table, [])
        got = put_one(msg, *args, one.total, 7, table, staged)
        expected = pure.write_one_py(one, mm2 := bytearray(one.total + 8), 8, 500, 7)
        assert got is not None
        assert _result(got) == _result(expected)
        assert mm == mm2
        assert staged == [pure.pending[-1]]
        assert table == pure.topic_queue_table
