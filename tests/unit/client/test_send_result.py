"""``send_result`` (``_speedups_client.h``), the compiled parse of a send's common answer,
against ``parse_send_response``, its twin and reference: the same ``SendResult`` field by field
(types included) whenever it answers, and None for everything it leaves to the parse."""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.client._api import parse_send_response
from ariane.client._send_head import send_result
from ariane.client.message import MessageQueue, SendResult, SendStatus
from ariane.common import native
from ariane.remoting.protocol.command import RemotingCommand

pytestmark = pytest.mark.skipif(
    send_result is None, reason="the pure build: parse_send_response alone runs"
)

MQ = MessageQueue("T", "broker-a", 3)
_FIELDS = ("status", "msg_id", "offset_msg_id", "message_queue", "queue_offset")
_FIELDS += ("transaction_id", "region_id", "trace_on")


def _both(code: int, ext: dict[str, Any], mq: MessageQueue = MQ) -> tuple[Any, Any]:
    assert send_result is not None
    fast = send_result(SendResult, SendStatus.SEND_OK, code, ext, mq, mq.queue_id, "UNIQ")
    try:
        pure: Any = parse_send_response(RemotingCommand.response(code, None, ext), mq, "UNIQ")
    except Exception as exc:  # the parse refuses: send_result must have answered None
        pure = exc
    return fast, pure


def _same(fast: SendResult, pure: SendResult) -> None:
    assert fast == pure
    for name in _FIELDS:
        assert type(getattr(fast, name)) is type(getattr(pure, name)), name


def test_the_compiled_build_has_it() -> None:
    assert native.speedups is not None
    assert send_result is native.speedups.send_result


def test_the_common_answer_is_built_in_one_call() -> None:
    ext = {"msgId": "7F000001000022B8", "queueId": "3", "queueOffset": "12345"}
    extras: list[dict[str, str]] = [
        {},
        {"MSG_REGION": "R1", "TRACE_ON": "false"},
        {"transactionId": "TX"},
        {"queueOffset": "-12", "queueId": "003"},
        {"queueOffset": "999999999999999999"},
    ]
    for extra in extras:
        fast, pure = _both(0, {**ext, **extra})
        assert isinstance(fast, SendResult)
        _same(fast, pure)
        assert fast.message_queue is MQ
    fast, _ = _both(0, {**ext, "MSG_REGION": "", "TRACE_ON": "true"})
    assert (fast.region_id, fast.trace_on, fast.transaction_id) == ("DefaultRegion", True, None)


@dataclass(frozen=True)
class _QueueWithDict(MessageQueue):  # no slots of its own: its instances have a __dict__
    pass


def test_the_result_is_out_of_the_cyclic_collector_when_it_cannot_be_in_a_cycle() -> None:
    """A kept future's result costs full collections nothing (issue 18); a result whose queue
    has an instance dict (it could reach the result back) stays tracked, as the parse's do."""
    assert send_result is not None
    ext = {"msgId": "7F000001000022B8", "queueId": "3", "queueOffset": "12345"}
    fast, pure = _both(0, ext)
    assert not gc.is_tracked(fast)
    assert gc.is_tracked(pure)
    refs = sys.getrefcount(MQ)
    del fast  # freed by reference counting like any other object
    assert sys.getrefcount(MQ) == refs - 1
    odd = _QueueWithDict("T", "broker-a", 3)
    kept = send_result(SendResult, SendStatus.SEND_OK, 0, ext, odd, 3, "UNIQ")
    assert isinstance(kept, SendResult)
    assert kept.message_queue is odd
    assert gc.is_tracked(kept)


def test_what_it_leaves_to_the_parse() -> None:
    ext = {"msgId": "M", "queueId": "3", "queueOffset": "7"}
    left = [
        (10, ext),  # FLUSH_DISK_TIMEOUT: another status
        (13, {}),  # a refusal: the parse raises
        (0, {**ext, "queueId": "4"}),  # another queue
        (0, {"msgId": "M", "queueOffset": "7"}),  # no queue id: the parse raises
        (0, {**ext, "queueOffset": "x"}),
        (0, {**ext, "queueOffset": "+7"}),  # int() takes it, the compiled parse does not
        (0, {**ext, "queueOffset": "1234567890123456789"}),  # 19 digits
        (0, {"queueId": "3", "queueOffset": "7"}),  # no msgId
    ]
    for code, answer in left:
        fast, _ = _both(code, answer)
        assert fast is None, (code, answer)


_DIGITS = st.from_regex(r"-?[0-9]{1,20}", fullmatch=True)
_VALUE = st.one_of(_DIGITS, st.text(max_size=8), st.sampled_from(["false", "true", "", "3"]))
_KEYS = ["msgId", "queueId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON", "x"]


@settings(max_examples=400, deadline=None)
@given(
    code=st.sampled_from([0, 0, 0, 1, 10, 11, 12, 13, 2**40]),
    ext=st.dictionaries(st.sampled_from(_KEYS), _VALUE),
    queue_id=st.integers(-3, 5),
)
def test_generated_answers_give_the_parse_result_or_none(
    code: int, ext: dict[str, str], queue_id: int
) -> None:
    mq = MessageQueue("T", "b", queue_id)
    fast, pure = _both(code, ext, mq)
    if fast is not None:
        assert isinstance(pure, SendResult)
        _same(fast, pure)
        assert fast.message_queue is mq
