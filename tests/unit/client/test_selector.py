"""Queue selectors: Java-compatible hashing for sharding keys."""

from __future__ import annotations

import pytest

from ariane.client._selector import (
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    apply_selector,
    java_hash_code,
)
from ariane.client.message import Message, MessageQueue

QUEUES = [MessageQueue("T", "a", i) for i in range(4)] + [
    MessageQueue("T", "b", i) for i in range(3)
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("TagA", 2598919),  # String.hashCode, protocol notes D.7
        ("hello", 99162322),
        ("", 0),
        ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
        (7, 7),
        (-3, -3),
        (2**40 + 5, 261),  # Long.hashCode: (int)(v ^ v >>> 32)
        (-(2**40), -256),  # unsigned shift of a negative long
        (True, 1231),
        (b"ab", 31 * (31 + 97) + 98),  # Arrays.hashCode
    ],
)
def test_java_hash_code(value: object, expected: int) -> None:
    assert java_hash_code(value) == expected


def test_hash_selector_uses_java_remainder_then_abs() -> None:
    selector = SelectMessageQueueByHash()
    msg = Message("T", b"x")
    # "TagA": 2598919 % 7 == 0 ; Java: abs(h % n)
    assert selector.select(QUEUES, msg, "TagA") == QUEUES[2598919 % 7]
    # a negative hash: Java's % keeps the sign, then abs
    h = java_hash_code("polygenelubricants")
    assert selector.select(QUEUES, msg, "polygenelubricants") == QUEUES[abs(h) % 7]
    assert selector.select(QUEUES, msg, -9) == QUEUES[2]


def test_same_key_same_queue() -> None:
    selector = SelectMessageQueueByHash()
    msg = Message("T", b"x")
    picks = {selector.select(QUEUES, msg, f"order-{i % 3}") for i in range(30)}
    assert len(picks) <= 3


def test_random_selector_and_plain_functions() -> None:
    import random

    msg = Message("T", b"x")
    selector = SelectMessageQueueByRandom(random.Random(3))
    picked = {apply_selector(selector, QUEUES, msg, None) for _ in range(200)}
    assert picked == set(QUEUES)
    assert apply_selector(lambda mqs, m, arg: mqs[arg], QUEUES, msg, 5) == QUEUES[5]


def test_a_selector_must_return_a_queue() -> None:
    with pytest.raises(TypeError):
        apply_selector(lambda mqs, m, arg: 3, QUEUES, Message("T", b"x"), None)
