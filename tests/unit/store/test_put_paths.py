"""``put_message`` and ``put_messages`` share one validation path: for any message (legal or
not), a single put and a batch of one answer the same status and, when stored, write the
same record bytes and the same dispatch request."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common.clock import ManualClock
from ariane.common.message import HostPort
from ariane.common.properties import encode_properties
from ariane.common.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from ariane.store.commit_log import CommitLog
from ariane.store.inner import BatchItem, MessageBatchInner, MessageInner
from ariane.store.results import PutResult, PutStatus
from tests.unit.store.helpers import small_config

_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
_WIDE = st.one_of(_INT32, st.integers(-(1 << 40), 1 << 40))
_HOSTS = st.sampled_from(
    [
        HostPort(b"\x0a\x00\x00\x05", 10911),
        HostPort(bytes(range(16)), 10911),
        HostPort(b"\x01\x02\x03", 1),  # neither IPv4 nor IPv6
    ]
)
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=12)
_PROPS = st.dictionaries(_TEXT.filter(bool), _TEXT, max_size=4)


@st.composite
def messages(draw: st.DrawFn) -> MessageInner:
    return MessageInner(
        topic=draw(st.sampled_from(["T", "A" * 130, "", "a/b", "A" * 300])),
        queue_id=draw(st.one_of(st.integers(-2, 8), _WIDE)),
        body=draw(st.binary(max_size=64) | st.just(b"x" * 1_100)),
        flag=draw(_WIDE),
        properties=draw(_PROPS | st.just({"k": "v" * 300})),
        sys_flag=draw(st.sampled_from([0, 0x1, 0x2, 0x8, 0x30]) | _WIDE),
        born_timestamp_ms=draw(st.integers(-(1 << 64), 1 << 64)),
        born_host=draw(_HOSTS),
        store_host=draw(_HOSTS),
        reconsume_times=draw(st.integers(0, 16) | _WIDE),
    )


def _put(msg: MessageInner, batch: bool) -> tuple[PutResult, bytes | None, object]:
    with tempfile.TemporaryDirectory() as root:
        log = CommitLog(
            small_config(root, max_message_size=1024, max_properties_length=256),
            ManualClock(),
        )
        try:
            if batch:
                item = BatchItem(msg.body, msg.flag, msg.properties, msg.properties_string)
                result = log.put_messages(
                    MessageBatchInner(
                        msg.topic,
                        msg.queue_id,
                        [item],
                        msg.sys_flag,
                        msg.born_timestamp_ms,
                        msg.born_host,
                        msg.store_host,
                        msg.reconsume_times,
                    )
                )
            else:
                result = log.put_message(msg)
            if result.status is not PutStatus.PUT_OK:
                return result, None, None
            record = log.get_message(result.wrote_offset, result.wrote_bytes)
            return result, record, log.pending[-1]
        finally:
            log.shutdown()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_single_put_and_batch_of_one_agree(msg: MessageInner) -> None:
    single, single_record, single_request = _put(msg, batch=False)
    batch, batch_record, batch_request = _put(msg, batch=True)
    tx = msg.sys_flag & 0xC
    if tx in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
        # half and rollback records exist only as single puts
        assert batch.status is PutStatus.MESSAGE_ILLEGAL
        return
    assert single.status is batch.status, (single.remark, batch.remark)
    assert (single.remark is None) == (batch.remark is None)
    assert single_record == batch_record
    assert single_request == batch_request
    if single.status is PutStatus.PUT_OK:
        assert single_record is not None
        assert len(single_record) == single.wrote_bytes
        assert (single.wrote_offset, single.logics_offset, single.store_timestamp_ms) == (
            batch.wrote_offset,
            batch.logics_offset,
            batch.store_timestamp_ms,
        )


_ITEM_PROPS = _PROPS | st.sampled_from(
    [{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"}, {"TAGS": ""}, {"DELAY": "3"}, {}]
)


@st.composite
def batch_items(draw: st.DrawFn) -> BatchItem:
    """A batch message, with its encoded properties text (as the broker's send path hands
    them over, the bulk path of ``ariane.store.batch_bulk``) or without."""
    props = draw(_ITEM_PROPS)
    text = encode_properties(props) if draw(st.booleans()) else None
    return BatchItem(draw(st.binary(max_size=48)), draw(st.integers(-3, 3) | _WIDE), props, text)


@st.composite
def batches(draw: st.DrawFn) -> MessageBatchInner:
    items = draw(st.lists(batch_items(), min_size=1, max_size=6))
    return MessageBatchInner(
        draw(st.sampled_from(["T", "A" * 130, "SCHEDULE_TOPIC_XXXX", "a/b"])),
        draw(st.one_of(st.integers(-1, 3), _WIDE)),
        items,
        draw(st.sampled_from([0, 0x1, 0x30]) | _WIDE),
        draw(st.integers(-(1 << 64), 1 << 64)),
        draw(_HOSTS),
        draw(_HOSTS),
        draw(st.integers(0, 3) | _WIDE),
    )


def _singles(batch: MessageBatchInner) -> list[MessageInner]:
    b = batch
    return [
        MessageInner(
            b.topic,
            b.queue_id,
            m.body,
            m.flag,
            m.properties,
            b.sys_flag,
            b.born_timestamp_ms,
            b.born_host,
            b.store_host,
            b.reconsume_times,
        )
        for m in b.messages
    ]


def _log(root: str) -> CommitLog:
    config = small_config(root, max_message_size=1024, max_properties_length=256)
    return CommitLog(config, ManualClock(1_700_000_000_000))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_a_batch_writes_what_its_messages_put_one_by_one_write(batch: MessageBatchInner) -> None:
    """Every record of a stored batch (bytes, dispatch request) is the record a single put of
    that message writes; a refused batch is refused as its first refused message is (or for
    its size), and stores nothing."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        batch_log, single_log = _log(a), _log(b)
        try:
            result = batch_log.put_messages(batch)
            if batch.messages and batch.sys_flag & 0xC in (
                TRANSACTION_PREPARED_TYPE,
                TRANSACTION_ROLLBACK_TYPE,
            ):  # half and rollback records exist only as single puts
                assert result.status is PutStatus.MESSAGE_ILLEGAL
                return
            singles = [single_log.prepare_one(m) for m in _singles(batch)]
            refused = [r for r in singles if isinstance(r, PutResult)]
            if result.status is not PutStatus.PUT_OK:
                assert not batch_log.pending
                if refused:
                    assert (result.status, result.remark) == (refused[0].status, refused[0].remark)
                else:
                    assert result.remark is not None
                    assert result.remark.startswith("batch is ")
                return
            assert not refused
            written = [single_log.put_message(m) for m in _singles(batch)]
            assert result.msg_num == len(written)
            assert result.offsets == tuple(w.wrote_offset for w in written)
            assert result.logics_offset == written[0].logics_offset
            assert list(batch_log.pending) == list(single_log.pending)
            size = sum(w.wrote_bytes for w in written)
            assert result.wrote_bytes == size
            assert batch_log.get_message(0, size) == single_log.get_message(0, size)
            assert batch_log.put_times_total == single_log.put_times_total == len(written)
        finally:
            batch_log.shutdown()
            single_log.shutdown()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=4))
def test_put_message_and_prepared_puts_agree(msgs: list[MessageInner]) -> None:
    """``put_message`` (the send path) and ``prepare_one`` + ``put_prepared`` (timer
    deliveries, DLedger's write) give the same results, record bytes and dispatch requests."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        direct, prepared = _log(a), _log(b)
        try:
            results = [direct.put_message(m) for m in msgs]
            ones = [prepared.prepare_one(m) for m in msgs]
            out: list[PutResult] = []
            prepared.put_prepared([o for o in ones if not isinstance(o, PutResult)], out)
            stored = iter(out)
            for result, one in zip(results, ones, strict=True):
                other = one if isinstance(one, PutResult) else next(stored)
                assert vars_of(result) == vars_of(other)
            assert list(direct.pending) == list(prepared.pending)
            size = sum(r.wrote_bytes for r in results if r.status is PutStatus.PUT_OK)
            assert direct.get_message(0, size) == prepared.get_message(0, size)
        finally:
            direct.shutdown()
            prepared.shutdown()


def vars_of(result: PutResult) -> tuple[object, ...]:
    return tuple(getattr(result, name) for name in PutResult.__slots__)
