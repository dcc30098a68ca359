import pytest

from ariane.common.topics import (
    dlq_topic,
    is_system_topic,
    retry_topic,
    validate_group,
    validate_topic,
)
from ariane.errors import InvalidArgumentError


def test_names() -> None:
    assert retry_topic("g") == "%RETRY%g"
    assert dlq_topic("g") == "%DLQ%g"
    assert is_system_topic("TBW102")
    assert is_system_topic("rmq_sys_x")
    assert not is_system_topic("TopicTest")


@pytest.mark.parametrize("topic", ["", "a b", "a/b", "x" * 128, "中文"])
def test_illegal_topics(topic: str) -> None:
    with pytest.raises(InvalidArgumentError):
        validate_topic(topic)


def test_legal_topics_and_groups() -> None:
    validate_topic("Topic_Test-1|%")
    validate_topic("%RETRY%" + "g" * 200)
    validate_group("GID_x")
    with pytest.raises(InvalidArgumentError):
        validate_group("g" * 121)


@pytest.mark.parametrize("name", ["Evil\n", "Evil\r\n", "a\nb", "\nEvil", "Evil\x00", "Evil "])
def test_names_are_validated_whole(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        validate_topic(name)
    with pytest.raises(InvalidArgumentError):
        validate_group(name)
