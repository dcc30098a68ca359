"""Helpers for tests of the gRPC 5.x protocol (issue 16): typed topics and reading back what a
gRPC client sent through the remoting protocol."""

from __future__ import annotations

import hashlib

from ariane.common.message import MessageExt
from ariane.common.record import decode_records
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.support.rpc import pull, request

__all__ = ["body_of", "create_topic", "pull_all"]


def body_of(i: int, size: int) -> bytes:
    """The body the compat producer scripts send as message ``i`` (same function)."""
    seed = hashlib.sha256(f"body-{i}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def create_topic(broker_addr: str, topic: str, message_type: str | None, queues: int = 4) -> None:
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
    resp = request(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def pull_all(
    broker_addr: str, topic: str, queues: int, group: str = "CG_CHECK"
) -> list[MessageExt]:
    """Every message of ``topic`` (remoting PULL_MESSAGE, queue by queue, in offset order)."""
    out: list[MessageExt] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            resp = pull(broker_addr, topic, group, queue_id=queue_id, offset=offset, max_nums=32)
            if resp.code != ResponseCode.SUCCESS:
                break
            msgs = decode_records(resp.body or b"", decompress=True)
            if not msgs:
                break
            out.extend(msgs)
            offset = msgs[-1].queue_offset + 1
    return out
