"""Access control: RocketMQ's plain ACL (book chapter 6), as a pure core.

The core gets file texts and request data and returns decisions; it opens no file, reads no
clock and holds no socket. The servers feed it (they read ``plain_acl.yml`` and
``conf/acl/*.yml``, watch them, write admin edits) and call it from a remoting hook.

* ``permission``: permission bits, ``check_permission``, admin-only request codes;
* ``address``: the IP rules of ``globalWhiteRemoteAddresses`` / ``whiteRemoteAddress``;
* ``plain``: ``plain_acl.yml`` documents, the merged ``AclRules``, and admin edits;
* ``credentials``: ``SessionCredentials`` and the request signature (HmacSHA1, base64);
* ``resources``: which topics and groups a request touches, with the permission it needs;
* ``validator``: the decision (``decide`` for a remoting request, ``check_access`` for any
  caller with its own authentication, e.g. a gRPC front end);
* ``hook``: the server's remoting hook.
"""

from ariane.acl.address import IpRule, client_ip, parse_ip_rule
from ariane.acl.credentials import (
    SessionCredentials,
    canonical_content,
    request_signer,
    sign,
    sign_fields,
)
from ariane.acl.hook import ACL_EXCEPTION, AclHook, refusal_remark
from ariane.acl.permission import (
    ADMIN_CODES,
    ANY,
    DENY,
    PUB,
    SUB,
    check_permission,
    parse_perm,
    perm_name,
)
from ariane.acl.plain import (
    Account,
    AclDocument,
    AclRules,
    PlainAccessConfig,
    delete_account,
    dump_document,
    parse_document,
    set_global_white,
    update_account,
)
from ariane.acl.resources import AccessRequest, parse_request, retry_topic
from ariane.acl.validator import Decision, check_access, decide

__all__ = [
    "ACL_EXCEPTION",
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "AccessRequest",
    "Account",
    "AclDocument",
    "AclHook",
    "AclRules",
    "Decision",
    "IpRule",
    "PlainAccessConfig",
    "SessionCredentials",
    "canonical_content",
    "check_access",
    "check_permission",
    "client_ip",
    "decide",
    "delete_account",
    "dump_document",
    "parse_document",
    "parse_ip_rule",
    "parse_perm",
    "parse_request",
    "perm_name",
    "refusal_remark",
    "request_signer",
    "retry_topic",
    "set_global_white",
    "sign",
    "sign_fields",
    "update_account",
]
