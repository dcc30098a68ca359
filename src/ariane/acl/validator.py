"""The access decision (RocketMQ ``PlainPermissionManager.validate`` and ``checkPerm``).

How it works, in upstream's order:

1. a global white rule matches the client IP: allowed, nothing else is looked at;
2. no ``AccessKey``: refused ("No accessKey is configured");
3. an unknown access key: refused ("No acl config for <ak>");
4. the account's own ``whiteRemoteAddress`` matches: allowed without signature or permissions;
5. the signature differs from ours over the request content: refused ("Check signature failed
   for accessKey=<ak>");
6. an admin code from a non-admin account: refused ("Need admin permission for request
   code=<n>, but accessKey=<ak> is not");
7. each needed resource: the account's entry, else its default for topics or groups, must grant
   the permission (``check_permission``); an admin account with no entries at all passes.

Upstream lets a PUB to ``RMQ_SYS_TRACE_TOPIC`` through step 7 so that tracing clients need no
permission on it; so does Ariane.

``decide(rules, request)`` returns a ``Decision`` (never raises). ``check_access`` is the same
decision over explicit arguments (account, resources, IP, admin need) for callers that do not
speak remoting, such as a gRPC front end that verified its own signature. Pure.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple, TypeAlias

from ariane.acl.address import parse_ip
from ariane.acl.credentials import (
    ACCESS_KEY,
    SigningKey,
    content_signature,
    verify_signature,
)
from ariane.acl.permission import ADMIN_CODES, PUB, SUB, check_permission
from ariane.acl.plain import Account, AclRules
from ariane.acl.resources import UNIQUE_KEY_QUERY, AccessRequest
from ariane.common import native
from ariane.common.topics import RETRY_PREFIX, TRACE_TOPIC
from ariane.remoting.protocol.codes import RequestCode

__all__ = [
    "Decision",
    "FastKey",
    "allows_fast",
    "check_access",
    "check_resources",
    "decide",
    "describe_resource",
    "fast_check",
    "fast_check_py",
    "fast_grant",
    "fast_key",
]


class Decision(NamedTuple):
    """The outcome of one check.

    Attributes:
        allowed: whether the request may proceed.
        reason: why it was refused (RocketMQ's ``AclException`` message), or how it was let in
            (``"global white list"``, ``"account white list"``, ``"signed"``).
        access_key: the account the request used, when known.
    """

    allowed: bool
    reason: str
    access_key: str | None = None


_GLOBAL = Decision(True, "global white list")


def describe_resource(resource: str) -> str:
    """``group:<g>`` or ``topic:<t>`` (``PlainAccessResource.printStr``)."""
    if resource.startswith(RETRY_PREFIX):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


def check_resources(account: Account, resources: Mapping[str, int]) -> str | None:
    """Step 7: None when ``account`` holds every needed permission, else the refusal."""
    if not resources:
        return None
    if account.admin and not account.perms:
        return None
    trace = resources.get(TRACE_TOPIC)
    if trace is not None and trace == PUB:
        return None  # upstream skips every check for a trace-topic send
    for resource, needed in resources.items():
        owned = account.perms.get(resource)
        if owned is None:
            is_group = resource.startswith(RETRY_PREFIX)
            owned = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(needed, owned):
                return f"No default permission for {describe_resource(resource)}"
        elif not check_permission(needed, owned):
            return f"No permission for {describe_resource(resource)}"
    return None


def _globally_white(rules: AclRules, ip: str) -> bool:
    if not rules.global_white:
        return False
    addr = parse_ip(ip)
    return any(rule.matches(addr) for rule in rules.global_white)


def _signature_ok(account: Account, request: AccessRequest) -> bool:
    got = request.signature
    if not got:
        return False
    ext, body, key = request.ext_fields, request.body, account.mac
    if key is None:
        return False
    if hmac.compare_digest(content_signature(ext, body, key, None), got):
        return True
    if UNIQUE_KEY_QUERY in ext:  # signed by a client that leaves the flag out
        return hmac.compare_digest(content_signature(ext, body, key, UNIQUE_KEY_QUERY), got)
    return False


def decide(rules: AclRules, request: AccessRequest) -> Decision:
    """Whether ``request`` may proceed under ``rules`` (see the module docstring)."""
    if _globally_white(rules, request.ip):
        return _GLOBAL
    ak = request.access_key
    if ak is None:
        return Decision(False, "No accessKey is configured")
    account = rules.accounts.get(ak)
    if account is None:
        return Decision(False, f"No acl config for {ak}", ak)
    if account.white_rule.kind != "blank" and account.white_rule.matches(request.ip):
        return Decision(True, "account white list", ak)
    if not _signature_ok(account, request):
        return Decision(False, f"Check signature failed for accessKey={ak}", ak)
    if request.parse_error is not None:
        return Decision(False, request.parse_error, ak)
    return _authorize(account, request.code, request.resources)


def _authorize(account: Account, code: int, resources: Mapping[str, int]) -> Decision:
    ak = account.access_key
    if code in ADMIN_CODES and not account.admin:
        return Decision(
            False, f"Need admin permission for request code={code}, but accessKey={ak} is not", ak
        )
    refused = check_resources(account, resources)
    if refused is not None:
        return Decision(False, f"{refused} (accessKey={ak})", ak)
    return Decision(True, "signed", ak)


def check_access(
    rules: AclRules,
    access_key: str | None,
    resources: Mapping[str, int],
    ip: str,
    *,
    admin_needed: bool = False,
    authenticated: bool = True,
) -> Decision:
    """The decision for a caller that already authenticated ``access_key`` itself.

    Args:
        rules: the loaded rules.
        access_key: the account, None when the caller has none.
        resources: resource (``%RETRY%<group>`` for groups) -> needed permission bits.
        ip: the client address.
        admin_needed: whether the operation is admin-only.
        authenticated: False to refuse unless an IP rule lets the caller in (a failed
            signature check on the caller's side).
    """
    if _globally_white(rules, ip):
        return _GLOBAL
    if access_key is None:
        return Decision(False, "No accessKey is configured")
    account = rules.accounts.get(access_key)
    if account is None:
        return Decision(False, f"No acl config for {access_key}", access_key)
    if account.white_rule.kind != "blank" and account.white_rule.matches(ip):
        return Decision(True, "account white list", access_key)
    if not authenticated:
        return Decision(False, f"Check signature failed for accessKey={access_key}", access_key)
    if admin_needed and not account.admin:
        return Decision(False, f"Need admin permission, but accessKey={access_key} is not")
    refused = check_resources(account, resources)
    if refused is not None:
        return Decision(False, f"{refused} (accessKey={access_key})", access_key)
    return Decision(True, "authorized", access_key)


_SEND_V2 = frozenset((int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)))
_PULL = int(RequestCode.PULL_MESSAGE)

#: what a fast-path grant depends on besides the rules: (code, access key, topic, group)
FastKey: TypeAlias = tuple[int, "str | None", "str | None", "str | None"]


def fast_key(code: int, ext: Mapping[str, str]) -> FastKey | None:
    """The request fields ``fast_grant`` decides on, or None for a request without a fast
    path (only sends and pulls have one)."""
    if code in _SEND_V2:
        return (code, ext.get(ACCESS_KEY), ext.get("b"), None)
    if code == _PULL:
        return (code, ext.get(ACCESS_KEY), ext.get("topic"), ext.get("consumerGroup"))
    return None


_MISSING: Final = object()


def fast_check_py(
    grants: dict[FastKey, SigningKey | None],
    code: int,
    ext: Mapping[str, str],
    body: bytes | None,
) -> bool | None:
    """The broker hook's fast path over its remembered grants (``fast_key`` -> what
    ``fast_grant`` answered): None when no grant is remembered for this request, False when
    there is no fast path (other codes, a None grant: ask ``decide``) or the signature does
    not verify, True when it does. The pure twin of the compiled ``acl_fast_check``."""
    need = fast_key(code, ext)
    if need is None:
        return False
    mac = grants.get(need, _MISSING)
    if mac is _MISSING:
        return None
    return mac is not None and verify_signature(ext, body, mac)


#: ``fast_check(grants, code, ext, body)``: the compiled twin when built with OpenSSL
fast_check: Callable[
    [dict[FastKey, SigningKey | None], int, Mapping[str, str], bytes | None], bool | None
] = getattr(native.speedups, "acl_fast_check", None) or fast_check_py


def fast_grant(rules: AclRules, key: FastKey) -> SigningKey | None:
    """The signing key of the account when a send or pull with these fields is certainly
    allowed once its signature verifies with that key; None means "ask ``decide``" (which
    also says why). Only for rules without global white rules and accounts without an IP
    rule, so the answer is ``decide``'s. Depends on ``rules`` and ``key`` only, so a caller
    may keep it until the rules change."""
    if rules.global_white:
        return None
    code, ak, topic, group = key
    if not topic or topic.startswith(RETRY_PREFIX) or topic == TRACE_TOPIC:
        return None
    account = rules.accounts.get(ak) if ak else None
    if account is None or account.white_rule.kind != "blank" or account.mac is None:
        return None
    if account.admin and not account.perms:
        return account.mac
    if code == _PULL:
        needs: tuple[tuple[str | None, int], ...] = (
            (topic, SUB),
            (RETRY_PREFIX + group if group else None, SUB),
        )
    else:
        needs = ((topic, PUB),)
    perms = account.perms
    for resource, needed in needs:
        if resource is None:
            continue
        owned = perms.get(resource)
        if owned is None:
            is_group = resource.startswith(RETRY_PREFIX)
            owned = account.default_group_perm if is_group else account.default_topic_perm
        if not check_permission(needed, owned):
            return None
    return account.mac


def allows_fast(rules: AclRules, code: int, ext: Mapping[str, str], body: bytes | None) -> bool:
    """True when the hot requests (sends, pulls) of a signed account are certainly allowed,
    without building the request record (``fast_grant`` and the signature); False means "ask
    ``decide``"."""
    key = fast_key(code, ext)
    if key is None:
        return False
    mac = fast_grant(rules, key)
    return mac is not None and verify_signature(ext, body, mac)
