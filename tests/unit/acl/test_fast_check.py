"""The compiled request calls of the ACL (``acl_sign_request``: the client's signer,
``acl_fast_check``: the broker hook's fast path, in ``_speedups_acl.h``) against their pure
twins ``credentials.sign_request_py`` / ``validator.fast_check_py``, and the bound
``sign_request`` / ``fast_check`` / ``request_signer`` of whichever build runs (also run with
``ARIANE_PURE=1``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.acl.credentials import (
    SessionCredentials,
    request_signer,
    sign_request,
    sign_request_py,
    signing_key,
)
from ariane.acl.validator import FastKey, fast_check, fast_check_py, fast_key
from ariane.common import native
from ariane.remoting.protocol.command import RemotingCommand

SECRET = b"bench-secret"


def _compiled(name: str) -> Callable[..., Any]:
    twin = getattr(native.speedups, name, None)
    if twin is None:
        pytest.skip(f"no compiled {name} ({native.build_name()})")
    return twin  # type: ignore[no-any-return]


def _rocketmq(ext: dict[str, str], body: bytes | None, secret: bytes) -> str:
    content = "".join(v for k, v in sorted(ext.items()) if k != "Signature").encode()
    digest = hmac.new(secret, content + (body or b""), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


_text = st.text(max_size=20)
_keys = st.sampled_from(["a", "b", "g", "topic", "consumerGroup", "AccessKey", "SecurityToken"])
_ext = st.dictionaries(st.one_of(_keys, _text), _text, max_size=12)
_body = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=200, deadline=None)
@given(_ext, _body, _text, st.one_of(st.none(), _text))
def test_sign_request_is_the_pure_signer(
    ext: dict[str, str], body: bytes | None, access_key: str, token: str | None
) -> None:
    sign_ = _compiled("acl_sign_request")
    key = signing_key(SECRET)
    compiled = RemotingCommand(code=310, ext_fields=dict(ext), body=body)
    pure = RemotingCommand(code=310, ext_fields=dict(ext), body=body)
    assert sign_(key, access_key, token, compiled) is None
    sign_request_py(key, access_key, token, pure)
    assert compiled.ext_fields == pure.ext_fields
    assert list(compiled.ext_fields) == list(pure.ext_fields)  # the same fields added in order
    expected = {**ext, "AccessKey": access_key}
    if token is not None:
        expected["SecurityToken"] = token
    assert pure.ext_fields == {**expected, "Signature": _rocketmq(expected, body, SECRET)}


def test_sign_request_raises_what_the_pure_one_raises() -> None:
    sign_ = _compiled("acl_sign_request")
    key = signing_key(SECRET)
    bad: list[object] = [
        object(),  # no ext_fields
        RemotingCommand(code=310, ext_fields={"a": 1}, body=None),  # type: ignore[dict-item]
        RemotingCommand(code=310, ext_fields={"a": "\ud800"}, body=None),  # not UTF-8
        RemotingCommand(code=310, ext_fields={}, body="text"),  # type: ignore[arg-type]
    ]
    for request in bad:
        with pytest.raises(Exception) as pure:
            sign_request_py(key, "ak", None, request)  # type: ignore[arg-type]
        with pytest.raises(type(pure.value)):
            sign_(key, "ak", None, request)
    with pytest.raises(TypeError):
        sign_(b"not a key", "ak", None, RemotingCommand(code=310))


_codes = st.sampled_from([310, 320, 11, 10, 34, 36])
_field = st.one_of(st.none(), st.sampled_from(["ak", "other", "T", "%RETRY%g", "g", ""]))


def _request_ext(code: int, ak: str | None, topic: str | None, group: str | None) -> dict[str, str]:
    ext = {"z": "1", "b": "B", "topic": "P", "consumerGroup": "C"}  # overwritten below
    for name, value in (
        ("AccessKey", ak),
        ("b", topic),
        ("topic", topic),
        ("consumerGroup", group),
    ):
        if value is None:
            ext.pop(name, None)
        else:
            ext[name] = value
    return ext


@settings(max_examples=300, deadline=None)
@given(
    _codes,
    _field,
    _field,
    _field,
    st.sampled_from(["right", "wrong", "none", "absent", "other-key"]),
    st.sampled_from(["signed", "unsigned", "tampered"]),
    _body,
)
def test_fast_check_is_the_pure_fast_path(
    code: int,
    ak: str | None,
    topic: str | None,
    group: str | None,
    grant: str,
    signed: str,
    body: bytes | None,
) -> None:
    check = _compiled("acl_fast_check")
    ext = _request_ext(code, ak, topic, group)
    if signed != "unsigned":
        ext["Signature"] = _rocketmq(ext, body, SECRET)
    if signed == "tampered":
        ext["z"] = "2"
    key = signing_key(SECRET)
    grants: dict[FastKey, Any] = {}
    need = fast_key(code, ext)
    if need is not None and grant != "absent":
        value = {"right": key, "wrong": signing_key(b"x"), "none": None}.get(grant)
        other: FastKey = (code, "someone", "T", None)
        grants[other if grant == "other-key" else need] = value
    expected = fast_check_py(grants, code, ext, body)
    assert check(grants, code, ext, body) is expected
    assert check(grants, code, MappingProxyType(ext), body) is expected
    if need is None:
        assert expected is False
    elif grant in ("absent", "other-key"):
        assert expected is None
    else:
        assert expected is (grant == "right" and signed == "signed")


def test_bound_calls_sign_and_check_a_send() -> None:
    """Whichever build runs: a signed send verifies on the fast path once its grant is known."""
    signer = request_signer(SessionCredentials("ak", SECRET.decode(), "tok"))
    request = RemotingCommand(code=310, ext_fields={"b": "T", "a": "x"}, body=b"body")
    signer(request)
    fields = {"b": "T", "a": "x", "AccessKey": "ak", "SecurityToken": "tok"}
    assert request.ext_fields == {**fields, "Signature": _rocketmq(fields, b"body", SECRET)}
    key = signing_key(SECRET)
    grants: dict[FastKey, Any] = {}
    assert fast_check(grants, 310, request.ext_fields, b"body") is None
    grants[(310, "ak", "T", None)] = key
    assert fast_check(grants, 310, request.ext_fields, b"body") is True
    assert fast_check(grants, 310, request.ext_fields, b"other") is False
    assert fast_check(grants, 34, request.ext_fields, b"body") is False
    other = RemotingCommand(code=310)
    sign_request(key, "ak", None, other)
    assert other.ext_fields == {
        "AccessKey": "ak",
        "Signature": _rocketmq({"AccessKey": "ak"}, None, SECRET),
    }
