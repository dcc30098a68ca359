"""Message preparation: UNIQ_KEY, compression, flags, batches and their split."""

from __future__ import annotations

import zlib

import pytest

from ariane.client._send import (
    PreparedSend,
    SendSettings,
    build_request,
    header_base,
    prepare_batches,
    prepare_single,
)
from ariane.client.message import Message, MessageQueue
from ariane.common.batch import decode_batch
from ariane.common.msgid import UniqueIdGenerator
from ariane.common.properties import decode_properties
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode

SETTINGS = SendSettings(group="G")
IDS = UniqueIdGenerator(b"\x7f\x00\x00\x01")


def test_uniq_key_is_assigned_once_and_written_into_the_message() -> None:
    msg = Message("T", b"x", tags="A", keys=["k1", "k2"], properties={"u": "v"})
    prepared = prepare_single(msg, SETTINGS, IDS)
    assert len(prepared.msg_id) == 32
    assert msg.properties["UNIQ_KEY"] == prepared.msg_id
    assert decode_properties(prepared.properties) == {
        "TAGS": "A",
        "KEYS": "k1 k2",
        "u": "v",
        "UNIQ_KEY": prepared.msg_id,
    }
    again = prepare_single(msg, SETTINGS, IDS)
    assert again.msg_id == prepared.msg_id  # a re-send keeps its id


def test_unique_ids_differ() -> None:
    ids = {prepare_single(Message("T", b"x"), SETTINGS, IDS).msg_id for _ in range(1000)}
    assert len(ids) == 1000


@pytest.mark.parametrize(("size", "compressed"), [(4095, False), (4096, True), (100_000, True)])
def test_bodies_from_4_kib_are_zlib_compressed_with_the_zlib_type_bits(
    size: int, compressed: bool
) -> None:
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    prepared = prepare_single(Message("T", body), SETTINGS, IDS)
    if compressed:
        assert prepared.sys_flag == 0x301
        assert zlib.decompress(prepared.body) == body
    else:
        assert prepared.sys_flag == 0
        assert prepared.body == body


def test_half_messages_get_the_prepared_flag() -> None:
    msg = Message("T", b"x", properties={"TRAN_MSG": "true", "PGROUP": "G"})
    assert prepare_single(msg, SETTINGS, IDS).sys_flag == 0x4


def test_retry_topic_moves_reconsume_properties_into_the_header() -> None:
    msg = Message(
        "%RETRY%G", b"x", properties={"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "5", "a": "b"}
    )
    prepared = prepare_single(msg, SETTINGS, IDS)
    assert (prepared.reconsume_times, prepared.max_reconsume_times) == (3, 5)
    assert "RECONSUME_TIME" not in decode_properties(prepared.properties)
    assert msg.properties["RECONSUME_TIME"] == "3"  # the caller's message is untouched
    ext = build_request(prepared, MessageQueue("%RETRY%G", "b", 0), header_base(SETTINGS))
    assert (ext.ext_fields["j"], ext.ext_fields["l"]) == ("3", "5")


@pytest.mark.parametrize(
    ("msg", "problem"),
    [
        (Message("T", b""), "empty"),
        (Message("bad topic", b"x"), "illegal characters"),
        (Message("TBW102", b"x"), "not allowed"),
        (Message("T" * 128, b"x"), "longer"),
        (Message("T", b"x" * (4 * 1024 * 1024 + 1)), "limit"),
    ],
)
def test_illegal_messages_are_refused(msg: Message, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        prepare_single(msg, SETTINGS, IDS)


def test_request_header_is_send_message_v2_with_short_keys() -> None:
    prepared = prepare_single(Message("T", b"body", flag=7), SETTINGS, IDS)
    request = build_request(prepared, MessageQueue("T", "b", 3), header_base(SETTINGS))
    assert request.code == RequestCode.SEND_MESSAGE_V2
    header = h.SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
    assert (header.producer_group, header.topic, header.default_topic) == ("G", "T", "TBW102")
    assert (header.default_topic_queue_nums, header.queue_id, header.flag) == (4, 3, 7)
    assert header.sys_flag == 0
    assert not header.batch
    assert header.born_timestamp > 0
    assert header.properties == prepared.properties
    assert request.body == b"body"


def _batch(n: int, size: int = 100, **kw: object) -> list[Message]:
    return [Message("T", bytes([i % 256]) * size, keys=f"k{i}", **kw) for i in range(n)]  # type: ignore[arg-type]


def test_a_batch_is_encoded_with_each_message_s_properties() -> None:
    msgs = _batch(5)
    (prepared,) = prepare_batches(msgs, SETTINGS, IDS)
    assert prepared.batch
    assert prepared.count == 5
    assert prepared.sys_flag == 0
    entries = decode_batch(prepared.body)
    assert [e.body for e in entries] == [m.body for m in msgs]
    assert [decode_properties(e.properties)["UNIQ_KEY"] for e in entries] == prepared.msg_id.split(
        ","
    )
    assert [decode_properties(e.properties)["KEYS"] for e in entries] == [f"k{i}" for i in range(5)]
    request = build_request(prepared, MessageQueue("T", "b", 0), header_base(SETTINGS))
    assert request.code == RequestCode.SEND_BATCH_MESSAGE
    assert request.ext_fields["m"] == "true"


def test_a_batch_is_split_to_stay_within_the_size_limit() -> None:
    settings = SendSettings(group="G", max_message_bytes=1000)
    msgs = _batch(25, size=100)  # each entry ~ 22 + 100 + properties (~50)
    chunks = prepare_batches(msgs, settings, IDS)
    assert len(chunks) > 1
    assert all(len(c.body) <= 1000 for c in chunks)
    assert sum(c.count for c in chunks) == 25
    bodies = [e.body for c in chunks for e in decode_batch(c.body)]
    assert bodies == [m.body for m in msgs]  # order kept across chunks


def test_batches_are_never_compressed() -> None:
    (prepared,) = prepare_batches(_batch(2, size=10_000), SETTINGS, IDS)
    assert prepared.sys_flag == 0
    assert next(e.body for e in decode_batch(prepared.body)) == b"\x00" * 10_000


@pytest.mark.parametrize(
    ("msgs", "problem"),
    [
        ([], "at least one"),
        ([Message("T", b"x"), Message("U", b"x")], "one topic"),
        ([Message("T", b"x"), Message("T", b"x", wait_store_msg_ok=False)], "waitStoreMsgOK"),
        ([Message("T", b"x", delay_level=3)], "delay"),
        ([Message("%RETRY%G", b"x")], "retry"),
        ([Message("T", b"x" * 990)], "alone"),
    ],
)
def test_batch_rules(msgs: list[Message], problem: str) -> None:
    settings = SendSettings(group="G", max_message_bytes=1000) if problem == "alone" else SETTINGS
    with pytest.raises(InvalidArgumentError, match=problem):
        prepare_batches(msgs, settings, IDS)


def test_prepared_send_defaults() -> None:
    p = PreparedSend("T", b"x", 0, 0, "", "id")
    assert p.count == 1
    assert not p.batch
    assert p.max_reconsume_times is None


def test_incompressible_bodies_travel_uncompressed() -> None:
    import os

    body = os.urandom(64 * 1024)
    prepared = prepare_single(Message("T", body), SETTINGS, IDS)
    assert prepared.sys_flag == 0
    assert prepared.body == body
