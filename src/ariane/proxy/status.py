"""gRPC ``Status`` values and how broker outcomes map onto them (RocketMQ proxy's
``ResponseBuilder`` and ``GrpcProxyException``).

Errors of the v2 protocol travel in-band: every unary answer and every receive/pull stream
carries ``Status{code, message}`` and the gRPC call itself ends OK. ``ProxyError`` is raised
anywhere in the proxy with the code to answer; ``from_remoting`` maps a broker response code
the way the Java proxy does (only a few codes have their own v2 code; NO_PERMISSION,
MESSAGE_ILLEGAL and SYSTEM_ERROR all become INTERNAL_SERVER_ERROR) except that Ariane keeps
the broker's remark, so the client sees why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ariane.acl.hook import ACL_EXCEPTION
from ariane.errors import ArianeError
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.remoting.protocol.codes import ResponseCode

__all__ = ["Code", "ProxyError", "code_name", "from_remoting", "overall_status", "status"]

Code = pb.Code


class ProxyError(ArianeError):
    """A request the proxy answers with a non-OK status.

    Attributes:
        code: the ``apache.rocketmq.v2.Code`` value.
        message: the text for ``Status.message``.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ProxyError({code_name(self.code)}, {self.message!r})"


def code_name(code: int) -> str:
    """The enum name of ``code`` (its number when unknown)."""
    try:
        return pb.Code.Name(code)  # type: ignore[arg-type]
    except ValueError:
        return str(code)


def status(code: int = pb.OK, message: str | None = None) -> pb.Status:
    """A ``Status``; the message defaults to the code's name (as the Java proxy sends)."""
    return pb.Status(code=code, message=message if message is not None else code_name(code))  # type: ignore[arg-type]


_REMOTING: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.POLLING_FULL: pb.TOO_MANY_REQUESTS,
    ResponseCode.QUERY_NOT_FOUND: pb.OFFSET_NOT_FOUND,
}


def from_remoting(code: int, remark: str | None) -> ProxyError:
    """The error a broker response ``code`` (not SUCCESS) becomes.

    NO_PERMISSION is FORBIDDEN here (the Java proxy says INTERNAL_SERVER_ERROR): the broker uses
    it for a topic or broker that may not be written or read, which is what FORBIDDEN means to
    the clients; ACL refusals (the AclException remark) are UNAUTHORIZED, as upstream.
    """
    if remark and remark.startswith(ACL_EXCEPTION):
        return ProxyError(pb.UNAUTHORIZED, remark)
    mapped = _REMOTING.get(code, pb.INTERNAL_SERVER_ERROR)
    return ProxyError(mapped, remark or f"broker answered code {code}")


class _HasStatus(Protocol):
    @property
    def status(self) -> pb.Status: ...


def overall_status(entries: Sequence[_HasStatus]) -> pb.Status:
    """The top-level status of a multi-entry answer: the entries' common status, or
    MULTIPLE_RESULTS when they differ (INTERNAL_SERVER_ERROR when there are none)."""
    if not entries:
        return status(pb.INTERNAL_SERVER_ERROR, "no result entry")
    if len({e.status.code for e in entries}) == 1:
        return status(entries[0].status.code, entries[0].status.message)
    return status(pb.MULTIPLE_RESULTS)
