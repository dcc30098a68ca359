"""ACL for gRPC calls (RocketMQ ``AuthenticationPipeline`` with the plain ACL of 4.x/5.1).

How it works: a 5.x client signs every call with the ``authorization`` metadata
``MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>`` where
the signature is the hex HMAC-SHA1 of the ``x-mq-date-time`` value under the secret key. When
the broker runs with ``aclEnable``, ``authenticate`` checks that signature against the account
in the broker's loaded rules (an account white-listed for the caller's address needs none) and
returns the account's credentials; the proxy then signs each remoting request it dispatches
with them, so the broker's own ACL hook authorizes topics and groups exactly as for a 4.x
client. A call without credentials passes through unsigned: the hook lets it in only from a
globally white address. Refusals are UNAUTHORIZED. Pure: the rules come in as an argument.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping

from ariane.acl.address import client_ip, parse_ip
from ariane.acl.credentials import SessionCredentials
from ariane.acl.plain import AclRules
from ariane.proxy.status import ProxyError
from ariane.proxy.v2 import definition_pb2 as pb

__all__ = ["authenticate", "parse_authorization", "signature_of"]

_AUTH = re.compile(
    r"^\s*MQv2-HMAC-SHA1\s+Credential=(?P<cred>[^,]*),\s*SignedHeaders=(?P<headers>[^,]*),"
    r"\s*Signature=(?P<sig>\S*)\s*$"
)
DATE_TIME = "x-mq-date-time"


def signature_of(date_time: str, secret_key: str) -> str:
    """Upper-case hex HMAC-SHA1 of ``date_time`` under ``secret_key`` (what clients send)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest().upper()


def parse_authorization(value: str) -> tuple[str, list[str], str] | None:
    """(access key, signed headers, signature) of an ``authorization`` value, None if absent
    or not in the MQv2 form. The credential may carry a namespace after a ``/``."""
    match = _AUTH.match(value or "")
    if match is None:
        return None
    access_key = match.group("cred").split("/", 1)[0].strip()
    headers = [h.strip().lower() for h in match.group("headers").split(";") if h.strip()]
    return access_key, headers, match.group("sig").strip()


def authenticate(
    rules: AclRules | None, metadata: Mapping[str, str], peer: str
) -> SessionCredentials | None:
    """The credentials to sign this call's broker requests with (None: unsigned).

    Raises:
        ProxyError: UNAUTHORIZED for an unknown account or a bad signature.
    """
    if rules is None:
        return None
    parsed = parse_authorization(metadata.get("authorization", ""))
    if parsed is None or not parsed[0]:
        return None
    access_key, headers, signature = parsed
    account = rules.accounts.get(access_key)
    if account is None:
        raise ProxyError(pb.UNAUTHORIZED, f"No acl config for {access_key}")
    credentials = SessionCredentials(access_key, account.secret_key)
    white = account.white_rule
    if white.kind != "blank" and white.matches(parse_ip(client_ip(peer))):
        return credentials
    date_time = metadata.get(DATE_TIME, "")
    if DATE_TIME not in headers or not date_time:
        raise ProxyError(pb.UNAUTHORIZED, f"the signature of {access_key} must cover {DATE_TIME}")
    expected = signature_of(date_time, account.secret_key)
    if not hmac.compare_digest(expected, signature.upper()):
        raise ProxyError(pb.UNAUTHORIZED, f"Check signature failed for accessKey={access_key}")
    return credentials
