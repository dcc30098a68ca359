"""Custom headers of the 5.x POP consumption family (remoting form)."""

from __future__ import annotations

from ariane.remoting.protocol.headers._base import I32, I64, CommandHeader, header

__all__ = [
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "NotificationRequestHeader",
    "NotificationResponseHeader",
    "PeekMessageRequestHeader",
    "PollingInfoRequestHeader",
    "PollingInfoResponseHeader",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
]


@header()
class PopMessageRequestHeader(CommandHeader):
    """POP_MESSAGE (200050); ``queue_id`` -1 means every queue of the topic."""

    consumer_group: str
    topic: str
    queue_id: I32
    max_msg_nums: I32
    invisible_time: I64
    poll_time: I64
    born_time: I64
    init_mode: I32
    exp_type: str | None = None
    exp: str | None = None
    order: bool = False
    attempt_id: str | None = None


@header()
class PopMessageResponseHeader(CommandHeader):
    """Answer to POP_MESSAGE."""

    pop_time: I64
    invisible_time: I64
    revive_qid: I32
    rest_num: I64
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@header()
class AckMessageRequestHeader(CommandHeader):
    """ACK_MESSAGE (200051)."""

    consumer_group: str
    topic: str
    queue_id: I32
    extra_info: str
    offset: I64


@header()
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053)."""

    consumer_group: str
    topic: str
    queue_id: I32
    extra_info: str
    offset: I64
    invisible_time: I64


@header()
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    """Answer to CHANGE_MESSAGE_INVISIBLETIME."""

    pop_time: I64
    invisible_time: I64
    revive_qid: I32


@header()
class PeekMessageRequestHeader(CommandHeader):
    """PEEK_MESSAGE (200052)."""

    topic: str
    queue_id: I32
    max_msg_nums: I32
    consumer_group: str


@header()
class NotificationRequestHeader(CommandHeader):
    """NOTIFICATION (200054)."""

    consumer_group: str
    topic: str
    queue_id: I32
    poll_time: I64
    born_time: I64
    order: bool = False
    attempt_id: str | None = None


@header()
class NotificationResponseHeader(CommandHeader):
    """Answer to NOTIFICATION."""

    has_msg: bool = False
    polling_full: bool = False


@header()
class PollingInfoRequestHeader(CommandHeader):
    """POLLING_INFO (200055)."""

    consumer_group: str
    topic: str
    queue_id: I32


@header()
class PollingInfoResponseHeader(CommandHeader):
    """Answer to POLLING_INFO."""

    polling_num: I32
