"""DLedger's small files and settings text: ``currterm`` and ``checkpoint`` (Java properties)
and ``dLegerPeers``. The data and index file formats are in :mod:`ariane.store.dledger_format`
(re-exported here).

This module only encodes and parses; it does no I/O and logs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ariane.common.javaprops import format_properties, parse_properties
from ariane.errors import ConfigError, CorruptionError
from ariane.store.dledger_format import (
    BLANK_MAGIC,
    CRC_MASK,
    ENTRY_HEADER,
    ENTRY_HEADER_SIZE,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    MAGIC_NOOP,
    MAGIC_NORMAL,
    MIN_BLANK_LEN,
    EntryHeader,
    body_crc_ok,
    decode_header,
    encode_entry,
)

__all__ = [
    "BLANK_MAGIC",
    "CRC_MASK",
    "ENTRY_HEADER",
    "ENTRY_HEADER_SIZE",
    "INDEX_UNIT",
    "INDEX_UNIT_SIZE",
    "MAGIC_NOOP",
    "MAGIC_NORMAL",
    "MIN_BLANK_LEN",
    "EntryHeader",
    "Peer",
    "body_crc_ok",
    "decode_checkpoint",
    "decode_currterm",
    "decode_header",
    "encode_checkpoint",
    "encode_currterm",
    "encode_entry",
    "format_peers",
    "parse_peers",
    "parse_self_id",
]


# -- small property files -----------------------------------------------------------------------


def encode_currterm(term: int, voted_for: str | None) -> bytes:
    """``currterm``: ``currTerm`` and ``voteLeader`` (empty when no vote)."""
    return format_properties({"currTerm": str(term), "voteLeader": voted_for or ""}).encode()


def decode_currterm(data: bytes) -> tuple[int, str | None]:
    """(term, vote) from a ``currterm`` file.

    Raises:
        CorruptionError: the file does not hold a term.
    """
    props = _props(data, "currterm")
    try:
        term = int(props.get("currTerm", "0"))
    except ValueError:
        raise CorruptionError(f"currterm: bad currTerm {props.get('currTerm')!r}") from None
    return term, props.get("voteLeader") or None


def encode_checkpoint(end_index: int, committed_index: int) -> bytes:
    """``checkpoint``: ``endIndex`` and ``committedIndex``."""
    return format_properties(
        {"endIndex": str(end_index), "committedIndex": str(committed_index)}
    ).encode()


def decode_checkpoint(data: bytes) -> tuple[int, int]:
    """(end index, committed index); (-1, -1) for what is missing or unreadable."""
    try:
        props = _props(data, "checkpoint")
        return int(props.get("endIndex", "-1")), int(props.get("committedIndex", "-1"))
    except (CorruptionError, ValueError):
        return -1, -1


def _props(data: bytes, what: str) -> dict[str, str]:
    try:
        return parse_properties(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptionError(f"{what}: {exc}") from None


# -- configuration text -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Peer:
    """One member of ``dLegerPeers``: its id and Raft address."""

    node_id: str
    host: str
    port: int

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"


def parse_self_id(text: str) -> int:
    """The number in a node id (``n0`` -> 0): a letter then digits (``dLegerSelfId``).

    Raises:
        ConfigError: not a letter followed by digits.
    """
    if len(text) < 2 or not text[0].isascii() or not text[0].isalpha() or not text[1:].isdigit():
        raise ConfigError("dLegerSelfId", f"{text!r} must be a letter followed by digits (n0)")
    return int(text[1:])


def parse_peers(text: str) -> tuple[Peer, ...]:
    """``n0-127.0.0.1:40911;n1-127.0.0.1:40912;...`` (``;`` between peers, the book's erratum E5).

    Raises:
        ConfigError: an entry is not ``<id>-<host>:<port>``, or an id or address repeats.
    """
    peers: list[Peer] = []
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        node_id, sep, address = item.partition("-")
        host, colon, port_text = address.rpartition(":")
        if not sep or not colon or not host or not port_text.isdigit():
            raise ConfigError("dLegerPeers", f"{item!r} is not <id>-<host>:<port>")
        parse_self_id(node_id)
        port = int(port_text)
        if not 0 < port < 65536:
            raise ConfigError("dLegerPeers", f"port {port} of {node_id} out of range")
        peers.append(Peer(node_id, host, port))
    if not peers:
        raise ConfigError("dLegerPeers", "no peers")
    ids = [p.node_id for p in peers]
    if len(set(ids)) != len(ids):
        raise ConfigError("dLegerPeers", f"a node id appears twice in {text!r}")
    addresses = [p.address for p in peers]
    if len(set(addresses)) != len(addresses):
        raise ConfigError("dLegerPeers", f"an address appears twice in {text!r}")
    return tuple(peers)


def format_peers(peers: tuple[Peer, ...]) -> str:
    """The canonical ``dLegerPeers`` text of ``peers``."""
    return ";".join(f"{p.node_id}-{p.address}" for p in peers)
