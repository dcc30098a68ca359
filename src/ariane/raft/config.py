"""Settings of one Raft node (DLedger's ``DLedgerConfig``, election and replication part)."""

from __future__ import annotations

from dataclasses import dataclass

from ariane.errors import ConfigError

__all__ = ["RaftConfig"]


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """One node of one group. Defaults are DLedger's (spec part 2.4).

    Args:
        group: the group name (``dLegerGroup``).
        self_id: this node (``dLegerSelfId``).
        peers: every member's id, this node included, in ``dLegerPeers`` order.
        heart_beat_time_interval_ms: the leader's heartbeat period.
        max_heart_beat_leak: heartbeats a follower misses before it stands as candidate (and
            a leader without a quorum of heartbeat answers steps down after as many).
        min_vote_interval_ms: shortest random wait before a candidate's next vote.
        max_vote_interval_ms: longest (exclusive) random wait before the next vote.
        vote_wait_ms: how long a vote round waits for answers (plus a random part below
            ``max_vote_interval_ms``).
        max_pending_requests_num: appends in flight on the leader before it answers
            LEADER_PENDING_FULL.
        max_wait_ack_time_ms: an append not committed by then fails with
            WAIT_QUORUM_ACK_TIMEOUT.
        max_push_time_out_ms: a push not answered by then is sent again.
        max_pending_size: entries in flight to one follower (the push window).
        max_push_batch: entries in one APPEND push.
        max_pushes_in_flight: APPEND pushes unanswered by one follower before the next
            waits (new entries then gather into one push: under load, fewer and fuller
            frames; DLedger bounds only the entries, ``max_pending_size``; the DLedger
            CommitLog runs with one, see ``DLedgerConfig``).
        compare_time_out_ms: a COMPARE or TRUNCATE not answered by then is sent again.
        commit_push_interval_ms: an idle follower hears the commit index this often.
        follower_gap_time_out_ms: a follower holding out-of-order pushes with a gap this old
            answers INCONSISTENT_STATE so that the leader compares again.
        preferred_leader_ids: nodes that should lead when they are up and caught up
            (``preferredLeaderIds``); the leader hands over to one of them.
        max_leadership_transfer_wait_index: a transferee may lag at most this many entries.
        leadership_transfer_wait_timeout_ms: how long a transferee waits to catch up.
        min_take_leadership_vote_interval_ms: vote wait of a node taking leadership.
        max_take_leadership_vote_interval_ms: (exclusive) upper bound of that wait.
        check_preferred_leader_interval_ms: how often a leader checks for a preferred node.
    """

    group: str
    self_id: str
    peers: tuple[str, ...]
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    vote_wait_ms: int = 3000
    max_pending_requests_num: int = 10000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    max_pending_size: int = 1000
    max_push_batch: int = 64
    max_pushes_in_flight: int = 2
    compare_time_out_ms: int = 3000
    commit_push_interval_ms: int = 1000
    follower_gap_time_out_ms: int = 1000
    preferred_leader_ids: tuple[str, ...] = ()
    max_leadership_transfer_wait_index: int = 1000
    leadership_transfer_wait_timeout_ms: int = 1000
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100
    check_preferred_leader_interval_ms: int = 1000

    def __post_init__(self) -> None:
        if self.self_id not in self.peers:
            raise ConfigError("dLegerSelfId", f"{self.self_id!r} is not one of the peers")
        if len(set(self.peers)) != len(self.peers):
            raise ConfigError("dLegerPeers", "a node id appears twice")
        positive = {
            "heart_beat_time_interval_ms": self.heart_beat_time_interval_ms,
            "max_heart_beat_leak": self.max_heart_beat_leak,
            "vote_wait_ms": self.vote_wait_ms,
            "max_pending_size": self.max_pending_size,
            "max_push_batch": self.max_push_batch,
            "max_pushes_in_flight": self.max_pushes_in_flight,
            "max_push_time_out_ms": self.max_push_time_out_ms,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(name, f"must be positive, not {value}")
        if not 0 <= self.min_vote_interval_ms < self.max_vote_interval_ms:
            raise ConfigError(
                "minVoteIntervalMs", "needs 0 <= minVoteIntervalMs < maxVoteIntervalMs"
            )
        lo, hi = (
            self.min_take_leadership_vote_interval_ms,
            self.max_take_leadership_vote_interval_ms,
        )
        if not 0 <= lo < hi:
            raise ConfigError(
                "minTakeLeadershipVoteIntervalMs",
                "needs 0 <= minTakeLeadershipVoteIntervalMs < maxTakeLeadershipVoteIntervalMs",
            )

    @property
    def quorum(self) -> int:
        """``isQuorum`` threshold: more than half of the peers, self included."""
        return len(self.peers) // 2 + 1

    @property
    def others(self) -> tuple[str, ...]:
        """Every peer but this node."""
        return tuple(p for p in self.peers if p != self.self_id)
