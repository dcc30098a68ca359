"""One-shot blocking requests to a running broker or NameServer (integration tests only)."""

from __future__ import annotations

import time

from ariane.broker.transaction import TRANS_SYS_GROUP
from ariane.common.topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import DelayOffsetSerializeWrapper
from ariane.remoting.protocol.bodies import KVTable
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = [
    "consumer_ids",
    "has_route",
    "pull",
    "pull_request",
    "request",
    "send_message",
    "wait_for_route",
]


def request(
    addr: str, code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None
) -> RemotingCommand:
    """Send one request and return the response."""
    with BlockingRemotingClient() as client:
        return client.invoke(addr, RemotingCommand.request(code, ext_fields, body), 5_000)


def consumer_ids(broker_addr: str, group: str) -> list[str]:
    """The client ids of ``group``'s online consumers, as the broker reports them."""
    header = h.GetConsumerListByGroupRequestHeader(consumer_group=group)
    resp = request(broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields())
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return []
    ids = fastjson.loads(resp.body).get("consumerIdList") or []
    return [str(i) for i in ids]


def send_message(
    addr: str,
    topic: str,
    body: bytes,
    *,
    queue_id: int = 0,
    properties: str = "",
    timeout_ms: int = 5_000,
) -> RemotingCommand:
    """One SEND_MESSAGE_V2 (auto-creating the topic from TBW102 with 4 queues)."""
    header = h.SendMessageRequestHeaderV2(
        producer_group="PG_TEST",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=0,
        flag=0,
        properties=properties,
    )
    with BlockingRemotingClient() as client:
        return client.invoke(
            addr,
            RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body),
            timeout_ms,
        )


def pull_request(
    topic: str,
    group: str,
    *,
    queue_id: int = 0,
    offset: int = 0,
    suspend_ms: int = 0,
    max_nums: int = 32,
) -> RemotingCommand:
    """A PULL_MESSAGE request with its own subscription ("*"); SUSPEND when ``suspend_ms``."""
    sys_flag = 0x4 | (0x2 if suspend_ms else 0)
    header = h.PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sys_flag,
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        sub_version=0,
        subscription="*",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


def pull(addr: str, topic: str, group: str, **kwargs: int) -> RemotingCommand:
    """One PULL_MESSAGE and its answer."""
    timeout = kwargs.get("suspend_ms", 0) + 5_000
    with BlockingRemotingClient() as client:
        return client.invoke(addr, pull_request(topic, group, **kwargs), timeout)


def has_route(namesrv_addr: str, topic: str) -> bool:
    """True once the NameServer serves a route for ``topic``."""
    header = h.GetRouteInfoRequestHeader(topic=topic)
    resp = request(namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
    return resp.code == ResponseCode.SUCCESS


def wait_for_route(namesrv_addr: str, topic: str, timeout_s: float = 30.0) -> None:
    """Wait until the NameServer serves ``topic``'s route (a broker registers new topics
    asynchronously, and clients that start before that only find them at their next route
    refresh)."""
    deadline = time.monotonic() + timeout_s
    while not has_route(namesrv_addr, topic):
        if time.monotonic() > deadline:
            raise AssertionError(f"no route for {topic} after {timeout_s} s")
        time.sleep(0.05)


def dispatched(addr: str) -> bool:
    """The broker's reput thread has dispatched everything written so far
    (``dispatchBehindBytes`` is 0): every stored message is in its queue and in the index."""
    r = request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    table = KVTable.decode(r.body or b"").table if r.code == ResponseCode.SUCCESS else {}
    return table.get("dispatchBehindBytes") == "0"


def max_offset(addr: str, topic: str, queue_id: int) -> int:
    """GET_MAX_OFFSET of one queue (-1 when the broker refuses)."""
    r = request(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    return int(r.ext_fields.get("offset", "-1")) if r.code == ResponseCode.SUCCESS else -1


def committed_offset(addr: str, group: str, topic: str, queue_id: int) -> int:
    """The offset ``group`` committed for one queue at the broker (-1 if none)."""
    query = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
    r = request(addr, RequestCode.QUERY_CONSUMER_OFFSET, query)
    return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1


def transaction_checks_settled(addr: str) -> bool:
    """The broker's transaction check has moved past every half message stored so far (no half
    message can be checked or resolved again)."""
    top = max_offset(addr, TRANS_HALF_TOPIC, 0)
    return committed_offset(addr, TRANS_SYS_GROUP, TRANS_HALF_TOPIC, 0) >= top


def delays_drained(addr: str) -> bool:
    """The delay service has delivered every message waiting in every delay level."""
    r = request(addr, RequestCode.GET_ALL_DELAY_OFFSET)
    if r.code != ResponseCode.SUCCESS or not r.body:
        return False
    progress = DelayOffsetSerializeWrapper.decode(r.body).offset_table
    for level in range(1, 19):
        top = max_offset(addr, SCHEDULE_TOPIC, level - 1)
        if top > 0 and progress.get(level, 0) < top:
            return False
    return True
