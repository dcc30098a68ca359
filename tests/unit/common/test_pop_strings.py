"""The strings and bodies of POP: receipt handles, offset infos, bit sets, batch-ack bodies,
revive records and the FIFO state file."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.broker.pop.order import OrderInfo
from ariane.broker.pop.records import AckMsg, PopCheckPoint, decode_ack
from ariane.common.pop import (
    OffsetInfo,
    ReceiptHandle,
    decode_bitset,
    encode_bitset,
    parse_offset_counts,
    parse_offset_lists,
    parse_start_offsets,
    pop_retry_topic_v1,
    pop_retry_topic_v2,
    real_topic,
    retry_flag_of,
)
from ariane.errors import InvalidArgumentError, RemoteProtocolError
from ariane.remoting.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody

_longs = st.integers(min_value=0, max_value=2**62)
_names = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=20)


@settings(max_examples=200)
@given(
    _longs, _longs, _longs, st.integers(0, 999), st.sampled_from("012"), _names,
    st.integers(0, 1023), _longs, st.one_of(st.just(-1), _longs),
)  # fmt: skip
def test_receipt_handle_round_trips(
    so: int, pt: int, it: int, rq: int, flag: str, bn: str, qid: int, qo: int, clo: int
) -> None:
    handle = ReceiptHandle(so, pt, it, rq, flag, bn, qid, qo, clo)
    text = handle.encode()
    assert len(text.split(" ")) == (9 if clo >= 0 else 8)
    assert ReceiptHandle.decode(text) == handle
    assert ReceiptHandle.decode(text + " junk") == handle if clo >= 0 else True
    assert handle.next_visible_time == pt + it


def test_receipt_handle_grammar_and_errors() -> None:
    h = ReceiptHandle.decode("10 1700000000000 30000 3 1 broker-a 0")
    assert (h.queue_offset, h.commit_log_offset) == (-1, -1)
    assert h.real_topic("T", "G") == "%RETRY%G_T"
    assert h.is_expired(1_700_000_030_000)
    assert not h.is_expired(1_700_000_029_999)
    assert ReceiptHandle.decode("1 2 3 999 0 b 4 5").is_order
    for bad in ("", "1 2 3 4 0 b", "x 2 3 4 0 b 1 1", "1 2 3 4 7 b 1 1", "1 2 3 4 0 b q"):
        with pytest.raises(InvalidArgumentError):
            ReceiptHandle.decode(bad)


def test_retry_topic_names() -> None:
    assert pop_retry_topic_v1("T", "G") == "%RETRY%G_T"
    assert pop_retry_topic_v2("T", "G") == "%RETRY%G+T"
    assert retry_flag_of("T") == "0"
    assert retry_flag_of("%RETRY%G_T") == "1"
    assert retry_flag_of("%RETRY%G+T") == "2"
    assert real_topic("T", "G", "2") == "%RETRY%G+T"
    assert real_topic("T", "G", "0") == "T"


def test_offset_infos_as_the_java_client_reads_them() -> None:
    info = OffsetInfo()
    info.add_queue("0", 2, 10, [10, 12, 14])
    info.add_queue("1", 0, 7, [7])
    assert info.start_offset_info == "0 2 10;1 0 7"
    assert info.msg_offset_info == "0 2 10,12,14;1 0 7"
    assert parse_start_offsets(info.start_offset_info) == {"0@2": 10, "1@0": 7}
    assert parse_offset_lists(info.msg_offset_info) == {"0@2": [10, 12, 14], "1@0": [7]}
    fifo = OffsetInfo()
    fifo.add_order_counts("0", 1, {5: 2, 6: 0})
    assert fifo.order_count_info == "0 qo1%5 2;0 1 0"
    assert parse_offset_counts(fifo.order_count_info) == {"0@qo1%5": 2, "0@1": 0}
    assert OffsetInfo().start_offset_info is None
    with pytest.raises(InvalidArgumentError):
        parse_start_offsets("0 1")
    with pytest.raises(InvalidArgumentError):
        parse_offset_lists("0 1 x,y")


@settings(max_examples=200)
@given(st.sets(st.integers(0, 300), max_size=40))
def test_bitset_round_trips_like_java_bitset(bits: set[int]) -> None:
    text = encode_bitset(bits)
    assert decode_bitset(text) == sorted(bits)
    if bits:  # no trailing zero bytes, as BitSet.toByteArray()
        assert base64.b64decode(text)[-1] != 0


def test_bitset_examples_and_errors() -> None:
    assert encode_bitset({0, 4}) == "EQ=="
    assert decode_bitset("EQ==") == [0, 4]
    assert decode_bitset("") == []
    with pytest.raises(InvalidArgumentError):
        decode_bitset("!!!")
    with pytest.raises(InvalidArgumentError):
        decode_bitset(base64.b64encode(bytes(9000)).decode(), max_bits=64)


def test_batch_ack_body_short_and_long_names() -> None:
    body = BatchAckMessageRequestBody(
        "broker-a", [BatchAck("G", "T", "1", 10, 2, 3, 1000, 30_000, (0, 4))]
    )
    decoded = BatchAckMessageRequestBody.decode(body.encode())
    assert decoded == body
    assert decoded.acks[0].offsets == [10, 14]
    long = (
        b'{"brokerName":"b","acks":[{"consumerGroup":"G","topic":"T","retry":"0",'
        b'"startOffset":"5","queueId":1,"reviveQueueId":0,"popTime":9,"invisibleTime":8,'
        b'"bitSet":"Aw=="}]}'
    )
    (ack,) = BatchAckMessageRequestBody.decode(long).acks
    assert (ack.start_offset, ack.offsets) == (5, [5, 6])
    for bad in (b"[]", b'{"acks":[{"b":"!!"}]}', b'{"acks":[{"so":"x"}]}', b"\xff"):
        with pytest.raises(RemoteProtocolError):
            BatchAckMessageRequestBody.decode(bad)


def test_revive_records_round_trip_and_tolerate_old_forms() -> None:
    ck = PopCheckPoint(10, 1000, 30_000, 2, "T", "G", "broker-a", (0, 2, 4), 3)
    back = PopCheckPoint.decode(ck.encode(), "other")
    assert back == ck
    assert back.offsets() == [10, 12, 14]
    assert back.index_of(12) == 1
    assert back.index_of(11) == -1
    old = PopCheckPoint.decode(b'{"so":5,"pt":1,"it":2,"n":3,"q":0,"t":"T","c":"G","rp":"x"}', "bn")
    assert (old.offsets(), old.broker_name, old.reput_times) == ([5, 6, 7], "bn", 127)
    ack = AckMsg((12,), 10, "G", "T", 2, 1000, "broker-a")
    assert decode_ack(ack.encode(), False, "x") == ack
    assert ack.key == ck.key
    batch = AckMsg((10, 14), 10, "G", "T", 2, 1000, "broker-a")
    assert batch.tag == "bAck"
    assert decode_ack(batch.encode(), True, "x") == batch
    longs = (
        b'{"ackOffset":3,"startOffset":1,"consumerGroup":"G","topic":"T","queueId":0,"popTime":5}'
    )
    assert decode_ack(longs, False, "local").broker_name == "local"
    for bad in (b"{}", b"[1]", b'{"t":"T","c":"G","so":"x"}'):
        with pytest.raises(RemoteProtocolError):
            PopCheckPoint.decode(bad, "b")


def test_order_info_file_form() -> None:
    info = OrderInfo(1000, 30_000, [7, 8, 10], "a1", 0b010, {8: 5000}, {7: 2}, 99)
    obj = info.to_json()
    assert obj["o"] == [7, 1, 3]
    assert OrderInfo.from_json(obj) == info
    assert info.next_offset() == 7
    assert info.blocks("other", 1000) is True
    assert info.blocks("a1", 1000) is False
    assert info.blocks(None, 31_000) is False
    assert info.unblock_time() == 31_000
