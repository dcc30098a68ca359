"""Bit flags: ``MessageSysFlag``, ``PullSysFlag``, ``TopicSysFlag`` and ``PermName``."""

from __future__ import annotations

__all__ = [
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "MULTI_TAGS_FLAG",
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "STOREHOSTADDRESS_V6_FLAG",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "perm_to_string",
    "transaction_value",
]

# MessageSysFlag
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 1
COMPRESSION_ZSTD = 2
COMPRESSION_ZLIB = 3

# PullSysFlag
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8
PULL_LITE = 0x10

# TopicSysFlag
TOPIC_UNIT = 0x1
TOPIC_UNIT_SUB = 0x2

# PermName
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits of a sysFlag (``MessageSysFlag.getTransactionValue``)."""
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


def perm_to_string(perm: int) -> str:
    """Render a permission like ``PermName.perm2String`` (e.g. ``RW-``)."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )
