"""BrokerStatsData and ConsumeStatsList: RocketMQ's JSON, round trips, hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.admin_bodies import ConsumeStats, OffsetWrapper
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, BrokerStatsItem, ConsumeStatsList

# as a Java broker writes them (fastjson: MessageQueue keys are objects)
JAVA_STATS = b'{"statsDay":{"avgpt":1.0,"sum":60,"tps":0.0006944444444444445},"statsHour":{"avgpt":1.0,"sum":60,"tps":0.016666666666666666},"statsMinute":{"avgpt":10.0,"sum":60,"tps":1.0}}'
JAVA_LIST = (
    b'{"brokerAddr":"10.0.0.1:10911","consumeStatsList":[{"G":[{"consumeTps":1.5,"offsetTable":'
    b'{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":7,'
    b'"lastTimestamp":1700000000000,"pullOffset":0}}}]},{"H":[]}],"totalDiff":3,"totalInflightDiff":-7}'
)


def test_java_bodies_decode() -> None:
    data = BrokerStatsData.decode(JAVA_STATS)
    assert data.stats_minute == BrokerStatsItem(60, 1.0, 10.0)
    assert data.stats_day.sum == 60
    assert BrokerStatsData.decode(data.encode()) == data
    csl = ConsumeStatsList.decode(JAVA_LIST)
    assert csl.broker_addr == "10.0.0.1:10911"
    assert csl.total_diff == 3
    assert csl.total_inflight_diff == -7
    (cs,) = csl.consume_stats_list[0]["G"]
    assert cs.offset_table[MessageQueue("T", "b", 0)].consumer_offset == 7
    assert csl.consume_stats_list[1] == {"H": []}
    again = ConsumeStatsList.decode(csl.encode())
    assert again == csl
    assert b'{{"brokerName":"b","queueId":0,"topic":"T"}:' in csl.encode()  # Java can read it


def test_defaults_and_numeric_strings() -> None:
    assert BrokerStatsData.decode(b"{}") == BrokerStatsData()
    data = BrokerStatsData.decode(b'{"statsMinute":{"sum":"5","tps":"0.5","avgpt":2}}')
    assert data.stats_minute == BrokerStatsItem(5, 0.5, 2.0)
    assert ConsumeStatsList.decode(b"{}") == ConsumeStatsList()
    stats = ConsumeStats({MessageQueue("T", "b", 1): OffsetWrapper(1, 2, 3, 4)}, 0.5)
    body = ConsumeStatsList([{"G": [stats]}], "a:1", 9, 1).encode()
    assert ConsumeStatsList.decode(body).consume_stats_list == [{"G": [stats]}]


@pytest.mark.parametrize(
    "body",
    [
        b"[]", b'{"statsMinute":[]}', b'{"statsMinute":{"tps":true}}', b'{"statsMinute":{"sum":"x"}}',
        b'{"consumeStatsList":{}}', b'{"consumeStatsList":[1]}', b'{"consumeStatsList":[{"G":{}}]}',
        b'{"consumeStatsList":[{"G":[1]}]}', b'{"totalDiff":"many"}', b"\xff",
    ],
)  # fmt: skip
def test_bad_bodies_raise_protocol_errors(body: bytes) -> None:
    list_body = b"consumeStatsList" in body or b"totalDiff" in body
    decode = ConsumeStatsList.decode if list_body else BrokerStatsData.decode
    with pytest.raises(RemoteProtocolError):
        decode(body)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_protocol_errors(body: bytes) -> None:
    for decode in (BrokerStatsData.decode, ConsumeStatsList.decode):
        try:
            decode(body)
        except RemoteProtocolError:
            pass


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                        ["statsMinute", "sum", "tps", "consumeStatsList", "G", "offsetTable",
                         "totalDiff", "brokerAddr"]), inner, max_size=4), max_leaves=12))  # fmt: skip
def test_arbitrary_json_raises_only_protocol_errors(value: object) -> None:
    body = fastjson.dumps(value)
    for decode in (BrokerStatsData.decode, ConsumeStatsList.decode):
        try:
            decode(body)
        except RemoteProtocolError:
            pass
