"""One-shot blocking requests to a running broker or NameServer (integration tests only)."""

from __future__ import annotations

from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["consumer_ids", "request"]


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
