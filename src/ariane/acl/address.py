"""IP rules of plain ACL (RocketMQ ``RemoteAddressStrategyFactory``): ``globalWhiteRemoteAddresses``
entries and an account's ``whiteRemoteAddress``.

How it works: ``parse_ip_rule(text)`` picks a strategy from the rule's shape, as upstream does:

* blank or absent: matches nothing;
* ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches every address;
* ends with ``}``: ``192.168.0.{100,101}`` (IPv4: the braces are the 4th segment; IPv6: the
  last one): the set of addresses it spells;
* contains ``,``: a list of addresses;
* contains ``*`` or ``-``: a range, segment by segment: each segment is a number, ``*`` (any)
  or ``a-b`` (inclusive; decimal for IPv4, hex for IPv6); segments left out at the end are
  any. RocketMQ 4.x checks only the first wildcard segment; Ariane checks every one, so
  ``10.1-2.3.*`` refuses ``10.1.4.9``;
* anything else: one IPv4 or IPv6 address.

Addresses compare as ``ipaddress`` objects, so every IPv6 spelling of one address matches, and
an IPv4-mapped IPv6 peer (``::ffff:10.0.0.1``) matches IPv4 rules. A malformed rule raises
``AclError`` naming it. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TypeAlias

from ariane.errors import AclError

__all__ = ["IpRule", "client_ip", "parse_ip", "parse_ip_rule"]

IpAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})
_DEC = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


def parse_ip(text: str) -> IpAddress | None:
    """The address in ``text`` (an IPv4-mapped IPv6 address becomes IPv4), or None."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]  # a scope id (fe80::1%eth0)
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def client_ip(remote_addr: str) -> str:
    """The host part of a channel's ``host:port`` (everything before the last ``:``, as
    ``PlainAccessValidator.parse`` takes it)."""
    host, sep, _ = remote_addr.rpartition(":")
    host = host if sep else remote_addr
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


@dataclass(frozen=True, slots=True)
class IpRule:
    """One parsed rule.

    Attributes:
        text: the rule as written.
        kind: ``"blank"``, ``"all"``, ``"set"``, ``"range"`` or ``"one"``.
        addresses: the addresses of ``set`` and ``one`` rules.
        v6: whether a ``range`` rule is IPv6.
        segments: per segment ``(low, high)`` of a ``range`` rule (4 for IPv4, 8 for IPv6).
    """

    text: str
    kind: str
    addresses: frozenset[IpAddress] = frozenset()
    v6: bool = False
    segments: tuple[tuple[int, int], ...] = ()

    def matches(self, ip: str | IpAddress | None) -> bool:
        """Whether the client address ``ip`` (text or parsed) is covered by this rule."""
        if self.kind == "blank":
            return False
        if self.kind == "all":
            return True
        addr = parse_ip(ip) if isinstance(ip, str) else ip
        if addr is None:
            return False
        if self.kind != "range":
            return addr in self.addresses
        if isinstance(addr, ipaddress.IPv6Address) != self.v6:
            return False
        parts = _segments_of(addr)
        return all(
            low <= part <= high for part, (low, high) in zip(parts, self.segments, strict=False)
        )


def _segments_of(addr: IpAddress) -> list[int]:
    value = int(addr)
    if isinstance(addr, ipaddress.IPv4Address):
        return [(value >> shift) & 0xFF for shift in (24, 16, 8, 0)]
    return [(value >> (16 * (7 - i))) & 0xFFFF for i in range(8)]


def parse_ip_rule(text: object) -> IpRule:
    """Parse one rule (see the module docstring).

    Raises:
        AclError: the rule is malformed (the message names it).
    """
    if text is None:
        return IpRule("", "blank")
    if not isinstance(text, str):
        raise AclError(f"IP rule {text!r} is not a string")
    rule = text.strip()
    if not rule:
        return IpRule(text, "blank")
    if rule in _ALL:
        return IpRule(text, "all")
    if rule.endswith("}"):
        return IpRule(text, "set", frozenset(_expand_braces(rule)))
    if "," in rule:
        return IpRule(text, "set", frozenset(_one(part) for part in rule.split(",") if part))
    if "*" in rule or "-" in rule:
        v6 = ":" in rule
        return IpRule(text, "range", v6=v6, segments=_range_segments(rule, v6))
    return IpRule(text, "set", frozenset({_one(rule)}))


def _one(text: str) -> IpAddress:
    addr = parse_ip(text)
    if addr is None:
        raise AclError(f"{text.strip()!r} is not an IPv4 or IPv6 address")
    return addr


def _expand_braces(rule: str) -> list[IpAddress]:
    sep = ":" if ":" in rule else "."
    head, _, last = rule.rpartition(sep)
    if not last.startswith("{") or not head:
        raise AclError(f"IP rule {rule!r}: the {{a,b}} list must be the last segment")
    if sep == "." and len(rule.split(".")) < 4:
        raise AclError(f"IP rule {rule!r}: an IPv4 rule needs 4 segments")
    items = [item.strip() for item in last[1:-1].split(",") if item.strip()]
    if not items:
        raise AclError(f"IP rule {rule!r}: the {{}} list is empty")
    try:
        return [_one(f"{head}{sep}{item}") for item in items]
    except AclError as exc:
        raise AclError(f"IP rule {rule!r}: {exc}") from None


def _range_segments(rule: str, v6: bool) -> tuple[tuple[int, int], ...]:
    width, base, top = (8, 16, 0xFFFF) if v6 else (4, 10, 255)
    if v6:
        raw = _expand_v6_gap(rule)
    else:
        raw = [seg.strip() for seg in rule.split(".")]
        if raw and raw[-1] == "":
            raw.pop()  # "192.168.*." as the book writes it
    if not raw or len(raw) > width:
        raise AclError(f"IP rule {rule!r} has {len(raw)} segments, at most {width} allowed")
    out: list[tuple[int, int]] = []
    for seg in raw:
        if seg == "*":
            out.append((0, top))
            continue
        low_text, dash, high_text = seg.partition("-")
        low = _segment_value(rule, low_text, base, top)
        high = _segment_value(rule, high_text, base, top) if dash else low
        if low > high:
            raise AclError(f"IP rule {rule!r}: range {seg!r} runs backwards")
        out.append((low, high))
    out.extend([(0, top)] * (width - len(out)))
    return tuple(out)


def _expand_v6_gap(rule: str) -> list[str]:
    if rule.count("::") > 1:
        raise AclError(f"IP rule {rule!r} has more than one '::'")
    if "::" not in rule:
        return [seg.strip() for seg in rule.split(":")]
    left, _, right = rule.partition("::")
    head = [s for s in left.split(":") if s] if left else []
    tail = [s for s in right.split(":") if s] if right else []
    missing = 8 - len(head) - len(tail)
    if missing < 1:
        raise AclError(f"IP rule {rule!r} has too many segments")
    return head + ["0"] * missing + tail


def _segment_value(rule: str, text: str, base: int, top: int) -> int:
    text = text.strip()
    digits = _DEC if base == 10 else _HEX
    if not text or len(text) > 5 or any(c not in digits for c in text):
        raise AclError(f"IP rule {rule!r}: segment {text!r} is not a number")
    value = int(text, base)
    if not 0 <= value <= top:
        raise AclError(f"IP rule {rule!r}: segment {text!r} is out of 0..{top}")
    return value
