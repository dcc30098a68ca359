"""Permission bits and the permission check of plain ACL (RocketMQ ``acl.common.Permission``).

How it works: a permission is a byte of flags. ``DENY`` (1) wins over everything, ``ANY`` (2)
is only ever *needed* (it asks for PUB or SUB), ``PUB`` (4) and ``SUB`` (8) are what accounts
own. ``parse_perm`` turns the YAML words into bits (an unknown word is DENY, as upstream);
``check_permission(needed, owned)`` is upstream's rule, bit for bit. ``ADMIN_CODES`` are the
request codes only an ``admin: true`` account may send once it is authenticated.
"""

from __future__ import annotations

from ariane.remoting.protocol.codes import RequestCode

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "check_permission",
    "is_valid_perm_word",
    "parse_perm",
    "perm_name",
]

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

_WORDS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

#: Request codes that need an admin account. RocketMQ 4.9 lists the first five; Ariane adds
#: every other code that changes broker or cluster state or reveals secrets (the ACL admin
#: requests, offset resets, file deletion, the NameServer's write requests...), so a plain
#: account can never reconfigure the cluster.
ADMIN_CODES: frozenset[int] = frozenset(
    int(code)
    for code in (
        # RocketMQ 4.9's Permission.ADMIN_CODE
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        # Ariane's additions
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.CLONE_GROUP_OFFSET,
        RequestCode.TRIGGER_DELETE_FILES,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.RESUME_CHECK_HALF_MESSAGE,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.BROKER_HEARTBEAT,
    )
)


def parse_perm(text: object) -> int:
    """The bits of a permission word (``PUB``, ``SUB``, ``PUB|SUB``, ``SUB|PUB``, ``DENY``);
    anything else, ``None`` included, is DENY (``Permission.parsePermFromString``)."""
    if not isinstance(text, str):
        return DENY
    return _WORDS.get(text.strip(), DENY)


def is_valid_perm_word(text: str) -> bool:
    """Whether ``text`` is one of the permission words (the admin API refuses the others)."""
    return text.strip() in _WORDS


def perm_name(bits: int) -> str:
    """The word for ``bits`` (``PUB|SUB`` for both)."""
    if bits & DENY:
        return "DENY"
    if bits & PUB and bits & SUB:
        return "PUB|SUB"
    if bits & PUB:
        return "PUB"
    if bits & SUB:
        return "SUB"
    return "DENY"


def check_permission(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed`` (``Permission.checkPermission``): DENY in
    ``owned`` refuses; ANY in ``needed`` asks for PUB or SUB; else any common bit grants."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)
