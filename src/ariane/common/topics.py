"""Special topics and groups, and the name rules of ``TopicValidator``."""

from __future__ import annotations

import re

from ariane.errors import InvalidArgumentError

__all__ = [
    "AUTO_CREATE_TOPIC",
    "DLQ_PREFIX",
    "RETRY_PREFIX",
    "SCHEDULE_TOPIC",
    "TIMER_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "dlq_topic",
    "is_system_topic",
    "retry_topic",
    "validate_group",
    "validate_topic",
]

AUTO_CREATE_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: Where timer messages wait (RocketMQ 5's ``TimerMessageStore.TIMER_TOPIC``).
TIMER_TOPIC = "rmq_sys_wheel_timer"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TRACE_TOPIC,
        BENCHMARK_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

TOPIC_MAX_LENGTH = 127
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255
GROUP_MAX_LENGTH = 120
#: the whole name (``fullmatch``: ``$`` alone would accept a trailing newline)
_NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]+")


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``."""
    return DLQ_PREFIX + group


def is_system_topic(topic: str) -> bool:
    """True for RocketMQ's reserved topics."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def validate_topic(topic: str) -> None:
    """Raise ``InvalidArgumentError`` unless ``topic`` is a legal topic name."""
    if not topic:
        raise InvalidArgumentError("topic name is empty")
    limit = (
        RETRY_OR_DLQ_TOPIC_MAX_LENGTH
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX))
        else TOPIC_MAX_LENGTH
    )
    if len(topic) > limit:
        raise InvalidArgumentError(f"topic name longer than {limit} characters: {topic[:40]!r}...")
    if not _NAME_RE.fullmatch(topic):
        raise InvalidArgumentError(f"topic name has illegal characters: {topic!r}")


def validate_group(group: str) -> None:
    """Raise ``InvalidArgumentError`` unless ``group`` is a legal group name."""
    if not group:
        raise InvalidArgumentError("group name is empty")
    if len(group) > GROUP_MAX_LENGTH:
        raise InvalidArgumentError(f"group name longer than {GROUP_MAX_LENGTH} characters")
    if not _NAME_RE.fullmatch(group):
        raise InvalidArgumentError(f"group name has illegal characters: {group!r}")
