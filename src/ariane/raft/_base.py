"""State shared by the election and replication halves of :class:`~ariane.raft.RaftNode`,
and the role transitions (DLedger's ``MemberState`` plus ``changeRoleTo*``)."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from ariane.raft.config import RaftConfig
from ariane.raft.effects import Effect, ProposalsFailed, RoleChanged, SaveState, Send
from ariane.raft.log import RaftLog
from ariane.raft.messages import Code, Message, ParseResult, PushType, Role, TransferRequest

__all__ = ["HeartBeatRound", "NodeBase", "PeerProgress", "PendingBlock", "VoteRound"]


@dataclass(slots=True)
class VoteRound:
    """One ``voteForQuorumResponses`` in flight."""

    term: int
    seq: int
    started_ms: int
    deadline_ms: int
    ledger_end_index: int
    ledger_end_term: int
    answered: set[str] = field(default_factory=set)
    all_num: int = 0
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    known_max_term: int = -1
    already_has_leader: bool = False


@dataclass(slots=True)
class HeartBeatRound:
    """One ``sendHeartbeats`` in flight."""

    term: int
    seq: int
    deadline_ms: int
    answered: set[str] = field(default_factory=set)
    all_num: int = 1
    succ_num: int = 1
    not_ready_num: int = 0
    max_term: int = -1
    inconsistent_leader: bool = False


@dataclass(slots=True)
class PeerProgress:
    """The leader's ``EntryDispatcher`` for one follower."""

    peer: str
    state: PushType = PushType.COMPARE
    compare_index: int = -1
    truncate_index: int = -1
    wipe: bool = False
    #: the COMPARE/TRUNCATE in flight: (seq, sent at)
    ctl_seq: int | None = None
    ctl_sent_ms: int = 0
    write_index: int = -1
    #: last index known stored on the peer (this term)
    watermark: int = -1
    #: APPEND pushes in flight: first index -> (last index, sent at)
    pending: dict[int, tuple[int, int]] = field(default_factory=dict)
    inflight: int = 0
    commit_sent: int = -1
    last_commit_push_ms: int = -1
    last_ack_ms: int = -1


@dataclass(slots=True)
class PendingBlock:
    """Consecutive proposals of this leader waiting for commit."""

    first: int
    last: int
    deadline_ms: int


class NodeBase:
    """Fields and role transitions. Not used on its own."""

    def __init__(
        self,
        config: RaftConfig,
        *,
        term: int,
        voted_for: str | None,
        log: RaftLog,
        rng: random.Random,
        now_ms: int,
    ) -> None:
        self.config = config
        self.self_id = config.self_id
        self.group = config.group
        self.peers = frozenset(config.peers)
        self.others = config.others
        self.quorum = config.quorum
        self.rng = rng
        self.term = term
        self.voted_for = voted_for
        self.log = log
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.out: list[Effect] = []
        self._seq = 0
        # -- election (DLedgerLeaderElector) --
        self.known_max_term = -1
        self.need_increase_term = False
        self.next_vote_ms = -1
        self.last_vote_cost_ms = 0
        # a node that voted for itself in its persisted term may have led that term and lost
        # unsynced entries: it must not lead that term again, so it starts in the next one
        self.last_parse = (
            ParseResult.WAIT_TO_VOTE_NEXT
            if voted_for == self.self_id
            else ParseResult.WAIT_TO_REVOTE
        )
        self.vote_round: VoteRound | None = None
        self.hb_round: HeartBeatRound | None = None
        self.last_leader_hb_ms = now_ms
        self.last_send_hb_ms = -1
        self.last_succ_hb_ms = now_ms
        # -- leadership transfer --
        self.transferee: str | None = None
        self.transfer_deadline_ms = 0
        self.term_to_take_leadership = -1
        self.take_request: TransferRequest | None = None
        self.take_deadline_ms = 0
        self.take_started = False
        self.next_preferred_check_ms = now_ms
        # -- leader (DLedgerEntryPusher) --
        self.progress: dict[str, PeerProgress] = {}
        self.proposals: deque[PendingBlock] = deque()
        self.proposal_count = 0
        # -- follower (EntryHandler) --
        self.buffer: dict[int, tuple[Message, int]] = {}
        self.pending_acks: deque[tuple[int, Message]] = deque()
        self.verified = -1
        #: highest seq of a push applied from the current leader: an older TRUNCATE (a late
        #: duplicate) must never cut what was appended after it
        self.push_seq_floor = -1
        self.last_gap_check_ms = now_ms

    # -- output helpers ------------------------------------------------------------------
    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def send(self, msg: Message) -> None:
        self.out.append(Send(msg))

    def save_state(self) -> None:
        self.out.append(SaveState(self.term, self.voted_for))

    def is_quorum(self, n: int) -> bool:
        return n >= self.quorum

    # -- MemberState ---------------------------------------------------------------------
    def next_term(self) -> int:
        """``nextTerm``: the known maximum or one more; forget the vote; persist."""
        if self.known_max_term > self.term:
            self.term = self.known_max_term
        else:
            self.term += 1
        self.voted_for = None
        self.save_state()
        return self.term

    def set_vote(self, candidate: str) -> None:
        if self.voted_for != candidate:
            self.voted_for = candidate
            self.save_state()

    def _fire(self, old: tuple[Role, int, str | None]) -> None:
        if old != (self.role, self.term, self.leader_id):
            self.out.append(RoleChanged(self.term, self.role, self.leader_id))
            self.on_role_changed(old[0])

    def _leave(self, now_ms: int) -> None:
        """Drop what belongs to the role being left."""
        if self.role is Role.LEADER:
            self.fail_proposals(Code.TERM_CHANGED)
            self.progress.clear()
            self.hb_round = None
            self.transferee = None
        elif self.role is Role.FOLLOWER:
            self.buffer.clear()
            self.pending_acks.clear()
        self.vote_round = None

    def change_role_to_candidate(self, term: int, now_ms: int, *, give_up: bool = False) -> None:
        """``changeRoleToCandidate``: only for a term at least ours; does not bump the term.

        ``give_up`` (a follower lost its leader, or a leader its quorum) makes the next vote,
        after a random delay below ``max_vote_interval_ms - min_vote_interval_ms``, start a
        new term: voting again in a term that had a leader cannot succeed.
        """
        if term < self.term:
            return
        old = (self.role, self.term, self.leader_id)
        if self.role is not Role.CANDIDATE:
            self._leave(now_ms)
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.known_max_term = max(self.known_max_term, term)
        if give_up:
            self.last_parse = ParseResult.WAIT_TO_VOTE_NEXT
            cfg = self.config
            spread = cfg.max_vote_interval_ms - cfg.min_vote_interval_ms
            self.next_vote_ms = now_ms + self.rng.randrange(spread)
        self._fire(old)

    def change_role_to_follower(self, term: int, leader_id: str, now_ms: int) -> None:
        """``changeRoleToFollower``: requires ``term`` to be ours."""
        if term != self.term:
            return
        old = (self.role, self.term, self.leader_id)
        if self.role is not Role.FOLLOWER:
            self._leave(now_ms)
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.last_leader_hb_ms = now_ms
        self.verified = self.log.committed
        self.push_seq_floor = -1
        self.last_gap_check_ms = now_ms
        self._fire(old)

    # -- hooks for the halves --------------------------------------------------------------
    def on_role_changed(self, old_role: Role) -> None:
        """Called after every role change (the take-leadership task listens)."""

    def on_become_leader(self, now_ms: int) -> None:
        """Start replicating (the replication half)."""

    def step_down_for(self, term: int, now_ms: int) -> None:
        """A peer answered in a higher term (the election half)."""

    def on_peer_alive(self, peer: str, now_ms: int) -> None:
        """A heartbeat answer came from a peer that follows us (the replication half)."""

    def fail_proposals(self, code: Code) -> None:
        """Fail every pending proposal with ``code``."""
        while self.proposals:
            block = self.proposals.popleft()
            self.out.append(ProposalsFailed(block.first, block.last, code))
        self.proposal_count = 0
