"""Helpers for tests of the gRPC 5.x protocol (issue 16): typed topics and reading back what a
gRPC client sent through the remoting protocol."""

from __future__ import annotations

import hashlib

from ariane.acl.credentials import SessionCredentials, sign_fields
from ariane.common.message import MessageExt
from ariane.common.record import decode_records
from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.support.rpc import pull_request, request

__all__ = ["body_of", "create_group", "create_topic", "pull_all"]


def body_of(i: int, size: int) -> bytes:
    """The body the compat producer scripts send as message ``i`` (same function)."""
    seed = hashlib.sha256(f"body-{i}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _signed(
    signed_by: tuple[str, str] | None, ext: dict[str, str], body: bytes | None
) -> dict[str, str]:
    if signed_by is not None:
        sign_fields(ext, body, SessionCredentials(*signed_by))
    return ext


def create_topic(
    broker_addr: str,
    topic: str,
    message_type: str | None,
    queues: int = 4,
    signed_by: tuple[str, str] | None = None,
) -> None:
    """Create ``topic`` with ``message.type`` (None: no attribute)."""
    header = h.CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
        attributes=f"+message.type={message_type}" if message_type else None,
    )
    ext = _signed(signed_by, header.to_ext_fields(), None)
    resp = request(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def pull_all(
    broker_addr: str,
    topic: str,
    queues: int,
    group: str = "CG_CHECK",
    signed_by: tuple[str, str] | None = None,
) -> list[MessageExt]:
    """Every message of ``topic`` (remoting PULL_MESSAGE, queue by queue, in offset order)."""
    out: list[MessageExt] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            command = pull_request(topic, group, queue_id=queue_id, offset=offset, max_nums=32)
            _signed(signed_by, command.ext_fields, None)
            with BlockingRemotingClient() as client:
                resp = client.invoke(broker_addr, command, 5_000)
            if resp.code != ResponseCode.SUCCESS:
                break
            msgs = decode_records(resp.body or b"", decompress=True)
            if not msgs:
                break
            out.extend(msgs)
            offset = msgs[-1].queue_offset + 1
    return out


def create_group(
    broker_addr: str, group: str, *, orderly: bool = False, retry_max: int = 16
) -> None:
    """Create or update a consumer group (FIFO with ``orderly``)."""
    config = SubscriptionGroupConfig(
        group, consume_message_orderly=orderly, retry_max_times=retry_max
    )
    resp = request(
        broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.encode()
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
