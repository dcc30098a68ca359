"""The head of a single send's frame in one call (the client's side of RocketMQ's
``RemotingCommand.encode`` for ``SEND_MESSAGE_V2``; issue 18).

How it works: ``build_request`` + ``encode_parts`` build a header dict, a ``RemotingCommand``
and then serialise the dict, yet a producer's single sends differ only in the topic, queue id,
sysFlag, born timestamp, flag, properties and opaque. ``send_head_prefix`` writes the rest once
per producer (the code and the producer's fixed ``extFields``, in ``build_request``'s key order)
and ``send_head`` writes the length field, the header word and the whole JSON header from the
varying fields: the compiled ``_speedups.send_head`` (``_speedups_client.h``), or
``send_head_py`` here, its twin and reference. Both give the bytes of ``encode_parts(
build_request(...))`` for a single, non-retry send (``tests/unit/client/test_send_wire.py``
pins them) and answer None for what they do not take (a str that is not UTF-8, a non-int,
a header or frame over its limit): the caller then takes the generic path, which encodes
or raises its error.

The answer: ``send_result`` is the compiled ``_speedups.send_result`` (the ``SendResult`` of a
common SUCCESS answer in one call, None for anything else) or None in the pure build; the
reference, and what runs whenever it answers None, is ``_api.parse_send_response``
(``tests/unit/client/test_send_result.py`` compares both).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, cast

import orjson

from ariane.client.message import MessageQueue, SendResult, SendStatus
from ariane.common import native
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import CURRENT_VERSION, LanguageCode

__all__ = [
    "SEND_MIDDLE",
    "SEND_SUFFIX",
    "send_head",
    "send_head_prefix",
    "send_head_py",
    "send_result",
]

#: the header between the ``extFields`` object and the opaque
SEND_MIDDLE = b'},"flag":0,"language":"%s","opaque":' % LanguageCode.PYTHON.name.encode()
#: the header after the opaque
SEND_SUFFIX = b',"serializeTypeCurrentRPC":"JSON","version":%d}' % CURRENT_VERSION

_PREFIX = struct.Struct(">iI")  # length, header word (serialisation type 0: JSON)
_INT64 = 2**63
_INT32_MAX = 2**31 - 1
_dumps = orjson.dumps


def send_head_prefix(base: dict[str, str]) -> bytes | None:
    """The header's bytes up to the topic for a producer whose ``header_base`` is ``base``;
    None when a value is not UTF-8 (its sends then take the generic path, which refuses it)."""
    try:
        fixed = _dumps(base)[:-1] + b"," if base else b"{"
    except orjson.JSONEncodeError:
        return None
    return b'{"code":%d,"extFields":' % RequestCode.SEND_MESSAGE_V2 + fixed


def send_head_py(
    prefix: bytes,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born: str,
    flag: int,
    properties: str,
    middle: bytes,
    opaque: int,
    suffix: bytes,
    body_length: int,
    max_frame_bytes: int,
) -> bytes | None:
    """Length field, header word and JSON header of one single send, or None (see above)."""
    if not (type(topic) is str and type(born) is str and type(properties) is str):
        return None
    for value in (queue_id, sys_flag, flag, opaque):
        if type(value) is not int or not -_INT64 <= value < _INT64:
            return None
    try:
        header = b"".join(
            (
                prefix,
                b'"b":',
                _dumps(topic),
                b',"e":"%d","f":"%d","g":' % (queue_id, sys_flag),
                _dumps(born),
                b',"h":"%d","i":' % flag,
                _dumps(properties),
                middle,
                b"%d" % opaque,
                suffix,
            )
        )
    except orjson.JSONEncodeError:  # a str that is not UTF-8 (a lone surrogate)
        return None
    length = 4 + len(header) + body_length
    if (
        len(header) > 0xFFFFFF
        or not 0 <= body_length <= _INT32_MAX
        or length > _INT32_MAX - 4
        or length + 4 > max_frame_bytes
    ):
        return None
    return _PREFIX.pack(length, len(header)) + header


_SendHead = Callable[
    [bytes, str, int, int, str, int, str, bytes, int, bytes, int, int], bytes | None
]


def _pick() -> _SendHead:
    fast = getattr(native.speedups, "send_head", None)  # None: pure build, or an older .so
    return send_head_py if fast is None else cast(_SendHead, fast)


#: ``send_head_py`` or its compiled twin
send_head: _SendHead = _pick()

_SendResult = Callable[
    [type[SendResult], SendStatus, int, dict[str, str], MessageQueue, int, str],
    SendResult | None,
]
_fast_result: Any = getattr(native.speedups, "send_result", None)
#: ``send_result(SendResult, SendStatus.SEND_OK, code, ext_fields, mq, mq.queue_id, msg_id)``:
#: the compiled parse of a common answer (None: ``parse_send_response`` decides); None in the
#: pure build
send_result: _SendResult | None = cast(_SendResult | None, _fast_result)
