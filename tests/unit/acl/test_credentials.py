"""The signature's canonical form (AclClientRPCHook / PlainAccessValidator content)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.acl.credentials import SessionCredentials, canonical_content, sign, sign_fields


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
