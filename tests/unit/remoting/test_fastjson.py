"""The fastjson dialect: what Java and C++ peers write and read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.errors import LocalProtocolError, RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.fastjson import ObjectKey, _Parser


def lenient(text: str) -> Any:
    """Force the fallback parser (orjson would take standard JSON)."""
    return _Parser(text).parse_document()


def test_bare_numeric_keys_read_as_strings() -> None:
    data = b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"x":{-1:2}}'
    assert fastjson.loads(data) == {
        "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"},
        "x": {"-1": 2},
    }


def test_object_keys_read_as_object_key() -> None:
    data = b'{"offsetTable":{{"brokerName":"b1","queueId":0,"topic":"T"}:{"brokerOffset":10}}}'
    table = fastjson.loads(data)["offsetTable"]
    ((key, value),) = table.items()
    assert isinstance(key, ObjectKey)
    assert key.as_dict() == {"brokerName": "b1", "queueId": 0, "topic": "T"}
    assert value == {"brokerOffset": 10}
    assert key == ObjectKey.of({"brokerName": "b1", "queueId": 0, "topic": "T"})


def test_fastjson_reader_leniencies() -> None:
    assert fastjson.loads("{a:'x', 'b':\"y\", c: [1, 2.5, true, null,]}") == {
        "a": "x",
        "b": "y",
        "c": [1, 2.5, True, None],
    }
    assert fastjson.loads('"\\x41\\u00e9\\ud83d\\ude00\\/"') == "Aé😀/"
    assert fastjson.loads('"\\ud800x"') == "\ufffdx"  # a lone surrogate is replaced
    assert fastjson.loads(b'{"a":1}\x00') == {"a": 1}
    assert fastjson.loads(b'"\xff"') == "\ufffd"  # bad UTF-8 is replaced, as Java does


@pytest.mark.parametrize(
    "text",
    ['{"a":1} x', "{", "[1,2", '{"a" 1}', "'abc", '"\\q"', '"\\u12"', "nul", "{[}", ""],
)
def test_malformed_json_raises_protocol_error(text: str) -> None:
    with pytest.raises(RemoteProtocolError):
        fastjson.loads(text)


def test_deep_nesting_is_refused_cleanly() -> None:
    with pytest.raises(RemoteProtocolError):
        fastjson.loads("{a:" * 5000 + "1" + "}" * 5000)
    with pytest.raises(LocalProtocolError):
        fastjson.dumps(_nest(5000), bare_int_keys=True)


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@dataclass(frozen=True)
class MQ:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> Any:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


def test_dumps_quotes_int_keys_and_writes_object_keys_like_fastjson() -> None:
    assert fastjson.dumps({"brokerAddrs": {0: "a"}}) == b'{"brokerAddrs":{"0":"a"}}'
    assert fastjson.dumps({0: "a", 1: {2: 3}}, bare_int_keys=True) == b'{0:"a",1:{2:3}}'
    body = fastjson.dumps({"offsetTable": {MQ("T", "b", 1): 5}})
    assert body == b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:5}}'
    back = fastjson.loads(body)["offsetTable"]
    assert back == {ObjectKey.of(MQ("T", "b", 1).to_json()): 5}
    assert fastjson.dumps({"offsetTable": back}) == body
    assert fastjson.dumps({"s": {1, 2}, "q": MQ("T", "b", 0)}).startswith(b'{"s":[')


def test_dumps_rejects_unknown_objects() -> None:
    with pytest.raises(LocalProtocolError):
        fastjson.dumps({"x": object()})
    with pytest.raises(LocalProtocolError):
        fastjson.dumps({(1, 2): 1})


def test_dumps_falls_back_for_values_orjson_cannot_write() -> None:
    assert json.loads(fastjson.dumps({"big": 10**30, "s": "\ud800"})) == {
        "big": 10**30,
        "s": "\ud800",
    }


_text = st.text(max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_fallback_parser_agrees_with_standard_json(value: Any) -> None:
    text = json.dumps(value)
    assert lenient(text) == value
    assert lenient(json.dumps(value, indent=1)) == value
    assert fastjson.loads(fastjson.dumps(value)) == value


@given(st.text(max_size=60))
def test_arbitrary_text_raises_only_protocol_error(text: str) -> None:
    try:
        fastjson.loads(text)
    except RemoteProtocolError:
        pass


@given(st.binary(max_size=60))
def test_arbitrary_bytes_raise_only_protocol_error(data: bytes) -> None:
    try:
        fastjson.loads(data)
    except RemoteProtocolError:
        pass
