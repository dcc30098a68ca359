"""The message model: ``Message`` (what a producer sends) and ``MessageExt`` (a stored record).

Mirrors RocketMQ's ``Message`` / ``MessageExt``. ``MessageExt`` is the decoded form of one
CommitLog record (see :mod:`ariane.common.record` for the bytes); the client builds it from PULL
and QUERY response bodies, the store tools from files. Hosts are kept as packed address bytes
plus a port (:class:`HostPort`), exactly as the record stores them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ariane.common import properties as props
from ariane.common.msgid import create_offset_msg_id

__all__ = ["HostPort", "Message", "MessageExt", "message_dict"]


class HostPort(NamedTuple):
    """A socket address as a record stores it: 4 (IPv4) or 16 (IPv6) address bytes and a port."""

    addr: bytes
    port: int

    @classmethod
    def parse(cls, text: str) -> HostPort:
        """Parse ``"1.2.3.4:10911"`` or ``"[::1]:10911"``."""
        host, _, port = text.rpartition(":")
        host = host.strip("[]")
        return cls(ipaddress.ip_address(host).packed, int(port))

    @property
    def is_ipv6(self) -> bool:
        """True when the address is 16 bytes long."""
        return len(self.addr) == 16

    def __str__(self) -> str:
        ip = ipaddress.ip_address(self.addr)
        return f"[{ip}]:{self.port}" if ip.version == 6 else f"{ip}:{self.port}"


_NO_HOST = HostPort(b"\0\0\0\0", 0)


@dataclass(slots=True)
class Message:
    """A message as a producer builds it.

    Args:
        topic: the topic name.
        body: the payload bytes.
        flag: the application-defined int flag.
        properties: the property map (``TAGS``, ``KEYS``, ``UNIQ_KEY``...).
    """

    topic: str
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property."""
        return self.properties.get(props.TAGS)

    @property
    def keys(self) -> list[str]:
        """The ``KEYS`` property split on spaces (empty parts dropped)."""
        raw = self.properties.get(props.KEYS)
        return [k for k in raw.split(props.KEY_SEPARATOR) if k] if raw else []


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message: one decoded CommitLog record.

    Times are milliseconds since the epoch. ``store_size`` is the record's TOTALSIZE,
    ``commit_log_offset`` its physical offset, ``queue_offset`` its ConsumeQueue index.
    """

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: HostPort = _NO_HOST
    store_timestamp_ms: int = 0
    store_host: HostPort = _NO_HOST
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    commit_log_offset: int = 0

    @property
    def offset_msg_id(self) -> str:
        """The broker's id of the record: store host + physical offset as upper-case hex."""
        return create_offset_msg_id(
            self.store_host.addr, self.store_host.port, self.commit_log_offset
        )

    @property
    def msg_id(self) -> str:
        """The user-visible id: ``UNIQ_KEY`` when present, else the offsetMsgId."""
        return self.properties.get(props.UNIQ_KEY) or self.offset_msg_id


def message_dict(msg: MessageExt, *, charset: str = "utf-8", body: bool = True) -> dict[str, Any]:
    """A stored message (``MessageExt``) as stable JSON keys; the body decoded with
    ``charset`` (undecodable bytes replaced) when ``body`` is true."""
    out: dict[str, Any] = {
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "topic": msg.topic,
        "tags": msg.tags,
        "keys": msg.keys,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp_ms,
        "storeTimestamp": msg.store_timestamp_ms,
        "bornHost": str(msg.born_host),
        "storeHost": str(msg.store_host),
        "sysFlag": msg.sys_flag,
        "flag": msg.flag,
        "storeSize": msg.store_size,
        "bodyCrc": msg.body_crc,
        "bodyLength": len(msg.body),
        "properties": dict(sorted(msg.properties.items())),
    }
    if body:
        out["body"] = bytes(msg.body).decode(charset, "replace")
    return out
