"""Decoding of send and pull answers (no sockets)."""

from __future__ import annotations

import zlib

import pytest

from ariane.client._api import decode_pull_response, parse_send_response
from ariane.client.errors import SubscriptionNotExistError, TopicNotExistError
from ariane.client.message import MessageExt, MessageQueue, PullStatus, SendStatus
from ariane.common.message import HostPort
from ariane.common.record import encode_record
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.command import RemotingCommand

MQ = MessageQueue("T", "b", 1)
HOST = HostPort(b"\x7f\x00\x00\x01", 10911)


def _send_answer(code: int, **ext: str) -> RemotingCommand:
    return RemotingCommand.response(code, "why", dict(ext))


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (0, SendStatus.SEND_OK),
        (10, SendStatus.FLUSH_DISK_TIMEOUT),
        (12, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (11, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_stored_answers_become_send_results(code: int, status: SendStatus) -> None:
    answer = _send_answer(
        code, msgId="OFF", queueId="3", queueOffset="77", MSG_REGION="R", TRACE_ON="false"
    )
    result = parse_send_response(answer, MQ, "UNIQ")
    assert result.status is status
    assert (result.msg_id, result.offset_msg_id, result.queue_offset) == ("UNIQ", "OFF", 77)
    assert result.message_queue == MessageQueue("T", "b", 3)  # the broker's queue wins
    assert (result.region_id, result.trace_on, result.transaction_id) == ("R", False, None)


def test_refusals_raise_and_broken_answers_are_protocol_errors() -> None:
    with pytest.raises(TopicNotExistError):
        parse_send_response(_send_answer(17), MQ, "U")
    with pytest.raises(RemoteProtocolError):
        parse_send_response(_send_answer(0, msgId="x"), MQ, "U")


def _pull_answer(code: int, body: bytes | None = None) -> RemotingCommand:
    header = h.PullMessageResponseHeader(
        suggest_which_broker_id=0, next_begin_offset=12, min_offset=0, max_offset=20
    )
    return RemotingCommand.response(code, None, header.to_ext_fields(), body)


def test_found_pulls_carry_decoded_and_inflated_messages() -> None:
    plain = MessageExt("T", b"one", properties={"TAGS": "a"}, store_host=HOST, queue_offset=10)
    packed = MessageExt(
        "T", zlib.compress(b"two" * 2000), sys_flag=0x301, store_host=HOST, queue_offset=11
    )
    result = decode_pull_response(_pull_answer(0, encode_record(plain) + encode_record(packed)))
    assert result.status is PullStatus.FOUND
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (12, 0, 20)
    assert [m.body for m in result.messages] == [b"one", b"two" * 2000]
    assert [m.queue_offset for m in result.messages] == [10, 11]
    assert result.messages[1].sys_flag & 0x1 == 0


@pytest.mark.parametrize(
    ("code", "status"),
    [(19, PullStatus.NO_NEW_MSG), (20, PullStatus.NO_MATCHED_MSG), (21, PullStatus.OFFSET_ILLEGAL)],
)
def test_other_pull_outcomes_are_statuses(code: int, status: PullStatus) -> None:
    result = decode_pull_response(_pull_answer(code))
    assert result.status is status
    assert result.messages == []
    assert result.next_begin_offset == 12


def test_pull_errors_raise() -> None:
    with pytest.raises(SubscriptionNotExistError):
        decode_pull_response(RemotingCommand.response(24, "no sub"))
    with pytest.raises(RemoteProtocolError):
        decode_pull_response(RemotingCommand.response(0, None, {"nextBeginOffset": "x"}))
