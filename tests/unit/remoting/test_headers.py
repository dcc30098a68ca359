"""Typed headers: round trips for every class, Java key names, clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.errors import HeaderFieldError, RequestError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.headers import ALL_HEADERS, CommandHeader, FieldSpec

_VALUES = {
    "str": st.text(max_size=10),
    "i32": st.integers(-(2**31), 2**31 - 1),
    "i64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
}


def _strategy(cls: type[CommandHeader]) -> st.SearchStrategy[Any]:
    def value(spec: FieldSpec) -> st.SearchStrategy[Any]:
        base = _VALUES[spec.kind]
        return st.none() | base if spec.optional else base

    return st.builds(cls, **{spec.name: value(spec) for spec in cls.FIELDS})


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=40)
@given(data=st.data())
def test_every_header_round_trips(cls: type[CommandHeader], data: st.DataObject) -> None:
    original = data.draw(_strategy(cls))
    ext = original.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    assert cls.from_ext_fields(ext) == original
    # unknown keys (C++ ACL keys, RPC hook keys) are ignored
    assert cls.from_ext_fields({**ext, "AccessKey": "", "OnsChannel": "ALIYUN"}) == original


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_missing_required_fields_name_the_key(cls: type[CommandHeader]) -> None:
    required = [spec for spec in cls.FIELDS if spec.required]
    if not required:
        assert isinstance(cls.from_ext_fields({}), cls)
        return
    with pytest.raises(HeaderFieldError) as info:
        cls.from_ext_fields({})
    assert info.value.key == required[0].key
    assert cls.JAVA_NAME in str(info.value)
    assert isinstance(info.value, RequestError)
    assert info.value.code == 29  # INVALID_PARAMETER


def test_java_key_names() -> None:
    keys = {s.name: s.key for s in h.UnregisterClientRequestHeader.FIELDS}
    assert keys["client_id"] == "clientID"
    keys = {s.name: s.key for s in h.PullMessageRequestHeader.FIELDS}
    assert keys["suspend_timeout_millis"] == "suspendTimeoutMillis"
    assert keys["proxy_froward_client_id"] == "proxyFrowardClientId"
    assert {s.key for s in h.RegisterBrokerRequestHeader.FIELDS} >= {"__ZONE_NAME", "bodyCrc32"}
    assert {s.key for s in h.ResetOffsetRequestHeader.FIELDS} >= {"isForce", "queueId"}
    v2_keys = [s.key for s in h.SendMessageRequestHeaderV2.FIELDS]
    assert sorted(v2_keys) == list("abcdefghijklmn")


def test_send_header_v1_and_v2_share_one_shape() -> None:
    java_v2 = {
        "a": "PG",
        "b": "TopicA",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "TAGS\x01a\x02",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    v2 = h.SendMessageRequestHeaderV2.from_ext_fields(java_v2)
    assert isinstance(v2, h.SendMessageRequestHeader)
    assert (v2.topic, v2.queue_id, v2.born_timestamp, v2.batch) == (
        "TopicA",
        3,
        1700000000000,
        False,
    )
    v1 = h.SendMessageRequestHeader.from_ext_fields(
        {
            "producerGroup": "PG",
            "topic": "TopicA",
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "3",
            "sysFlag": "0",
            "bornTimestamp": "1700000000000",
            "flag": "0",
            "properties": "TAGS\x01a\x02",
            "reconsumeTimes": "0",
            "unitMode": "false",
            "batch": "false",
        }
    )
    assert v1.to_v2() == v2
    assert v1.to_v2().to_ext_fields() == java_v2


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("0", False), ("false", False), ("yes", False)],
)
def test_booleans_follow_java_and_accept_cpp_one(text: str, expected: bool) -> None:
    parsed = h.SendMessageRequestHeader.from_ext_fields(
        {
            "producerGroup": "g",
            "topic": "t",
            "defaultTopic": "d",
            "defaultTopicQueueNums": "4",
            "queueId": "0",
            "sysFlag": "0",
            "bornTimestamp": "0",
            "flag": "0",
            "batch": text,
        }
    )
    assert parsed.batch is expected


@pytest.mark.parametrize("value", ["x", "1.5", "", "2147483648", "-2147483649"])
def test_bad_integers_name_the_key(value: str) -> None:
    with pytest.raises(HeaderFieldError, match="queueId"):
        h.GetMinOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": value})


def test_defaults_apply_when_absent() -> None:
    parsed = h.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": "1"})
    assert parsed.committed is True
    reset = h.ResetOffsetRequestHeader.from_ext_fields(
        {"group": "g", "topic": "t", "timestamp": "5", "isForce": "true"}
    )
    assert reset.queue_id == -1
    assert reset.offset is None
    assert reset.to_ext_fields() == {
        "group": "g",
        "topic": "t",
        "timestamp": "5",
        "isForce": "true",
        "queueId": "-1",
    }
