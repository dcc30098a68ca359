"""One Raft node as a pure state machine (DLedger's ``DLedgerServer`` without the I/O).

How it works: the shell feeds the node messages (:meth:`RaftNode.step`), the passing of time
(:meth:`RaftNode.tick`, due at :meth:`RaftNode.next_deadline_ms`), "entries persisted up to"
notices (:meth:`RaftNode.persisted`), proposals and transfer requests, each with the current
time in milliseconds. Each call leaves effects in :attr:`RaftNode.out` (take them with
:meth:`RaftNode.take`) that the shell carries out in order: send messages, save the term and
vote, append or truncate log entries, apply committed entries, answer proposals, follow role
changes. The node reads no clock, opens no socket, starts no thread and draws randomness only
from the ``random.Random`` it is given, so a seed replays it exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ariane.raft.config import RaftConfig
from ariane.raft.effects import Effect
from ariane.raft.election import Elector
from ariane.raft.log import RaftLog
from ariane.raft.messages import (
    Code,
    HeartBeatRequest,
    HeartBeatResponse,
    Message,
    PushRequest,
    PushResponse,
    PushType,
    Role,
    TransferRequest,
    TransferResponse,
    VoteRequest,
    VoteResponse,
)
from ariane.raft.replication import Replicator

__all__ = ["NodeStatus", "PeerStatus", "RaftNode"]


@dataclass(frozen=True, slots=True)
class PeerStatus:
    """What the leader knows of one follower."""

    peer: str
    state: str
    watermark: int
    last_ack_ms: int


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """A snapshot for metrics and admin tools."""

    self_id: str
    group: str
    role: Role
    term: int
    leader_id: str | None
    voted_for: str | None
    ledger_begin_index: int
    ledger_end_index: int
    ledger_end_term: int
    committed_index: int
    persisted_index: int
    peers: tuple[PeerStatus, ...]
    transferee: str | None


class RaftNode(Elector, Replicator):
    """A Raft node (election, replication, transfer).

    Args:
        config: the node's settings.
        term: the persisted term (0 for a new node).
        voted_for: the persisted vote in that term.
        log: what the node's log holds (a fresh empty log by default).
        rng: the source of the random vote intervals.
        now_ms: the current time.
    """

    def __init__(
        self,
        config: RaftConfig,
        *,
        term: int = 0,
        voted_for: str | None = None,
        log: RaftLog | None = None,
        rng: random.Random | None = None,
        now_ms: int = 0,
    ) -> None:
        super().__init__(
            config,
            term=term,
            voted_for=voted_for,
            log=log if log is not None else RaftLog(),
            rng=rng if rng is not None else random.Random(),
            now_ms=now_ms,
        )

    # -- inputs ------------------------------------------------------------------------------
    def step(self, msg: Message, now_ms: int) -> None:
        """Handle a message from a peer."""
        if msg.group != self.group or msg.remote_id != self.self_id:
            if isinstance(msg, PushRequest):
                code = Code.UNKNOWN_GROUP if msg.group != self.group else Code.UNKNOWN_MEMBER
                self._answer(msg, code, -1)
            return
        if msg.local_id not in self.peers or msg.local_id == self.self_id:
            return
        if isinstance(msg, PushRequest):
            self.on_push_request(msg, now_ms)
        elif isinstance(msg, PushResponse):
            self.on_push_response(msg, now_ms)
        elif isinstance(msg, HeartBeatRequest):
            self.on_heartbeat_request(msg, now_ms)
        elif isinstance(msg, HeartBeatResponse):
            self.on_heartbeat_response(msg, now_ms)
        elif isinstance(msg, VoteRequest):
            self.on_vote_request(msg, now_ms)
        elif isinstance(msg, VoteResponse):
            self.on_vote_response(msg, now_ms)
        elif isinstance(msg, TransferRequest):
            self.on_transfer_request(msg, now_ms)
        elif isinstance(msg, TransferResponse):
            self.on_transfer_response(msg, now_ms)
        self.maintain(now_ms)

    def tick(self, now_ms: int) -> None:
        """Let time pass: votes, heartbeats, resends, timeouts, preferred-leader checks."""
        self.maintain(now_ms)
        if self.role is Role.LEADER:
            self.expire_proposals(now_ms)
            self.check_transfer(now_ms)
            self.drive(now_ms, commits=True)
        elif self.role is Role.FOLLOWER:
            self.check_gaps(now_ms)
        self.check_take_leadership(now_ms)
        self.maintain(now_ms)

    def persisted(self, index: int, term: int, now_ms: int) -> None:
        """The shell made entries up to ``index`` (of ``term``) durable."""
        log = self.log
        index = min(index, log.end)
        if index <= log.persisted or log.term_at(index) != term:
            return
        log.persisted = index
        if self.role is Role.LEADER:
            if self.update_commit(now_ms):
                self.drive(now_ms)
        elif self.role is Role.FOLLOWER:
            self.acknowledge_persisted()
            self.check_take_leadership(now_ms)

    def propose(self, payloads: tuple[object, ...], now_ms: int) -> tuple[Code, int]:
        """Append entries as leader (they go out on the next :meth:`tick`).

        Returns:
            (SUCCESS, index of the first entry) or (why not, -1).
        """
        # no quorum check here: new entries are persisted nowhere yet, so they cannot move
        # the commit index (what else could was checked when its marks last moved)
        return self.propose_entries(payloads, now_ms)

    def send_failed(self, msg: Message, now_ms: int) -> None:
        """The shell could not deliver ``msg`` (the peer is unreachable)."""
        if isinstance(msg, VoteRequest | HeartBeatRequest):
            self.request_failed(msg, now_ms)
            self.maintain(now_ms)
        elif isinstance(msg, TransferRequest) and self.role is Role.LEADER:
            self.transferee = None

    def discard_before(self, index: int) -> None:
        """The shell deleted entries below ``index`` (expired files; all committed)."""
        self.log.discard_before(min(index, self.log.committed + 1))

    # -- outputs -----------------------------------------------------------------------------
    def take(self) -> list[Effect]:
        """The effects produced since the last call, in order."""
        out, self.out = self.out, []
        return out

    def next_deadline_ms(self) -> int:
        """When :meth:`tick` has something to do next (a time in the past means now)."""
        cfg = self.config
        role = self.role
        times: list[int] = []
        if role is Role.CANDIDATE:
            if self.vote_round is not None:
                times.append(self.vote_round.deadline_ms)
            elif self.need_increase_term:
                times.append(0)
            else:
                times.append(self.next_vote_ms)
        elif role is Role.FOLLOWER:
            leak = cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms
            times.append(self.last_leader_hb_ms + leak + 1)
            if self.buffer:
                times.append(self.last_gap_check_ms + cfg.follower_gap_time_out_ms)
        else:
            times.append(self._leader_deadline())
        if self.take_request is not None and not self.take_started:
            times.append(self.take_deadline_ms)
        return min(times)

    def _leader_deadline(self) -> int:
        cfg = self.config
        if self.hb_round is not None:
            soonest = self.hb_round.deadline_ms
        elif self.last_send_hb_ms < 0:
            return 0
        else:
            soonest = self.last_send_hb_ms + cfg.heart_beat_time_interval_ms + 1
        if self.proposals:
            soonest = min(soonest, self.proposals[0].deadline_ms)
        if self.transferee is not None:
            soonest = min(soonest, self.transfer_deadline_ms)
        if cfg.preferred_leader_ids:
            soonest = min(soonest, self.next_preferred_check_ms)
        end = self.log.end
        for p in self.progress.values():
            if p.state is not PushType.APPEND:
                if p.ctl_seq is None:
                    return 0
                soonest = min(soonest, p.ctl_sent_ms + cfg.compare_time_out_ms)
            elif p.pending:
                sent = p.pending.get(p.watermark + 1)
                oldest = next(iter(p.pending.values()))[1]
                if sent is not None:
                    soonest = min(soonest, sent[1] + cfg.max_push_time_out_ms)
                soonest = min(soonest, oldest + cfg.compare_time_out_ms)
                if (
                    p.write_index <= end
                    and p.inflight < cfg.max_pending_size
                    and len(p.pending) < cfg.max_pushes_in_flight
                ):
                    return 0
            elif p.write_index <= end or p.commit_sent < self.log.committed:
                return 0
            else:
                soonest = min(soonest, p.last_commit_push_ms + cfg.commit_push_interval_ms)
        return soonest

    def status(self) -> NodeStatus:
        """What this node knows now."""
        log = self.log
        peers = tuple(
            PeerStatus(p.peer, p.state.name, p.watermark, p.last_ack_ms)
            for p in self.progress.values()
        )
        return NodeStatus(
            self.self_id, self.group, self.role, self.term, self.leader_id, self.voted_for,
            log.begin, log.end, log.last_term, log.committed, log.persisted, peers,
            self.transferee,
        )  # fmt: skip

    @property
    def is_leader(self) -> bool:
        """True while this node leads its term."""
        return self.role is Role.LEADER
