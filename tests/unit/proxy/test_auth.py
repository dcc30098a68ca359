"""ACL of gRPC calls: the MQv2-HMAC-SHA1 authorization header against the plain ACL rules."""

from __future__ import annotations

import pytest

from ariane.acl.plain import AclRules, parse_document
from ariane.proxy.auth import authenticate, parse_authorization, signature_of
from ariane.proxy.status import ProxyError, from_remoting
from ariane.proxy.v2 import definition_pb2 as pb

RULES = AclRules.merge(
    [
        parse_document(
            """
accounts:
  - accessKey: aliceuser
    secretKey: alice-secret-key
  - accessKey: officeuser
    secretKey: office-secret-key
    whiteRemoteAddress: 10.1.*.*
""",
            "plain_acl.yml",
        )
    ]
)
DT = "20261125T101010Z"


def md(ak: str, secret: str, dt: str = DT) -> dict[str, str]:
    return {
        "x-mq-date-time": dt,
        "authorization": (
            f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, "
            f"Signature={signature_of(dt, secret).lower()}"
        ),
    }


def test_parse_and_sign() -> None:
    assert parse_authorization(md("aliceuser", "s")["authorization"]) == (
        "aliceuser",
        ["x-mq-date-time"],
        signature_of(DT, "s").lower(),
    )
    assert parse_authorization("Basic abc") is None
    assert signature_of("x", "k") == signature_of("x", "k").upper()


def test_good_signature_yields_the_account_to_sign_with() -> None:
    creds = authenticate(RULES, md("aliceuser", "alice-secret-key"), "127.0.0.1:5000")
    assert creds is not None
    assert (creds.access_key, creds.secret_key) == ("aliceuser", "alice-secret-key")


@pytest.mark.parametrize(
    ("metadata", "fragment"),
    [
        (md("aliceuser", "wrong"), "Check signature failed"),
        (md("mallory", "x"), "No acl config for mallory"),
        (
            {**md("aliceuser", "alice-secret-key"), "x-mq-date-time": "20260101T000000Z"},
            "signature",
        ),
    ],
)
def test_refusals_are_unauthorized(metadata: dict[str, str], fragment: str) -> None:
    with pytest.raises(ProxyError) as info:
        authenticate(RULES, metadata, "127.0.0.1:5000")
    assert info.value.code == pb.UNAUTHORIZED
    assert fragment in info.value.message


def test_white_listed_account_needs_no_signature_and_acl_off_needs_nothing() -> None:
    creds = authenticate(RULES, md("officeuser", "wrong"), "10.1.2.3:4000")
    assert creds is not None
    assert creds.access_key == "officeuser"
    with pytest.raises(ProxyError):
        authenticate(RULES, md("officeuser", "wrong"), "10.2.2.3:4000")
    assert authenticate(None, md("mallory", "x"), "1.2.3.4:5") is None
    anonymous = {
        "authorization": "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00"
    }
    assert authenticate(RULES, anonymous, "1.2.3.4:5") is None  # the broker's hook decides


def test_broker_acl_refusals_map_to_unauthorized() -> None:
    error = from_remoting(
        1, "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
    )
    assert error.code == pb.UNAUTHORIZED
