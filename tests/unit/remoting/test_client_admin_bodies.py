"""Client and admin bodies: round trips, the C++ dialect, fastjson object keys, and decoders
that raise only RemoteProtocolError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common.hashing import java_string_hash
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    GroupList,
    OffsetWrapper,
    ProducerConnection,
    RemotingConnection,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicOffset,
    TopicStatsTable,
)
from ariane.remoting.protocol.bodies import DataVersion
from ariane.remoting.protocol.client_bodies import (
    CheckClientRequestBody,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    parse_enum,
)

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_cpp_heartbeat_with_integer_enums_and_string_sub_version() -> None:
    body = (
        b'{"clientID":"1.2.3.4@77#DEFAULT","consumerDataSet":[{"consumeFromWhere":4,'
        b'"consumeType":1,"groupName":"G","messageModel":0,"subscriptionDataSet":[{"codeSet":'
        b'[2598969],"subString":"TagA","subVersion":"1700000000001","tagsSet":["TagA"],'
        b'"topic":"T"}]}],"producerDataSet":[{"groupName":"P"}]}\n'
    )
    hb = HeartbeatData.decode(body)
    (consumer,) = hb.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.BROADCASTING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    (sub,) = consumer.subscription_data_set
    assert (sub.sub_version, sub.tags_set, sub.code_set) == (1_700_000_000_001, ["TagA"], [2598969])
    assert hb.producer_data_set == [ProducerData("P")]
    assert HeartbeatData.decode(hb.encode()) == hb


def test_java_heartbeat_with_enum_names() -> None:
    hb = HeartbeatData(
        "c",
        [],
        [ConsumerData("G", ConsumeType.CONSUME_ACTIVELY, MessageModel.CLUSTERING)],
        heartbeat_fingerprint=5,
    )
    raw = json.loads(hb.encode())
    assert raw["consumerDataSet"][0]["consumeType"] == "CONSUME_ACTIVELY"
    assert raw["consumerDataSet"][0]["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    assert HeartbeatData.decode(hb.encode()) == hb


def test_subscription_build() -> None:
    sub = SubscriptionData.build("T", "TagA || TagB ||  ", sub_version=3)
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [java_string_hash("TagA"), java_string_hash("TagB")]
    assert SubscriptionData.build("T", "*").sub_string == "*"
    assert SubscriptionData.build("T", "").tags_set == []
    sql = SubscriptionData.build("T", "a > 1", "sql92")
    assert not sql.is_tag_type


@pytest.mark.parametrize("bad", [True, 9, "NOPE", 1.5, [1]])
def test_parse_enum_rejects(bad: Any) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_enum(MessageModel, bad, "x", MessageModel.CLUSTERING)


def test_parse_enum_accepts_numeric_strings_and_absent() -> None:
    assert parse_enum(MessageModel, "0", "x", MessageModel.CLUSTERING) is MessageModel.BROADCASTING
    assert parse_enum(MessageModel, None, "x", MessageModel.CLUSTERING) is MessageModel.CLUSTERING


def test_lock_bodies_round_trip() -> None:
    req = LockBatchRequestBody("G", "c1", [MQ0, MQ1], True)
    assert LockBatchRequestBody.decode(req.encode()) == req
    resp = LockBatchResponseBody([MQ1])
    assert json.loads(resp.encode()) == {
        "lockOKMQSet": [{"brokerName": "broker-a", "queueId": 1, "topic": "T"}]
    }
    assert LockBatchResponseBody.decode(resp.encode()) == resp
    assert ConsumerListBody.decode(ConsumerListBody(["a", "b"]).encode()).consumer_id_list == [
        "a",
        "b",
    ]


def test_check_client_body() -> None:
    body = CheckClientRequestBody("c", "G", SubscriptionData.build("T", "a", "SQL92"), "ns")
    assert CheckClientRequestBody.decode(body.encode()) == body


def test_message_queue_keyed_bodies_use_fastjson_object_keys() -> None:
    stats = ConsumeStats({MQ0: OffsetWrapper(5, 3, 4, 99)}, 1.5)
    raw = stats.encode()
    assert raw.startswith(b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a"')
    assert ConsumeStats.decode(raw) == stats
    table = TopicStatsTable({MQ0: TopicOffset(0, 7, 123), MQ1: TopicOffset(1, 2, 0)}, 0.25)
    assert TopicStatsTable.decode(table.encode()) == table
    reset = ResetOffsetBody({MQ0: 10, MQ1: 20})
    assert ResetOffsetBody.decode(reset.encode()) == reset
    # Java writes the same with its own key order and bare numbers
    java = b'{"offsetTable":{{"topic":"T","brokerName":"broker-a","queueId":1}:20}}'
    assert ResetOffsetBody.decode(java).offset_table == {MQ1: 20}


def test_reset_offset_body_for_cpp_is_a_list() -> None:
    body = ResetOffsetBodyForC({MQ0: 10})
    assert json.loads(body.encode()) == {
        "offsetTable": [{"brokerName": "broker-a", "offset": 10, "queueId": 0, "topic": "T"}]
    }
    assert ResetOffsetBodyForC.decode(body.encode()) == body


def test_group_and_offset_files_round_trip() -> None:
    cfg = SubscriptionGroupConfig("G", retry_max_times=3, attributes={"k": "v"})
    assert SubscriptionGroupConfig.decode(cfg.encode()) == cfg
    wrapper = SubscriptionGroupWrapper({"G": cfg}, {"G": {"T": 1}}, DataVersion(0, 5, 2))
    assert SubscriptionGroupWrapper.decode(wrapper.encode()) == wrapper
    offsets = ConsumerOffsetSerializeWrapper({"T@G": {0: 5, 3: 9}}, DataVersion(0, 1, 1))
    assert ConsumerOffsetSerializeWrapper.decode(offsets.encode()) == offsets
    # RocketMQ 4.x writes bare numeric queue ids and no dataVersion
    old = ConsumerOffsetSerializeWrapper.decode(b'{"offsetTable":{"T@G":{0:12,1:7}}}')
    assert old.offset_table == {"T@G": {0: 12, 1: 7}}


def test_connection_bodies() -> None:
    conn = ConsumerConnection(
        [RemotingConnection("c", "1.2.3.4:5", "CPP", 400)],
        {"T": SubscriptionData.build("T", "a")},
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    )
    assert ConsumerConnection.decode(conn.encode()) == conn
    assert json.loads(conn.encode())["messageModel"] == "CLUSTERING"
    prod = ProducerConnection([RemotingConnection("p", "h:1", "JAVA", 1)])
    assert ProducerConnection.decode(prod.encode()) == prod
    assert GroupList.decode(GroupList(["b", "a", "a"]).encode()).group_list == ["a", "b"]


DECODERS = [
    HeartbeatData.decode,
    LockBatchRequestBody.decode,
    LockBatchResponseBody.decode,
    ConsumerListBody.decode,
    CheckClientRequestBody.decode,
    ConsumeStats.decode,
    TopicStatsTable.decode,
    ResetOffsetBody.decode,
    ResetOffsetBodyForC.decode,
    SubscriptionGroupConfig.decode,
    SubscriptionGroupWrapper.decode,
    ConsumerOffsetSerializeWrapper.decode,
    ConsumerConnection.decode,
    ProducerConnection.decode,
    GroupList.decode,
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["topic", "queueId", "brokerName", "x"]), children, max_size=3
        )
    ),
    max_leaves=6,
)
keys = st.sampled_from(
    ["clientID", "consumerDataSet", "producerDataSet", "mqSet", "offsetTable", "groupName",
     "subscriptionDataSet", "consumeType", "lockOKMQSet", "connectionSet", "subVersion",
     "subscriptionGroupTable", "topic", "queueId", "subscriptionData", "consumerIdList"]
)  # fmt: skip


@given(st.sampled_from(DECODERS), st.dictionaries(keys, json_values, max_size=3))
def test_decoders_raise_only_protocol_errors_on_odd_json(decode: Any, obj: dict[str, Any]) -> None:
    try:
        decode(fastjson.dumps(obj))
    except RemoteProtocolError:
        pass


@given(st.sampled_from(DECODERS), st.binary(max_size=64))
def test_decoders_raise_only_protocol_errors_on_bytes(decode: Any, data: bytes) -> None:
    try:
        decode(data)
    except RemoteProtocolError:
        pass
