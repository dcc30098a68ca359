"""Every decoder a peer can reach, fed hostile input: it answers a value or its documented
error, never another exception (a broker or NameServer turns the documented errors into an
INVALID_PARAMETER answer; anything else would be a SYSTEM_ERROR and an error log).

Each decoder gets its own hypothesis budget (the test is parametrized per decoder), over three
kinds of input: random bytes, random JSON documents, and valid encodings with bytes flipped,
cut or appended.
"""

from __future__ import annotations

import inspect
import json
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.broker.config import load_properties
from ariane.common.batch import decode_batch
from ariane.common.javaprops import parse_properties
from ariane.common.properties import decode_properties
from ariane.errors import ConfigError, CorruptionError, HeaderFieldError, RemoteProtocolError
from ariane.remoting.protocol import admin_bodies, bodies, client_bodies, route, stats_bodies
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.headers._base import CommandHeader
from tests.helpers import register_broker_command

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
_FIELDS = st.sampled_from(
    ["topic", "brokerName", "brokerAddr", "clusterName", "queueId", "topicConfigTable",
     "dataVersion", "queueDatas", "brokerDatas", "table", "perm", "readQueueNums",
     "consumerDataSet", "subscriptionDataSet", "mqSet", "offsetTable", "brokerAddrs", "key"]
)  # fmt: skip
#: JSON documents shaped like our bodies (known keys), so decoders get past the first check.
_SHAPED = st.dictionaries(_FIELDS, _JSON, max_size=6)


@st.composite
def _mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "append", "insert"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut" and data:
            data = data[: draw(st.integers(0, len(data) - 1))]
        elif kind == "append":
            data += draw(st.binary(max_size=16))
        elif data:
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


def _inputs(valid: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=200),
        _JSON.map(lambda v: json.dumps(v).encode()),
        _SHAPED.map(lambda v: json.dumps(v).encode()),
        _mutated(valid),
    )


def _json_decoders() -> list[tuple[str, Callable[[bytes], object], bytes]]:
    """Every ``decode(body)`` classmethod of the body modules, with a valid encoding."""
    found = []
    for module in (bodies, route, admin_bodies, client_bodies, stats_bodies):
        for name, cls in sorted(vars(module).items()):
            decode = getattr(cls, "decode", None)
            if not inspect.isclass(cls) or cls.__module__ != module.__name__ or decode is None:
                continue
            if len(inspect.signature(decode).parameters) != 1:
                continue
            valid = b"{}"
            try:
                valid = cls().encode()
            except Exception:  # needs arguments: start from an empty document
                pass
            found.append((f"{module.__name__.rsplit('.', 1)[1]}.{name}", decode, valid))
    return found


_REGISTER = register_broker_command()
_REGISTER_ZIP = register_broker_command(compressed=True)

DECODERS: list[tuple[str, Callable[[bytes], object], bytes]] = [
    *_json_decoders(),
    (
        "RegisterBrokerBody(json)",
        lambda b: bodies.RegisterBrokerBody.decode(b, False, 0),
        _REGISTER.body or b"",
    ),
    (
        "RegisterBrokerBody(zlib)",
        lambda b: bodies.RegisterBrokerBody.decode(b, True, 0),
        _REGISTER_ZIP.body or b"",
    ),
    (
        "RegisterBrokerBody(zlib raw)",
        lambda b: bodies.RegisterBrokerBody.decode(zlib.compress(b), True, 0),
        b"",
    ),
    ("decode_batch", decode_batch, b""),
]
#: What the decoders may raise for bad input (their documented errors).
EXPECTED = (RemoteProtocolError, CorruptionError)


def test_the_registry_covers_the_network_decoders() -> None:
    names = {name for name, _, _ in DECODERS}
    for wanted in ("route.TopicRouteData", "bodies.KVTable", "RegisterBrokerBody(json)",
                   "client_bodies.HeartbeatData", "admin_bodies.ResetOffsetBody"):  # fmt: skip
        assert wanted in names


@pytest.mark.parametrize(("name", "decode", "valid"), DECODERS, ids=[d[0] for d in DECODERS])
def test_body_decoders_refuse_bad_input_cleanly(
    name: str, decode: Callable[[bytes], object], valid: bytes
) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_inputs(valid))
    def check(data: bytes) -> None:
        try:
            decode(data)
        except EXPECTED:
            pass

    check()


def _header_classes() -> list[type[CommandHeader]]:
    return sorted(
        (
            cls
            for cls in vars(h).values()
            if inspect.isclass(cls) and issubclass(cls, CommandHeader) and cls is not CommandHeader
        ),
        key=lambda c: c.__name__,
    )


_VALUES = st.one_of(
    st.sampled_from(["", "0", "-1", "1", "2147483648", "9223372036854775808", "true", "x", "1.5"]),
    st.text(max_size=12),
)


@pytest.mark.parametrize("cls", _header_classes(), ids=lambda c: c.__name__)
def test_headers_refuse_bad_fields_cleanly(cls: type[CommandHeader]) -> None:
    known = sorted(cls().to_ext_fields()) if _buildable(cls) else []
    keys = st.sampled_from(known) if known else st.just("topic")

    @settings(max_examples=8, deadline=None)
    @given(st.dictionaries(keys | st.text(max_size=6), _VALUES, max_size=8))
    def check(ext: dict[str, str]) -> None:
        try:
            header = cls.from_ext_fields(ext)
        except HeaderFieldError:
            return
        header.to_ext_fields()  # a decoded header encodes again

    check()


def _buildable(cls: type[Any]) -> bool:
    try:
        cls()
    except TypeError:
        return False
    return True


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_update_config_properties_parse_or_refuse(text: str) -> None:
    props = parse_properties(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
    try:
        load_properties(props)
    except ConfigError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_message_properties_decode_anything(text: str) -> None:
    props = decode_properties(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
