"""QUERY_CONSUME_QUEUE bodies: Java's JSON shape, round trips, bad input (issue 20 queryCq)."""

from __future__ import annotations

import pytest

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol.client_bodies import SubscriptionData
from ariane.remoting.protocol.queue_bodies import ConsumeQueueData, QueryConsumeQueueResponseBody

#: as a Java broker answers (fastjson, alphabetical keys, a subscription and ext data)
JAVA = (
    b'{"filterData":"{}","maxQueueIndex":12,"minQueueIndex":2,"queueData":['
    b'{"eval":false,"physicOffset":4096,"physicSize":180,"tagsCode":65},'
    b'{"bitMap":"1010","eval":true,"extendDataJson":"{\\"tagsCode\\":66}",'
    b'"msg":"Cq extend not exist!addr: -1","physicOffset":4276,"physicSize":181,"tagsCode":-1}],'
    b'"subscriptionData":{"classFilterMode":false,"codeSet":[65],"expressionType":"TAG",'
    b'"subString":"A","subVersion":1,"tagsSet":["A"],"topic":"T"}}'
)


def test_decodes_a_java_answer() -> None:
    body = QueryConsumeQueueResponseBody.decode(JAVA)
    assert (body.max_queue_index, body.min_queue_index, body.filter_data) == (12, 2, "{}")
    assert body.queue_data == [
        ConsumeQueueData(4096, 180, 65),
        ConsumeQueueData(
            4276, 181, -1, True, '{"tagsCode":66}', "1010", "Cq extend not exist!addr: -1"
        ),
    ]
    assert body.subscription_data is not None
    assert (body.subscription_data.topic, body.subscription_data.sub_string) == ("T", "A")


def test_round_trip() -> None:
    body = QueryConsumeQueueResponseBody(
        5,
        0,
        [ConsumeQueueData(0, 100, 7, eval=True), ConsumeQueueData(100, 90, 8, msg="gone")],
        SubscriptionData.build("T", "A || B"),
        "TAG: A || B",
    )
    again = QueryConsumeQueueResponseBody.decode(body.encode())
    assert again == body
    empty = QueryConsumeQueueResponseBody(3, 1)
    assert empty.encode() == b'{"maxQueueIndex":3,"minQueueIndex":1,"queueData":[]}'
    assert QueryConsumeQueueResponseBody.decode(empty.encode()) == empty


@pytest.mark.parametrize(
    "raw",
    [b"[]", b'{"queueData":{}}', b'{"queueData":[1]}', b'{"maxQueueIndex":"x"}', b"{", b""],
)
def test_bad_bodies_raise_protocol_errors(raw: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        QueryConsumeQueueResponseBody.decode(raw)
