"""The send request's bytes on the wire: ``build_request`` against the copy-and-assign form it
replaced (kept here as the reference), field by field and byte for byte; and the head a single
send's frame gets in one call (``send_head``, compiled and pure) against ``build_request`` +
``encode``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from ariane.client._send_head import (
    SEND_MIDDLE,
    SEND_SUFFIX,
    send_head,
    send_head_prefix,
    send_head_py,
)
from ariane.client.message import Message, MessageQueue
from ariane.common import native
from ariane.common.msgid import UniqueIdGenerator
from ariane.errors import LocalProtocolError
from ariane.remoting.protocol.codec import MAX_FRAME_BYTES, encode, encode_parts
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


# -- the head of a single send's frame in one call (send_head) --------------------------------

_HEADS: list[Any] = [send_head_py]
if native.speedups is not None:
    _HEADS.append(native.speedups.send_head)
_BASES = [header_base(SETTINGS), {"a": "G", "c": "T0", "d": "8", "x": "y"}, {}]
_Head = Callable[..., bytes | None]


def test_the_compiled_build_takes_the_compiled_head() -> None:
    assert send_head is (send_head_py if native.speedups is None else native.speedups.send_head)


def _head_of(
    head: _Head, request: RemotingCommand, prepared: PreparedSend, queue: int, **kw: Any
) -> bytes | None:
    base = {k: v for k, v in request.ext_fields.items() if k not in "befghi"}
    args: dict[str, Any] = {
        "prefix": send_head_prefix(base),
        "topic": prepared.topic,
        "queue_id": queue,
        "sys_flag": prepared.sys_flag,
        "born": request.ext_fields["g"],
        "flag": prepared.flag,
        "properties": prepared.properties,
        "opaque": request.opaque,
        "body_length": len(prepared.body),
        "max_frame_bytes": MAX_FRAME_BYTES,
    }
    args.update(kw)
    if args["prefix"] is None:
        return None  # a fixed field that is not UTF-8: the producer never takes send_head
    return head(
        args["prefix"], args["topic"], args["queue_id"], args["sys_flag"], args["born"],
        args["flag"], args["properties"], SEND_MIDDLE, args["opaque"], SEND_SUFFIX,
        args["body_length"], args["max_frame_bytes"],
    )  # fmt: skip


def _single(prepared: PreparedSend) -> bool:
    return (
        not prepared.batch and not prepared.reconsume_times and prepared.max_reconsume_times is None
    )


@pytest.mark.parametrize("head", _HEADS)
@pytest.mark.parametrize("base", _BASES)
def test_the_head_is_the_encoded_request_head_byte_for_byte(
    head: _Head, base: dict[str, str]
) -> None:
    singles = [(p, mq) for p, mq in _cases() if _single(p)]
    assert len(singles) == 6
    for prepared, mq in singles:
        request = build_request(prepared, mq, base)
        expected = _reference(prepared, mq, base)
        expected.ext_fields["g"] = request.ext_fields["g"]
        expected.opaque = request.opaque
        got = _head_of(head, request, prepared, mq.queue_id)
        assert got is not None
        assert got + prepared.body == encode(request) == encode(expected)
        assert (got, prepared.body) == encode_parts(request)


_TEXT = st.text(st.characters(), max_size=40)  # controls, quotes, backslashes, non-BMP, surrogates
_INT = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**70), 2**70))


@settings(max_examples=300, deadline=None)
@given(
    group=_TEXT,
    topic=_TEXT,
    born=_TEXT,
    properties=_TEXT,
    queue_id=_INT,
    sys_flag=_INT,
    flag=_INT,
    opaque=st.integers(0, 2**31 - 1),
)
def test_generated_heads_match_the_encoder_or_are_refused_by_both(
    group: str,
    topic: str,
    born: str,
    properties: str,
    queue_id: int,
    sys_flag: int,
    flag: int,
    opaque: int,
) -> None:
    base = header_base(SendSettings(group=group))
    prepared = PreparedSend(topic, b"body", sys_flag, flag, properties, "id")
    request = build_request(prepared, MessageQueue(topic, "b", queue_id), base)
    request.ext_fields["g"] = born
    request.ext_fields["e"] = str(queue_id)  # build_request takes the queue's id as it is
    request.opaque = opaque
    heads = [_head_of(h, request, prepared, queue_id) for h in _HEADS]
    try:
        expected: bytes | None = encode_parts(request)[0]
    except LocalProtocolError:  # a lone surrogate (group, topic...): not UTF-8
        expected = None
    if expected is not None and max(abs(queue_id), abs(sys_flag), abs(flag)) >= 2**63:
        expected = None  # past 64 bits: left to the generic path
    assert heads == [expected] * len(_HEADS)


@pytest.mark.parametrize("head", _HEADS)
def test_what_the_head_does_not_take_is_refused(head: _Head) -> None:
    prepared, mq = _cases()[0]
    request = build_request(prepared, mq, header_base(SETTINGS))
    full = _head_of(head, request, prepared, mq.queue_id)
    assert full is not None
    frame = len(full) + len(prepared.body)
    assert _head_of(head, request, prepared, mq.queue_id, max_frame_bytes=frame) == full
    refused: list[dict[str, Any]] = [
        {"max_frame_bytes": frame - 1},  # the frame limit, length field included
        {"body_length": 2**31},
        {"body_length": -1},
        {"topic": "T\ud800"},  # not UTF-8
        {"properties": b"p"},
        {"flag": True},  # not exactly an int: the generic path formats it
        {"queue_id": 1.0},
        {"opaque": 2**63},
        {"sys_flag": -(2**63) - 1},
    ]
    for change in refused:
        assert _head_of(head, request, prepared, mq.queue_id, **change) is None, change
    with pytest.raises(LocalProtocolError):
        encode_parts(request, max_frame_bytes=frame - 1)
    extremes = {"opaque": 2**63 - 1, "sys_flag": -(2**63), "flag": 0}
    got = _head_of(head, request, prepared, mq.queue_id, **extremes)
    assert got is not None
    assert b'"f":"-9223372036854775808"' in got
    assert got.endswith(b'"opaque":9223372036854775807' + SEND_SUFFIX)
