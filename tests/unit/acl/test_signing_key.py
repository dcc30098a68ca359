"""The OpenSSL twin of the ACL signature (``acl_hmac_key`` / ``acl_sign`` / ``acl_verify`` in
``ariane._speedups``, ``_speedups_acl.h``) against the pure twins over ``hmac`` keys, and the
bound ``signing_key`` / ``content_signature`` / ``verify_signature`` of whichever build runs
(also run with ``ARIANE_PURE=1``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.acl import credentials
from ariane.acl.credentials import (
    canonical_text_py,
    content_signature,
    content_signature_py,
    hmac_key,
    signing_key,
    verify_signature,
    verify_signature_py,
)
from ariane.common import native


def _openssl() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    twins = [getattr(native.speedups, n, None) for n in ("acl_hmac_key", "acl_sign", "acl_verify")]
    if None in twins:
        pytest.skip(f"no OpenSSL ACL twin ({native.build_name()})")
    key, sign_, verify = twins
    assert key is not None
    assert sign_ is not None
    assert verify is not None
    return key, sign_, verify


def _rocketmq(ext: dict[str, str], body: bytes | None, secret: bytes, skip: str | None) -> str:
    """Base64(HmacSHA1(secret, values in key order but Signature and skip, then body))."""
    left_out = {"Signature", skip}
    content = "".join(v for k, v in sorted(ext.items()) if k not in left_out).encode()
    return base64.b64encode(
        hmac.new(secret, content + (body or b""), hashlib.sha1).digest()
    ).decode()


_text = st.text(max_size=30)  # every code point but lone surrogates
_keys = st.sampled_from(
    ["AccessKey", "Signature", "SecurityToken", "a", "b", "g", "topic", "uniqueKeyQuery", "é",
     "\U0001f600"]
)  # fmt: skip
# bodies across SHA-1's 64-byte blocks and hashlib's 2,048-byte GIL threshold
_bodies = st.one_of(
    st.none(),
    st.binary(max_size=200),
    st.integers(2000, 6200).map(lambda n: bytes(i % 251 for i in range(n))),
)
# secrets shorter than, as long as and longer than SHA-1's 64-byte block (hashed first)
_secrets = st.one_of(st.binary(max_size=70), st.integers(60, 200).map(lambda n: b"k" * n))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.one_of(_keys, _text), _text, max_size=12),
    _bodies,
    st.one_of(st.none(), _keys),
    _secrets,
)
def test_openssl_signature_is_byte_for_byte_the_pure_one(
    ext: dict[str, str], body: bytes | None, skip: str | None, secret: bytes
) -> None:
    make_key, sign_, _ = _openssl()
    got = sign_(ext, body, make_key(secret), skip)
    assert got == content_signature_py(ext, body, hmac_key(secret), skip)
    assert got == _rocketmq(ext, body, secret, skip)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.one_of(_keys, _text), _text, max_size=10),
    _bodies,
    _secrets,
    st.sampled_from(["right", "absent", "empty", "other", "tampered", "short", "long", "é"]),
)
def test_openssl_verify_answers_what_the_pure_one_answers(
    ext: dict[str, str], body: bytes | None, secret: bytes, how: str
) -> None:
    make_key, _, verify = _openssl()
    right = _rocketmq(ext, body, secret, None)
    forms = {
        "right": right,
        "empty": "",
        "other": _rocketmq(ext, (body or b"") + b"!", secret, None),
        "tampered": right[:-2] + ("A=" if right[-2] != "A" else "B="),
        "short": right[:-1],
        "long": right + "A",
        "é": right[:-1] + "é",
    }
    ext = {k: v for k, v in ext.items() if k != "Signature"}
    if how != "absent":
        ext["Signature"] = forms[how]
    expected = how == "right"
    assert verify(ext, body, make_key(secret)) is expected
    assert verify_signature_py(ext, body, hmac_key(secret)) is expected


def test_openssl_twin_raises_what_the_pure_one_raises() -> None:
    make_key, sign_, verify = _openssl()
    key, pure_key = make_key(b"12345678"), hmac_key("12345678")
    bad: list[tuple[object, object]] = [
        ({"a": "x", "b": 7}, b"x"),  # a value that is not a str
        ({"a": "\ud800"}, b"x"),  # a lone surrogate: not UTF-8
        ({"a": "\ud800", "b": 1}, b"x"),  # TypeError first, as "".join
        ({"a": "x", 1: "y"}, b"x"),  # keys that do not sort together
        ({"a": "x"}, "text"),  # a body that is not bytes-like
    ]
    for ext, body in bad:
        with pytest.raises(Exception) as pure:
            content_signature_py(ext, body, pure_key)  # type: ignore[arg-type]
        with pytest.raises(type(pure.value)):
            sign_(ext, body, key, None)
        with pytest.raises(type(pure.value)):
            verify({**ext, "Signature": "x" * 28}, body, key)  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        sign_({"a": "x"}, None, b"not a key", None)  # a key from elsewhere
    with pytest.raises(TypeError):
        make_key("a str")  # acl_hmac_key takes the secret's bytes


def test_bound_functions_match_the_build() -> None:
    key = signing_key("12345678")
    ext = {"b": "2", "a": "1", "AccessKey": "rocketmq2"}
    assert content_signature(ext, b"body", key, None) == _rocketmq(ext, b"body", b"12345678", None)
    assert content_signature(ext, b"body", key, "a") == _rocketmq(ext, b"body", b"12345678", "a")
    assert verify_signature(
        {**ext, "Signature": _rocketmq(ext, b"body", b"12345678", None)}, b"body", key
    )
    assert not verify_signature(ext, b"body", key)
    assert canonical_text_py(ext) == b"rocketmq212"
    if getattr(native.speedups, "acl_sign", None) is not None:
        assert credentials.verify_signature is native.speedups.acl_verify  # type: ignore[union-attr]
        assert isinstance(key, bytes)
    else:
        assert isinstance(key, hmac.HMAC)
    if isinstance(key, bytes):
        assert signing_key(b"12345678") == key  # str or its UTF-8: the same schedule


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.one_of(_keys, _text), _text, min_size=0, max_size=70),
    st.one_of(st.none(), _keys),
)
def test_openssl_signature_takes_any_mapping_and_size(
    ext: dict[str, str], skip: str | None
) -> None:
    """Exact dicts of up to 48 str keys take the compiled sort; larger ones, dict subclasses
    and other mappings the generic one: the same bytes either way."""
    make_key, sign_, verify = _openssl()
    key = make_key(b"secret")
    expected = _rocketmq(ext, b"body", b"secret", skip)
    reversed_dict = dict(reversed(list(ext.items())))  # insertion order does not matter
    for form in (ext, reversed_dict, OrderedDict(ext), MappingProxyType(ext)):
        assert sign_(form, b"body", key, skip) == expected
    signed = {**ext, "Signature": _rocketmq(ext, b"body", b"secret", "Signature")}
    assert verify(signed, b"body", key)
    assert verify(MappingProxyType(signed), b"body", key)


# keys that share a long prefix, or differ only after a NUL or at the end (the compiled sort
# compares first characters, then the bytes), mixed with non-ASCII ones; values around the 512 bytes
# the compiled twin gathers per SHA-1 update, ASCII or not
_close_keys = st.text(alphabet="aAb\0é", min_size=0, max_size=11).map(
    lambda t: ("prefix12" + t) if len(t) % 2 else t
)
_long_values = st.one_of(
    _text,
    st.integers(0, 1100).map(lambda n: "v" * n),
    st.integers(0, 600).map(lambda n: "é" * n),
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.one_of(_close_keys, _keys), _long_values, max_size=20),
    _bodies,
    st.one_of(st.none(), _close_keys, _keys),
)
def test_openssl_sort_and_gather_match_the_pure_twin(
    ext: dict[str, str], body: bytes | None, skip: str | None
) -> None:
    make_key, sign_, verify = _openssl()
    key, pure_key = make_key(b"secret"), hmac_key(b"secret")
    expected = content_signature_py(ext, body, pure_key, skip)
    assert sign_(ext, body, key, skip) == expected
    assert sign_(dict(reversed(list(ext.items()))), body, key, skip) == expected
    assert expected == _rocketmq(ext, body, b"secret", skip)
    signed = {**ext, "Signature": content_signature_py(ext, body, pure_key, None)}
    assert verify(signed, body, key) is verify_signature_py(signed, body, pure_key) is True


def test_openssl_sort_orders_close_keys_as_python() -> None:
    """Long shared prefixes, a NUL against the end of a key, ASCII against not."""
    make_key, sign_, _ = _openssl()
    keys = ["a", "a\0", "a\0b", "prefix12", "prefix123", "prefix12\0", "prefix1", "é", "aé", "A"]
    ext = {k: f"<{i}>" for i, k in enumerate(keys)}
    for order in (ext, dict(reversed(list(ext.items())))):
        assert sign_(order, None, make_key(b"s"), None) == _rocketmq(ext, None, b"s", None)
