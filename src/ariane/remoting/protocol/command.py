"""The RemotingCommand model (RocketMQ ``RemotingCommand``, ``LanguageCode``, ``SerializeType``).

A command is one frame on a remoting connection: a request (flag bit 0 clear) or a response (bit 0
set), optionally one-way (bit 1). Requests carry a ``RequestCode``, responses a ``ResponseCode``;
a response repeats the ``opaque`` of its request. ``ext_fields`` is the flat string map RocketMQ
calls the custom header; ``ariane.remoting.protocol.headers`` gives typed views of it.

Nothing here does I/O; ``codec`` turns commands into bytes and back.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "CURRENT_VERSION",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "LanguageCode",
    "MQVersion",
    "RemotingCommand",
    "SerializeType",
    "make_response_for",
    "next_opaque",
]

#: flag bit 0: the command is a response.
FLAG_RESPONSE = 0b01
#: flag bit 1: a one-way request; no response will be sent.
FLAG_ONEWAY = 0b10


class LanguageCode(IntEnum):
    """Implementation language of the sender (``LanguageCode.java``); JSON carries the name."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(IntEnum):
    """How the header is serialised: the top byte of the frame's header-length word."""

    JSON = 0
    ROCKETMQ = 1


class MQVersion(IntEnum):
    """Ordinals of RocketMQ's ``MQVersion.Version`` that servers compare against (A.8)."""

    V3_0_7_SNAPSHOT = 28
    V3_0_11 = 37
    V3_1_8_SNAPSHOT = 62
    V3_1_8 = 63
    V3_4_9 = 121
    V4_0_0 = 213
    V4_1_0_SNAPSHOT = 232
    V4_6_0 = 333
    V4_9_4 = 401
    V5_0_0 = 413
    V5_3_1 = 475
    V5_3_3 = 479


#: The version we put in every command we create: RocketMQ 5.3.3, so peers enable modern paths
#: (standard route JSON, SQL92 pull, heartbeat v2) and GO_AWAY notices.
CURRENT_VERSION = int(MQVersion.V5_3_3)

_OPAQUE_MASK = 0x7FFFFFFF
_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """A fresh request id: a process-wide counter kept non-negative, as RocketMQ does."""
    return next(_opaque_counter) & _OPAQUE_MASK


@dataclass(slots=True, eq=True)
class RemotingCommand:
    """One request or response.

    Attributes:
        code: request code for requests, response code for responses.
        language: the sender's implementation language.
        version: the sender's ``MQVersion`` ordinal.
        opaque: request id; a response carries the opaque of its request.
        flag: bit 0 = response, bit 1 = one-way.
        remark: free text; the error description on error responses.
        ext_fields: the custom header, a flat ``str -> str`` map (Java field names as keys).
        body: the payload, ``None`` when the frame has none.
        serialize_type: how the header is (or will be) serialised on the wire.
    """

    code: int
    language: LanguageCode = LanguageCode.PYTHON
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        remark: str | None = None,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A new request with a fresh opaque.

        Args:
            code: the request code (``RequestCode``).
            ext_fields: the custom header (e.g. ``SomeHeader(...).to_ext_fields()``).
            body: the payload.
            remark: optional remark (END_TRANSACTION carries text here).
            serialize_type: header serialisation to use on the wire.
        """
        return cls(
            code=code,
            opaque=next_opaque(),
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=serialize_type,
        )

    @classmethod
    def response(
        cls,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        opaque: int = 0,
    ) -> RemotingCommand:
        """A new response; the server fills in ``opaque`` and the serialisation from the request.

        Args:
            code: the response code (``ResponseCode``).
            remark: error text or ``None``.
            ext_fields: the custom header of the response.
            body: the payload.
            opaque: the request's opaque, when sending outside a server dispatch.
        """
        return cls(
            code=code,
            opaque=opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
        )

    @property
    def is_response(self) -> bool:
        """Whether flag bit 0 is set (C++ 1.2.4 answers server requests with flag 3)."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Whether this is a one-way request (flag bit 1)."""
        return bool(self.flag & FLAG_ONEWAY)

    def mark_oneway(self) -> RemotingCommand:
        """Set the one-way bit and return ``self``."""
        self.flag |= FLAG_ONEWAY
        return self

    def mark_response(self) -> RemotingCommand:
        """Set the response bit and return ``self``."""
        self.flag |= FLAG_RESPONSE
        return self

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """A response to this request (same opaque and serialisation)."""
        return make_response_for(self, code, remark, ext_fields, body)

    def describe(self) -> str:
        """A short one-line summary for logs (no body bytes)."""
        kind = "response" if self.is_response else "request"
        body_len = 0 if self.body is None else len(self.body)
        return (
            f"{kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"lang={self.language.name} ver={self.version} body={body_len}B"
        )


def make_response_for(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    """A response to ``request``: same opaque, same header serialisation, response bit set.

    Args:
        request: the request being answered.
        code: the response code (``ResponseCode``).
        remark: error text or ``None``.
        ext_fields: the custom header of the response.
        body: the payload.
    """
    return RemotingCommand(
        code=code,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=ext_fields if ext_fields is not None else {},
        body=body,
        serialize_type=request.serialize_type,
    )
