"""The send request's bytes on the wire: ``build_request`` against the copy-and-assign form it
replaced (kept here as the reference), field by field and byte for byte."""

from __future__ import annotations

import time

import pytest

from ariane.client import _send
from ariane.client._send import (
    PreparedSend,
    SendSettings,
    born_timestamp,
    build_request,
    header_base,
    prepare_batches,
    prepare_single,
)
from ariane.client.message import Message, MessageQueue
from ariane.common.msgid import UniqueIdGenerator
from ariane.remoting.protocol.codec import encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand

SETTINGS = SendSettings(group="G")
IDS = UniqueIdGenerator(b"\x7f\x00\x00\x01")


def _reference(prepared: PreparedSend, mq: MessageQueue, base: dict[str, str]) -> RemotingCommand:
    """``build_request`` as it was before the one-display form (born timestamp and opaque
    are set by the caller)."""
    ext = base.copy()
    ext["b"] = prepared.topic
    ext["e"] = str(mq.queue_id)
    ext["f"] = str(prepared.sys_flag)
    ext["g"] = "0"
    ext["h"] = str(prepared.flag)
    ext["i"] = prepared.properties
    if prepared.reconsume_times:
        ext["j"] = str(prepared.reconsume_times)
    if prepared.batch:
        ext["m"] = "true"
    if prepared.max_reconsume_times is not None:
        ext["l"] = str(prepared.max_reconsume_times)
    return RemotingCommand(
        code=RequestCode.SEND_BATCH_MESSAGE if prepared.batch else RequestCode.SEND_MESSAGE_V2,
        opaque=0,
        ext_fields=ext,
        body=prepared.body,
    )


def _cases() -> list[tuple[PreparedSend, MessageQueue]]:
    big = SendSettings(group="G", compress_over_bytes=64)
    retry = Message(
        "%RETRY%G", b"r", properties={"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "16"}
    )
    return [
        (prepare_single(Message("T", b"body"), SETTINGS, IDS), MessageQueue("T", "b", 0)),
        (
            prepare_single(Message("T", b"b", flag=7, tags="A"), SETTINGS, IDS),
            MessageQueue("T", "b", 255),
        ),
        (prepare_single(Message("T", b"b", flag=-5), SETTINGS, IDS), MessageQueue("T", "b", 256)),
        (
            prepare_single(Message("T", b"b", flag=1 << 20), SETTINGS, IDS),
            MessageQueue("T", "b", 4096),
        ),
        (prepare_single(Message("T", b"z" * 500), big, IDS), MessageQueue("T", "b", 3)),
        (prepare_single(retry, SETTINGS, IDS), MessageQueue("%RETRY%G", "b", 0)),
        (
            prepare_single(Message("T", b"h", properties={"TRAN_MSG": "true"}), SETTINGS, IDS),
            MessageQueue("T", "b", 1),
        ),
        (
            prepare_batches([Message("T", b"1"), Message("T", b"2")], SETTINGS, IDS)[0],
            MessageQueue("T", "b", 2),
        ),
        (
            prepare_batches([Message("T", b"1", wait_store_msg_ok=False)], SETTINGS, IDS)[0],
            MessageQueue("T", "b", 7),
        ),
    ]


@pytest.mark.parametrize(
    "base", [header_base(SETTINGS), {"a": "G", "c": "T0", "d": "8", "x": "y"}, {}]
)
def test_the_request_is_the_reference_request_byte_for_byte(base: dict[str, str]) -> None:
    for prepared, mq in _cases():
        before = time.time_ns() // 1_000_000
        request = build_request(prepared, mq, base)
        after = time.time_ns() // 1_000_000
        born = int(request.ext_fields["g"])
        assert before <= born <= after
        assert request.ext_fields["g"] == str(born)
        expected = _reference(prepared, mq, base)
        expected.ext_fields["g"] = request.ext_fields["g"]
        expected.opaque = request.opaque
        assert request == expected
        assert list(request.ext_fields) == list(expected.ext_fields)
        assert type(request.code) is type(expected.code)
        assert encode(request) == encode(expected)


def test_requests_get_distinct_opaques() -> None:
    prepared, mq = _cases()[0]
    opaques = {build_request(prepared, mq, header_base(SETTINGS)).opaque for _ in range(100)}
    assert len(opaques) == 100


def test_the_born_timestamp_follows_the_clock_millisecond_by_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1_700_000_000_123_456_789]
    monkeypatch.setattr(_send, "_time_ns", lambda: now[0])
    assert born_timestamp() == "1700000000123"
    now[0] += 400_000  # same millisecond
    assert born_timestamp() == "1700000000123"
    now[0] += 600_000
    assert born_timestamp() == "1700000000124"
    now[0] -= 5_000_000  # a clock stepped back is followed too
    assert born_timestamp() == "1700000000119"
