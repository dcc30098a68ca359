"""``DLedgerConfig``: a DLedger broker's group, peers and Raft timings (RocketMQ's
``enableDLegerCommitLog``/``dLegerGroup``/``dLegerPeers``/``dLegerSelfId`` plus DLedger's
own ``DLedgerConfig`` settings)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ariane.dledger.format import Peer, format_peers, parse_peers, parse_self_id
from ariane.errors import ConfigError
from ariane.raft import RaftConfig

__all__ = ["DLedgerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DLedgerConfig:
    """Settings of one DLedger node.

    Timing defaults are DLedger's (a follower stands after 3 x 2 s without heartbeats);
    clusters that must fail over faster shorten ``heart_beat_time_interval_ms``.

    Args:
        group: ``dLegerGroup`` (keep it equal to ``brokerName``).
        self_id: ``dLegerSelfId``, a letter followed by digits.
        peers: ``dLegerPeers`` parsed (``n0-host:port;...``); the port is for Raft only.
    """

    group: str
    self_id: str
    peers: tuple[Peer, ...]
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    vote_wait_ms: int = 3000
    max_pending_requests_num: int = 10000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    #: entries per APPEND push, and pushes unanswered per follower: one push in flight
    #: carries what was proposed during the previous one's round trip, so each node's
    #: per-push work (a write and a read, a frame, a step, an answer) covers about twice
    #: the entries of two pushes in flight (the core's default)
    max_push_batch: int = 128
    max_pushes_in_flight: int = 1
    preferred_leader_ids: tuple[str, ...] = ()
    #: ``mappedFileSizeForEntryIndex`` (32 bytes per entry; DLedger: 160 MiB)
    mapped_file_size_for_entry_index: int = 32 * 5 * 1024 * 1024
    #: how often ``checkpoint`` (end and commit index) is written
    check_point_interval_ms: int = 3000
    #: the port this node listens on for Raft when ``dLegerPeers`` names an address in front
    #: of it (a proxy, a NAT); -1: the port ``dLegerPeers`` gives this node
    listen_port: int = -1

    def __post_init__(self) -> None:
        if not self.group:
            raise ConfigError("dLegerGroup", "must not be empty")
        parse_self_id(self.self_id)
        ids = [p.node_id for p in self.peers]
        if self.self_id not in ids:
            raise ConfigError(
                "dLegerSelfId", f"{self.self_id} is not one of dLegerPeers ({', '.join(ids)})"
            )
        for node in self.preferred_leader_ids:
            if node not in ids:
                raise ConfigError("preferredLeaderIds", f"{node} is not one of dLegerPeers")
        if not -1 <= self.listen_port <= 65535:
            raise ConfigError("dLegerListenPort", f"must be -1..65535, got {self.listen_port}")
        if self.mapped_file_size_for_entry_index <= 0 or self.mapped_file_size_for_entry_index % 32:
            raise ConfigError("mappedFileSizeForEntryIndex", "must be a positive multiple of 32")
        self.raft_config()  # the timing checks

    @classmethod
    def parse(cls, group: str, self_id: str, peers: str, **settings: object) -> DLedgerConfig:
        """From the broker properties' text values."""
        return cls(group=group, self_id=self_id, peers=parse_peers(peers), **settings)  # type: ignore[arg-type]

    @property
    def peers_text(self) -> str:
        """The canonical ``dLegerPeers`` text."""
        return format_peers(self.peers)

    @property
    def self_peer(self) -> Peer:
        """This node's entry of ``dLegerPeers``."""
        return next(p for p in self.peers if p.node_id == self.self_id)

    @property
    def bind_port(self) -> int:
        """The port the Raft server listens on."""
        return self.listen_port if self.listen_port >= 0 else self.self_peer.port

    @property
    def broker_id(self) -> int:
        """The broker id of this node as a slave: its id's digits plus one (``n0`` -> 1)."""
        return parse_self_id(self.self_id) + 1

    def base_dir(self, store_root: str) -> str:
        """``<storePathRootDir>/dledger-<selfId>``."""
        return os.path.join(store_root, f"dledger-{self.self_id}")

    def raft_config(self) -> RaftConfig:
        """The core's settings."""
        return RaftConfig(
            group=self.group,
            self_id=self.self_id,
            peers=tuple(p.node_id for p in self.peers),
            heart_beat_time_interval_ms=self.heart_beat_time_interval_ms,
            max_heart_beat_leak=self.max_heart_beat_leak,
            min_vote_interval_ms=self.min_vote_interval_ms,
            max_vote_interval_ms=self.max_vote_interval_ms,
            vote_wait_ms=self.vote_wait_ms,
            max_pending_requests_num=self.max_pending_requests_num,
            max_wait_ack_time_ms=self.max_wait_ack_time_ms,
            max_push_time_out_ms=self.max_push_time_out_ms,
            max_push_batch=self.max_push_batch,
            max_pushes_in_flight=self.max_pushes_in_flight,
            preferred_leader_ids=self.preferred_leader_ids,
        )
