"""The broker's request processors, one module per request family (RocketMQ
``broker/processor``): ``send`` (SEND_MESSAGE, V2, batch, CONSUMER_SEND_MSG_BACK), ``pull``,
``client_manage`` (heartbeat, unregister, client config check), ``consumer_manage`` (consumer
lists, offsets, queue locks), ``query`` (query/view messages, offset queries) and ``admin``
plus ``admin_consumer`` (what ``mqadmin`` needs).

Processors answer synchronously (a ``RemotingCommand``) wherever they can; only SYNC_FLUSH
sends, held pulls and requests that wait on a disk write or a client answer later.
"""

from __future__ import annotations

from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["error", "ok"]


def ok(
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    remark: str | None = None,
) -> RemotingCommand:
    """A SUCCESS response."""
    return RemotingCommand.response(ResponseCode.SUCCESS, remark, ext_fields, body)


def error(code: int, remark: str) -> RemotingCommand:
    """An error response with a remark."""
    return RemotingCommand.response(code, remark)
