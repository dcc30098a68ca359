"""The pure parts of the gRPC proxy: message validation and conversion both ways, the settings
reply, status mapping, receipt handles, the queue hash."""

from __future__ import annotations

import gzip
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common import properties as p
from ariane.common.message import HostPort, MessageExt
from ariane.common.pop import ReceiptHandle
from ariane.proxy.config import ProxyConfig
from ariane.proxy.consumer import decode_handle
from ariane.proxy.convert import (
    incoming,
    make_transaction_id,
    message_type_of,
    outgoing,
    parse_transaction_id,
    timestamp_ms,
    to_timestamp,
)
from ariane.proxy.producer import consistent_hash
from ariane.proxy.settings import effective_settings, retry_delay_ms
from ariane.proxy.status import ProxyError, from_remoting, status
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.codes import ResponseCode

CFG = ProxyConfig()
NOW = 1_700_000_000_000


def msg(**sysp: object) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name="T"), body=b"hello")
    m.system_properties.message_id = "ID1"
    for key, value in sysp.items():
        if key == "keys":
            m.system_properties.keys.extend(value)  # type: ignore[arg-type]
        elif key == "delivery_timestamp":
            m.system_properties.delivery_timestamp.CopyFrom(value)  # type: ignore[arg-type]
        else:
            setattr(m.system_properties, key, value)
    return m


def refused(m: pb.Message, cfg: ProxyConfig = CFG) -> ProxyError:
    with pytest.raises(ProxyError) as info:
        outgoing(m, cfg, NOW, "1.2.3.4:5")
    return info.value


def test_outgoing_maps_every_system_property() -> None:
    m = msg(tag="TagA", keys=["k1", "k2"], message_group="g1", trace_context="00-ab")
    m.user_properties["color"] = "red"
    m.system_properties.born_timestamp.CopyFrom(to_timestamp(NOW - 5))
    out = outgoing(m, CFG, NOW, "1.2.3.4:5")
    assert out.topic == "T"
    assert out.body == b"hello"
    assert out.properties == {
        "color": "red",
        p.UNIQ_KEY: "ID1",
        p.TAGS: "TagA",
        p.KEYS: "k1 k2",
        p.SHARDING_KEY: "g1",
        p.TRACE_CONTEXT: "00-ab",
        p.PRODUCER_GROUP: "T",
        p.BORN_HOST: "1.2.3.4:5",
        p.BORN_TIMESTAMP: str(NOW - 5),
    }
    assert out.sys_flag == 0
    assert out.born_timestamp_ms == NOW - 5
    assert out.message_type == pb.FIFO


def test_transaction_and_delay_properties() -> None:
    m = msg(message_type=pb.TRANSACTION)
    m.system_properties.orphaned_transaction_recovery_duration.seconds = 30
    out = outgoing(m, CFG, NOW, "p")
    assert out.sys_flag == 0x4
    assert out.properties[p.TRANSACTION_PREPARED] == "true"
    assert out.properties[p.CHECK_IMMUNITY_TIME_IN_SECONDS] == "30"
    assert out.message_type == pb.TRANSACTION
    m.system_properties.orphaned_transaction_recovery_duration.seconds = 3601
    assert refused(m).code == pb.BAD_REQUEST
    delay = outgoing(msg(delivery_timestamp=to_timestamp(NOW + 1500)), CFG, NOW, "p")
    assert delay.properties[p.TIMER_DELIVER_MS] == str(NOW + 1500)
    assert delay.message_type == pb.DELAY


def test_delivery_time_in_milliseconds_inside_seconds_is_read_as_milliseconds() -> None:
    """rocketmq-python-client 5.1.2 puts epoch ms into Timestamp.seconds."""
    quirky = pb.Message().system_properties.delivery_timestamp
    quirky.seconds = NOW + 30_000
    assert timestamp_ms(quirky) == NOW + 30_000
    proper = to_timestamp(NOW + 30_123)
    assert timestamp_ms(proper) == NOW + 30_123
    out = outgoing(msg(delivery_timestamp=quirky), CFG, NOW, "p")
    assert out.properties[p.TIMER_DELIVER_MS] == str(NOW + 30_000)


@pytest.mark.parametrize(
    ("sysp", "user", "body", "code"),
    [
        ({"tag": "a|b"}, {}, b"x", pb.ILLEGAL_MESSAGE_TAG),
        ({"tag": "  "}, {}, b"x", pb.ILLEGAL_MESSAGE_TAG),
        ({"keys": [" "]}, {}, b"x", pb.ILLEGAL_MESSAGE_KEY),
        ({"message_group": "g" * 64}, {}, b"x", pb.ILLEGAL_MESSAGE_GROUP),
        ({"message_group": "a\x01"}, {}, b"x", pb.ILLEGAL_MESSAGE_GROUP),
        ({}, {"UNIQ_KEY": "x"}, b"x", pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({}, {"k\x00": "v"}, b"x", pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({}, {"k": "v\x02"}, b"x", pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({}, {f"k{i}": "v" for i in range(129)}, b"x", pb.MESSAGE_PROPERTIES_TOO_LARGE),
        ({}, {"k": "v" * 16_384}, b"x", pb.MESSAGE_PROPERTIES_TOO_LARGE),
        ({}, {}, b"", pb.MESSAGE_BODY_EMPTY),
        ({}, {}, b"x" * (4 * 1024 * 1024 + 1), pb.MESSAGE_BODY_TOO_LARGE),
        ({"message_id": " "}, {}, b"x", pb.ILLEGAL_MESSAGE_ID),
        (
            {"delivery_timestamp": to_timestamp(NOW + 86_400_001)},
            {},
            b"x",
            pb.ILLEGAL_DELIVERY_TIME,
        ),
        ({"body_encoding": pb.GZIP}, {}, b"not gzip", pb.MESSAGE_CORRUPTED),
    ],
)
def test_bad_messages_are_refused_with_their_code(
    sysp: dict[str, object], user: dict[str, str], body: bytes, code: int
) -> None:
    m = msg(**sysp)
    m.body = body
    m.user_properties.update(user)
    error = refused(m)
    assert error.code == code
    assert error.message


@pytest.mark.parametrize(
    ("topic", "fragment"),
    [("", "blank"), ("a b", "illegal"), ("x" * 128, "longer"), ("rmq_sys_x", "system"),
     ("SCHEDULE_TOPIC_XXXX", "system")],
)  # fmt: skip
def test_bad_topics(topic: str, fragment: str) -> None:
    m = msg()
    m.topic.name = topic
    error = refused(m)
    assert error.code == pb.ILLEGAL_TOPIC
    assert fragment in error.message


def test_gzip_bodies_are_stored_plain() -> None:
    m = msg(body_encoding=pb.GZIP)
    m.body = gzip.compress(b"payload" * 100)
    assert outgoing(m, CFG, NOW, "p").body == b"payload" * 100


def test_message_type_classification_order() -> None:
    assert message_type_of({}) == pb.NORMAL
    assert message_type_of({p.SHARDING_KEY: "g"}) == pb.FIFO
    assert message_type_of({p.SHARDING_KEY: "g", p.TIMER_DELAY_MS: "5"}) == pb.DELAY
    assert message_type_of({p.TRANSACTION_PREPARED: "true", p.DELAY: "3"}) == pb.TRANSACTION


def stored(**props: str) -> MessageExt:
    return MessageExt(
        topic="T", body=b"payload", properties=dict(props), queue_id=2, queue_offset=7,
        born_timestamp_ms=NOW - 10, born_host=HostPort(b"\x0a\x00\x00\x01", 4000),
        store_timestamp_ms=NOW, store_host=HostPort(b"\x7f\x00\x00\x01", 10911),
        reconsume_times=2, commit_log_offset=1234,
    )  # fmt: skip


def test_incoming_message_has_what_clients_check() -> None:
    ext = stored(
        UNIQ_KEY="U1", TAGS="TagA", KEYS="k1 k2", color="red", TIMER_DELIVER_MS=str(NOW + 5)
    )
    m = incoming(ext, receipt_handle="H", now_ms=NOW)
    s = m.system_properties
    assert m.topic.name == "T"
    assert m.body == b"payload"
    assert dict(m.user_properties) == {"color": "red"}
    assert s.message_id == "U1"
    assert s.tag == "TagA"
    assert list(s.keys) == ["k1", "k2"]
    assert s.body_encoding == pb.IDENTITY
    assert s.body_digest.type == pb.MD5
    assert s.body_digest.checksum == hashlib.md5(b"payload").hexdigest().upper()
    assert s.message_type == pb.DELAY
    assert timestamp_ms(s.delivery_timestamp) == NOW + 5
    assert timestamp_ms(s.born_timestamp) == NOW - 10
    assert timestamp_ms(s.store_timestamp) == NOW
    assert s.born_host == "10.0.0.1:4000"
    assert s.store_host == "127.0.0.1:10911"
    assert (s.queue_id, s.queue_offset, s.delivery_attempt) == (2, 7, 3)
    assert s.receipt_handle == "H"
    plain = incoming(stored())
    assert not plain.system_properties.HasField("tag")
    assert not plain.system_properties.HasField("receipt_handle")
    assert plain.system_properties.message_id == ext.offset_msg_id


@given(
    st.binary(min_size=1, max_size=512),
    st.dictionaries(
        st.text(st.characters(min_codepoint=0x30, max_codepoint=0x7A), min_size=1, max_size=8),
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20),
        max_size=8,
    ),
)
def test_round_trip_keeps_body_and_user_properties(body: bytes, user: dict[str, str]) -> None:
    user = {k: v for k, v in user.items() if k not in p.SYSTEM_KEYS}
    m = msg()
    m.body = body
    m.user_properties.update(user)
    out = outgoing(m, CFG, NOW, "p")
    back = incoming(MessageExt(topic=out.topic, body=out.body, properties=out.properties))
    assert back.body == body
    assert dict(back.user_properties) == user
    assert back.system_properties.message_id == "ID1"


def test_transaction_ids_name_the_half_message() -> None:
    from ariane.common.msgid import create_offset_msg_id

    offset_id = create_offset_msg_id(b"\x7f\x00\x00\x01", 10911, 98765)
    tid = make_transaction_id(offset_id, 42)
    assert parse_transaction_id(tid) == (98765, 42, offset_id)
    for bad in ("", "zz", "ABC-1", f"{offset_id}-x"):
        with pytest.raises(ProxyError) as info:
            parse_transaction_id(bad)
        assert info.value.code == pb.INVALID_TRANSACTION_ID


def test_receipt_handles_round_trip_and_refuse_garbage() -> None:
    h = ReceiptHandle(5, NOW, 30_000, 3, "1", "broker-a", 2, 7, 1234)
    assert ReceiptHandle.decode(h.encode()) == h
    assert h.real_topic("T", "G") == "%RETRY%G_T"
    assert ReceiptHandle(5, NOW, 1, 3, "2", "b", 2, 7, 1).real_topic("T", "G") == "%RETRY%G+T"
    assert h.is_expired(NOW + 30_000)
    assert not h.is_expired(NOW + 29_999)
    for bad in ("", "1 2 3", "a b c d e f g h i"):
        with pytest.raises(ProxyError) as info:
            decode_handle(bad)
        assert info.value.code == pb.INVALID_RECEIPT_HANDLE


def test_settings_reply_for_producers_and_consumers() -> None:
    producer = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(max_body_size=1))
    reply = effective_settings(producer, CFG, None)
    assert reply.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
    assert reply.backoff_policy.max_attempts == 3
    assert reply.publishing.max_body_size == 4 * 1024 * 1024
    assert reply.publishing.validate_message_type
    consumer = pb.Settings(
        client_type=pb.SIMPLE_CONSUMER,
        subscription=pb.Subscription(group=pb.Resource(name="G")),
    )
    group = SubscriptionGroupConfig("G", consume_message_orderly=True, retry_max_times=3)
    reply = effective_settings(consumer, CFG, group)
    assert reply.subscription.fifo
    assert reply.subscription.receive_batch_size == 32
    assert reply.subscription.long_polling_timeout.seconds == 20
    assert reply.backoff_policy.max_attempts == 4
    assert [d.seconds for d in reply.backoff_policy.customized_backoff.next][:3] == [1, 5, 10]
    group.group_retry_policy = {
        "type": "EXPONENTIAL",
        "exponentialRetryPolicy": {"initial": 1000, "max": 8000, "multiplier": 2},
    }
    reply = effective_settings(consumer, CFG, group)
    assert reply.backoff_policy.exponential_backoff.max.seconds == 8
    assert [retry_delay_ms(group, n) for n in range(5)] == [1000, 2000, 4000, 8000, 8000]
    with pytest.raises(ProxyError):
        effective_settings(pb.Settings(client_type=pb.PRODUCER), CFG, None)


def test_status_mapping() -> None:
    assert from_remoting(ResponseCode.SYSTEM_BUSY, "busy").code == pb.TOO_MANY_REQUESTS
    assert from_remoting(ResponseCode.TOPIC_NOT_EXIST, "x").code == pb.TOPIC_NOT_FOUND
    assert from_remoting(ResponseCode.NO_PERMISSION, "x").code == pb.FORBIDDEN
    assert from_remoting(ResponseCode.MESSAGE_ILLEGAL, "x").code == pb.INTERNAL_SERVER_ERROR
    assert from_remoting(1, None).message == "broker answered code 1"
    assert status().message == "OK"
    assert status(pb.MULTIPLE_RESULTS).message == "MULTIPLE_RESULTS"


def test_consistent_hash_is_guavas() -> None:
    # values of Guava's Hashing.consistentHash(input, buckets)
    assert [consistent_hash(i, 1) for i in range(5)] == [0] * 5
    assert consistent_hash(0, 100) == 0
    for key in (1, -1, 123456789, -987654321):
        buckets = [consistent_hash(key, n) for n in range(1, 50)]
        assert all(0 <= b < n for b, n in zip(buckets, range(1, 50), strict=True))
        # adding a bucket moves a key only to the new bucket
        for n in range(1, 49):
            assert buckets[n] in (buckets[n - 1], n)
