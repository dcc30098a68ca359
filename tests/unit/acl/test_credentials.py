"""The signature's canonical form (AclClientRPCHook / PlainAccessValidator content)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.acl import credentials
from ariane.acl.credentials import (
    SessionCredentials,
    canonical_content,
    canonical_text_py,
    content_signature_py,
    hmac_key,
    request_signer,
    sign,
    sign_fields,
)
from ariane.common import native
from ariane.remoting.protocol.command import RemotingCommand


def test_content_is_values_in_key_order_then_body() -> None:
    ext = {"topic": "T", "AccessKey": "rocketmq2", "queueId": "3", "Signature": "zzz"}
    assert canonical_content(ext, b"BODY") == b"rocketmq23TBODY"
    assert canonical_content(ext, None) == b"rocketmq23T"
    assert canonical_content(ext, b"") == b"rocketmq23T"


def test_sign_is_base64_hmac_sha1() -> None:
    # a fixed vector: printf abc | openssl dgst -sha1 -hmac 12345678 -binary | base64
    digest = hmac.new(b"12345678", b"abc", hashlib.sha1).digest()
    assert sign(b"abc", "12345678") == base64.b64encode(digest).decode()
    assert sign(b"abc", "12345678") == "BOigG5+Fiv0354g5bQuwOUOPMp0="  # openssl dgst -sha1 -hmac


def test_sign_fields_adds_access_key_token_and_signature() -> None:
    ext = {"topic": "T", "queueId": "1"}
    sign_fields(ext, b"x", SessionCredentials("rocketmq2", "12345678", "tok"))
    assert ext["AccessKey"] == "rocketmq2"
    assert ext["SecurityToken"] == "tok"
    # AccessKey < SecurityToken < queueId < topic (byte order: upper case first)
    assert ext["Signature"] == sign(b"rocketmq2tok1Tx", "12345678")


def test_resigning_replaces_the_old_signature() -> None:
    ext = {"topic": "T"}
    creds = SessionCredentials("rocketmq2", "12345678")
    sign_fields(ext, None, creds)
    first = ext["Signature"]
    sign_fields(ext, None, creds)
    assert ext["Signature"] == first


def test_repr_hides_the_secret() -> None:
    assert "12345678" not in repr(SessionCredentials("rocketmq2", "12345678"))


keys = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
values = st.text(max_size=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=10), st.binary(max_size=50), st.randoms())
def test_content_ignores_insertion_order_and_the_signature(
    ext: dict[str, str], body: bytes, rnd: object
) -> None:
    items = list(ext.items())
    rnd.shuffle(items)  # type: ignore[attr-defined]
    shuffled = dict(items)
    with_sig = dict(shuffled, Signature="whatever")
    expected = "".join(v for k, v in sorted(ext.items()) if k != "Signature").encode() + body
    assert canonical_content(shuffled, body) == expected
    assert canonical_content(with_sig, body) == canonical_content(ext, body)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=8), st.binary(max_size=40), keys, keys)
def test_a_signed_request_verifies_and_any_change_breaks_it(
    ext: dict[str, str], body: bytes, ak: str, sk: str
) -> None:
    ext.pop("Signature", None)
    sign_fields(ext, body, SessionCredentials(ak, sk))
    assert ext["Signature"] == sign(canonical_content(ext, body), sk)
    tampered = dict(ext)
    tampered["AccessKey"] = ak + "x"
    assert sign(canonical_content(tampered, body), sk) != ext["Signature"]
    assert sign(canonical_content(ext, body + b"!"), sk) != ext["Signature"]


# -- the compiled twins (ariane._speedups.acl_canonical / acl_signature) against the pure ones


def _compiled_acl() -> tuple[object, object]:
    canon = getattr(native.speedups, "acl_canonical", None)
    sig = getattr(native.speedups, "acl_signature", None)
    if canon is None or sig is None:
        pytest.skip(f"no compiled ACL twins ({native.build_name()})")
    return canon, sig


_any_text = st.text(max_size=30)  # every code point but lone surrogates
# bodies around hashlib's 2,048-byte GIL threshold, fed in chunks of 2,047 bytes
_long_bodies = st.integers(2000, 6200).map(lambda n: bytes(i % 251 for i in range(n)))
_wire_keys = st.sampled_from(
    ["AccessKey", "Signature", "SecurityToken", "a", "b", "e", "i", "topic", "uniqueKeyQuery",
     "é", "\U0001f600", "Z", "z"]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.one_of(_wire_keys, _any_text), _any_text, max_size=12),
    st.one_of(st.none(), st.binary(max_size=64), _long_bodies),
    st.one_of(st.none(), _wire_keys),
    st.text(max_size=20),
)
def test_compiled_signature_is_byte_for_byte_the_pure_one(
    ext: dict[str, str], body: bytes | None, skip: str | None, secret: str
) -> None:
    canon, sig = _compiled_acl()
    key = hmac_key(secret)
    assert canon(ext, skip) == canonical_text_py(ext, skip)  # type: ignore[operator]
    got = sig(ext, body, key, skip)  # type: ignore[operator]
    assert got == content_signature_py(ext, body, key, skip)
    # and both are RocketMQ's: Base64(HmacSHA1(secret, sorted values but Signature, body))
    left_out = {"Signature", skip}
    content = "".join(v for k, v in sorted(ext.items()) if k not in left_out).encode()
    expected = hmac.new(secret.encode(), content + (body or b""), hashlib.sha1).digest()
    assert got == base64.b64encode(expected).decode()


def test_compiled_twins_raise_what_the_pure_ones_raise() -> None:
    canon, sig = _compiled_acl()
    key = hmac_key("12345678")
    bad_inputs: list[tuple[object, ...]] = [
        ({"a": "x", "b": 7}, None),  # a value that is not a str
        ({"a": "\ud800"}, None),  # a lone surrogate: not UTF-8
        ({"a": 1, "b": "x"}, None),  # a non-str value before a surrogate...
        ({"a": "\ud800", "b": 1}, None),  # ...and after one: TypeError first, as "".join
        ({"a": "x", 1: "y"}, None),  # keys that do not sort together
    ]
    for ext, skip in bad_inputs:
        with pytest.raises(Exception) as pure:
            canonical_text_py(ext, skip)  # type: ignore[arg-type]
        with pytest.raises(Exception) as fast:
            canon(ext, skip)  # type: ignore[operator]
        assert type(fast.value) is type(pure.value), ext
        with pytest.raises(type(pure.value)):
            sig(ext, b"x", key, skip)  # type: ignore[operator]
    # a body that is not bytes-like
    with pytest.raises(TypeError):
        sig({"a": "x"}, "text", key, None)  # type: ignore[operator]
    with pytest.raises(TypeError):
        content_signature_py({"a": "x"}, "text", key)  # type: ignore[arg-type]


def test_bound_functions_are_the_compiled_twins_when_built() -> None:
    _, sig = _compiled_acl()
    # the OpenSSL twin when the build has it (test_signing_key.py), else the hmac-object one
    assert credentials.content_signature is (getattr(native.speedups, "acl_sign", None) or sig)
    assert credentials.canonical_text({"b": "2", "a": "1", "Signature": "s"}) == b"12"


def test_request_signer_signs_like_sign_fields() -> None:
    creds = SessionCredentials("rocketmq2", "12345678", "tok")
    request = RemotingCommand.request(10, {"topic": "T", "queueId": "1"}, b"body")
    request_signer(creds)(request)
    ext = {"topic": "T", "queueId": "1"}
    sign_fields(ext, b"body", creds)
    assert request.ext_fields == ext
    assert ext["Signature"] == sign(b"rocketmq2tok1Tbody", "12345678")
