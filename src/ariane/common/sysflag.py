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
    "TRANSACTION_TYPE_MASK",
    "born_host_v6",
    "clear_compression",
    "compression_type",
    "enters_consume_queue",
    "host_flags",
    "host_record_size",
    "is_rollback",
    "perm_to_string",
    "reset_transaction_value",
    "store_host_v6",
    "transaction_value",
    "with_host_flags",
]

# MessageSysFlag
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
#: The two transaction-type bits (``MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`` doubles as it).
TRANSACTION_TYPE_MASK = 0xC
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


_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits of a sysFlag (``MessageSysFlag.getTransactionValue``)."""
    return sys_flag & TRANSACTION_TYPE_MASK


def compression_type(sys_flag: int) -> int:
    """The compression type of a compressed body (``COMPRESSION_ZLIB``...; 0 means zlib for
    clients older than 5.x)."""
    return (sys_flag & COMPRESSION_TYPE_MASK) >> 8


def clear_compression(sys_flag: int) -> int:
    """``sys_flag`` of the decompressed body: compressed flag and type cleared."""
    return sys_flag & ~(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)


def reset_transaction_value(sys_flag: int, tx_type: int) -> int:
    """``sys_flag`` with its transaction type replaced by ``tx_type``
    (``MessageSysFlag.resetTransactionValue``)."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | tx_type


def enters_consume_queue(sys_flag: int) -> bool:
    """True unless the record is a PREPARED (half) or ROLLBACK transaction record: those are
    stored but never get a ConsumeQueue entry."""
    tx = sys_flag & TRANSACTION_TYPE_MASK
    return tx != TRANSACTION_PREPARED_TYPE and tx != TRANSACTION_ROLLBACK_TYPE


def is_rollback(sys_flag: int) -> bool:
    """True for a ROLLBACK transaction record (not indexed)."""
    return sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE


def born_host_v6(sys_flag: int) -> bool:
    """The born host of the record is an IPv6 address (16 bytes)."""
    return bool(sys_flag & BORNHOST_V6_FLAG)


def store_host_v6(sys_flag: int) -> bool:
    """The store host of the record is an IPv6 address (16 bytes)."""
    return bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)


def host_record_size(v6: bool) -> int:
    """Bytes a host (address + int32 port) takes in a record: 8 for IPv4, 20 for IPv6."""
    return 20 if v6 else 8


def host_flags(born_v6: bool, store_v6: bool) -> int:
    """The sysFlag host bits for born/store addresses of these families."""
    return (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)


def with_host_flags(sys_flag: int, host_bits: int) -> int:
    """``sys_flag`` with its host bits replaced by ``host_bits`` (see :func:`host_flags`)."""
    return (sys_flag & ~_HOST_FLAGS) | host_bits


def perm_to_string(perm: int) -> str:
    """Render a permission like ``PermName.perm2String`` (e.g. ``RW-``)."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )
