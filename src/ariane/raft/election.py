"""Election, heartbeats and leadership transfer (DLedger's ``DLedgerLeaderElector``).

How it works, as chapter 9 of the book describes it (spec part 2.5-2.8), turned from a thread
that sleeps into a state machine driven by messages and time:

* A node starts as CANDIDATE. When its vote time comes it opens a *vote round*: it asks every
  peer, itself included through the same ``handle_vote``, and closes the round when a quorum
  accepted, when accepted + TERM_NOT_READY answers reach a quorum, when a peer reports a
  leader, when every peer answered (or could not be reached), or at the round deadline
  (``vote_wait_ms`` + a random part). The answers are arbitrated by the book's table into a
  :class:`~ariane.raft.messages.ParseResult`: PASSED makes it leader; WAIT_TO_VOTE_NEXT bumps
  the term before the next round; REVOTE_IMMEDIATELY votes again at once in the same term.
* A voter checks the candidate's log (last term, then last index) before terms, as upstream
  does today; a request of a higher term is refused with REJECT_TERM_NOT_READY and makes the
  voter a candidate of that term, which lets the requester revote at once.
* The leader sends heartbeats every ``heart_beat_time_interval_ms``; it steps down after
  ``max_heart_beat_leak`` intervals without a quorum of answers. A follower that hears nothing
  for as long stands as candidate.
* Leadership transfer: the leader stops taking appends, asks the transferee to take over once
  its log reaches the leader's end; the transferee stands in the next term with a short vote
  interval and voters that wait to take leadership themselves refuse others.

Deviations from DLedger, for safety and faster failover: a node that gives up on its leader
(or a leader on its quorum) starts a new term at once, after a random delay below
``max_vote_interval_ms - min_vote_interval_ms``; a node restarting with a vote for itself
does the same. The term and vote are persisted (:class:`~ariane.raft.effects.SaveState`)
before anything is sent.
"""

from __future__ import annotations

from ariane.raft._base import HeartBeatRound, NodeBase, VoteRound
from ariane.raft.messages import (
    Code,
    HeartBeatRequest,
    HeartBeatResponse,
    ParseResult,
    Role,
    TransferRequest,
    TransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

__all__ = ["Elector"]

_LEDGER_BEHIND = (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
_TERM_BEHIND = (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, VoteResult.REJECT_EXPIRED_VOTE_TERM)


class Elector(NodeBase):
    """The election half of :class:`~ariane.raft.RaftNode`."""

    # -- StateMaintainer ------------------------------------------------------------------
    def maintain(self, now_ms: int) -> None:
        """``maintainState``, repeated while it changes the role (a vote that passes makes a
        leader that sends heartbeats at once)."""
        for _ in range(4):
            role = self.role
            if role is Role.LEADER:
                self._maintain_leader(now_ms)
            elif role is Role.FOLLOWER:
                self._maintain_follower(now_ms)
            else:
                self._maintain_candidate(now_ms)
            if self.role is role:
                return

    def _next_vote_time(self, now_ms: int) -> int:
        cfg = self.config
        if self.is_taking_leadership():
            lo = cfg.min_take_leadership_vote_interval_ms
            hi = cfg.max_take_leadership_vote_interval_ms
            return now_ms + lo + self.rng.randrange(hi - lo)
        lo, hi = cfg.min_vote_interval_ms, cfg.max_vote_interval_ms
        return now_ms + self.last_vote_cost_ms + lo + self.rng.randrange(hi - lo)

    def is_taking_leadership(self) -> bool:
        """Standing for the term a transfer hands over (``isTakingLeadership``; also for a
        transferee that is not among ``preferred_leader_ids``)."""
        return self.term_to_take_leadership == self.term and (
            self.take_started or self.self_id in self.config.preferred_leader_ids
        )

    def _maintain_candidate(self, now_ms: int) -> None:
        if self.vote_round is not None:
            if now_ms >= self.vote_round.deadline_ms:
                self._close_vote_round(now_ms)
            return
        if now_ms < self.next_vote_ms and not self.need_increase_term:
            return
        if self.last_parse is ParseResult.WAIT_TO_VOTE_NEXT or self.need_increase_term:
            self.next_term()
            self.last_parse = ParseResult.WAIT_TO_REVOTE
        if self.need_increase_term:
            self.next_vote_ms = self._next_vote_time(now_ms)
            self.need_increase_term = False
            return
        self._open_vote_round(now_ms)

    def _open_vote_round(self, now_ms: int) -> None:
        log = self.log
        seq = self.next_seq()
        wait = self.config.vote_wait_ms + self.rng.randrange(self.config.max_vote_interval_ms)
        rnd = VoteRound(self.term, seq, now_ms, now_ms + wait, log.end, log.last_term)
        self.vote_round = rnd
        own = VoteRequest(
            self.group, self.self_id, self.self_id, rnd.term, self.self_id, log.end,
            log.last_term, seq,
        )  # fmt: skip
        self._count_vote(
            rnd, self.self_id, self.handle_vote(own, now_ms, self_vote=True), self.term
        )
        if self.vote_round is not rnd or self.role is not Role.CANDIDATE:
            return
        for peer in self.others:
            req = VoteRequest(
                self.group, self.self_id, peer, rnd.term, self.self_id, rnd.ledger_end_index,
                rnd.ledger_end_term, seq,
            )  # fmt: skip
            self.send(req)
        self._maybe_close_vote_round(now_ms)

    def _count_vote(self, rnd: VoteRound, peer: str, result: VoteResult, term: int) -> None:
        if peer in rnd.answered:
            return
        rnd.answered.add(peer)
        rnd.all_num += 1
        if result is VoteResult.UNKNOWN:
            return
        rnd.valid_num += 1
        if result is VoteResult.ACCEPT:
            rnd.accepted_num += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            rnd.already_has_leader = True
        elif result in _TERM_BEHIND:
            rnd.known_max_term = max(rnd.known_max_term, term)
        elif result in _LEDGER_BEHIND:
            rnd.bigger_ledger_num += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            rnd.not_ready_term_num += 1

    def _maybe_close_vote_round(self, now_ms: int) -> None:
        rnd = self.vote_round
        if rnd is None:
            return
        if (
            rnd.already_has_leader
            or self.is_quorum(rnd.accepted_num)
            or self.is_quorum(rnd.accepted_num + rnd.not_ready_term_num)
            or rnd.all_num >= len(self.peers)
        ):
            self._close_vote_round(now_ms)

    def _close_vote_round(self, now_ms: int) -> None:
        """The arbitration table of ``maintainAsCandidate``."""
        rnd = self.vote_round
        assert rnd is not None
        self.vote_round = None
        self.last_vote_cost_ms = now_ms - rnd.started_ms
        if self.role is not Role.CANDIDATE or rnd.term != self.term:
            return
        cfg = self.config
        if rnd.known_max_term > rnd.term:
            parse = ParseResult.WAIT_TO_VOTE_NEXT
            self.next_vote_ms = self._next_vote_time(now_ms)
            self.change_role_to_candidate(rnd.known_max_term, now_ms)
        elif rnd.already_has_leader:
            parse = ParseResult.WAIT_TO_VOTE_NEXT
            leak = cfg.heart_beat_time_interval_ms * cfg.max_heart_beat_leak
            self.next_vote_ms = self._next_vote_time(now_ms) + leak
        elif not self.is_quorum(rnd.valid_num):
            parse = ParseResult.WAIT_TO_REVOTE
            self.next_vote_ms = self._next_vote_time(now_ms)
        elif self.is_quorum(rnd.accepted_num):
            parse = ParseResult.PASSED
        elif self.is_quorum(rnd.accepted_num + rnd.not_ready_term_num):
            parse = ParseResult.REVOTE_IMMEDIATELY
            self.next_vote_ms = now_ms
        elif self.is_quorum(rnd.accepted_num + rnd.bigger_ledger_num):
            parse = ParseResult.WAIT_TO_REVOTE
            self.next_vote_ms = self._next_vote_time(now_ms)
        else:
            parse = ParseResult.WAIT_TO_VOTE_NEXT
            self.next_vote_ms = self._next_vote_time(now_ms)
        self.last_parse = parse
        if parse is ParseResult.PASSED:
            self.change_role_to_leader(rnd.term, now_ms)

    def change_role_to_leader(self, term: int, now_ms: int) -> None:
        """``changeRoleToLeader``: only in our term, as candidate."""
        if term != self.term or self.role is not Role.CANDIDATE:
            return
        old = (self.role, self.term, self.leader_id)
        self.vote_round = None
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self.last_send_hb_ms = -1
        self.last_succ_hb_ms = now_ms
        self.next_preferred_check_ms = now_ms + self.config.check_preferred_leader_interval_ms
        self._fire(old)
        self.on_become_leader(now_ms)

    def _maintain_follower(self, now_ms: int) -> None:
        cfg = self.config
        if (
            now_ms - self.last_leader_hb_ms
            > cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms
        ):
            self.change_role_to_candidate(self.term, now_ms, give_up=True)

    def _maintain_leader(self, now_ms: int) -> None:
        if self.hb_round is not None:
            if now_ms >= self.hb_round.deadline_ms:
                self._close_hb_round(now_ms)
            return
        interval = self.config.heart_beat_time_interval_ms
        if self.last_send_hb_ms >= 0 and now_ms - self.last_send_hb_ms <= interval:
            return
        self.last_send_hb_ms = now_ms
        seq = self.next_seq()
        self.hb_round = HeartBeatRound(self.term, seq, now_ms + interval)
        for peer in self.others:
            self.send(
                HeartBeatRequest(self.group, self.self_id, peer, self.term, self.self_id, seq)
            )
        self._maybe_close_hb_round(now_ms)

    # -- votes -----------------------------------------------------------------------------
    def handle_vote(self, req: VoteRequest, now_ms: int, *, self_vote: bool) -> VoteResult:
        """``handleVote``: decide, and persist an accepted vote."""
        if req.leader_id not in self.peers:
            return VoteResult.REJECT_UNKNOWN_LEADER
        if not self_vote and req.leader_id == self.self_id:
            return VoteResult.REJECT_UNEXPECTED_LEADER
        log = self.log
        if req.ledger_end_term < log.last_term:
            return VoteResult.REJECT_EXPIRED_LEDGER_TERM
        if req.ledger_end_term == log.last_term and req.ledger_end_index < log.end:
            return VoteResult.REJECT_SMALL_LEDGER_END_INDEX
        if req.term < self.term:
            return VoteResult.REJECT_EXPIRED_VOTE_TERM
        if req.term == self.term:
            if self.voted_for is not None and self.voted_for != req.leader_id:
                if self.leader_id is not None:
                    return VoteResult.REJECT_ALREADY_HAS_LEADER
                return VoteResult.REJECT_ALREADY_VOTED
        else:
            self.change_role_to_candidate(req.term, now_ms)
            self.need_increase_term = True
            return VoteResult.REJECT_TERM_NOT_READY
        if req.term < log.last_term:
            return VoteResult.REJECT_TERM_SMALL_THAN_LEDGER
        if (
            not self_vote
            and self.is_taking_leadership()
            and req.ledger_end_term == log.last_term
            and log.end >= req.ledger_end_index
        ):
            return VoteResult.REJECT_TAKING_LEADERSHIP
        self.set_vote(req.leader_id)
        return VoteResult.ACCEPT

    def on_vote_request(self, req: VoteRequest, now_ms: int) -> None:
        result = self.handle_vote(req, now_ms, self_vote=False)
        term = (
            self.log.last_term if result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER else self.term
        )
        self.send(VoteResponse(self.group, self.self_id, req.local_id, term, req.seq, result))

    def on_vote_response(self, resp: VoteResponse, now_ms: int) -> None:
        rnd = self.vote_round
        if rnd is None or resp.seq != rnd.seq or resp.local_id not in self.peers:
            return
        self._count_vote(rnd, resp.local_id, resp.result, resp.term)
        self._maybe_close_vote_round(now_ms)

    # -- heartbeats ------------------------------------------------------------------------
    def on_heartbeat_request(self, req: HeartBeatRequest, now_ms: int) -> None:
        """``handleHeartBeat``."""
        if req.leader_id not in self.peers or req.local_id != req.leader_id:
            code = Code.UNKNOWN_MEMBER
        elif req.term < self.term:
            code = Code.EXPIRED_TERM
        elif req.term == self.term:
            if self.leader_id is None and self.role is not Role.LEADER:
                self.change_role_to_follower(req.term, req.leader_id, now_ms)
                code = Code.SUCCESS
            elif self.leader_id == req.leader_id:
                self.last_leader_hb_ms = now_ms
                code = Code.SUCCESS
            else:
                code = Code.INCONSISTENT_LEADER
        else:
            self.change_role_to_candidate(req.term, now_ms)
            self.need_increase_term = True
            code = Code.TERM_NOT_READY
        self.send(
            HeartBeatResponse(self.group, self.self_id, req.local_id, self.term, req.seq, code)
        )

    def on_heartbeat_response(self, resp: HeartBeatResponse, now_ms: int) -> None:
        rnd = self.hb_round
        if rnd is None or resp.seq != rnd.seq or resp.local_id in rnd.answered:
            # a late answer (the round closed at a quorum)
            if resp.code is Code.EXPIRED_TERM:
                # from a peer in a higher term (e.g. a candidate whose log is too old to
                # win): step down so that a new election brings it back
                self.step_down_for(resp.term, now_ms)
            elif resp.code is Code.SUCCESS and resp.term == self.term:
                self.on_peer_alive(resp.local_id, now_ms)
            return
        rnd.answered.add(resp.local_id)
        rnd.all_num += 1
        code = resp.code
        if code is Code.SUCCESS:
            rnd.succ_num += 1
            self.on_peer_alive(resp.local_id, now_ms)
        elif code is Code.EXPIRED_TERM:
            rnd.max_term = max(rnd.max_term, resp.term)
        elif code is Code.INCONSISTENT_LEADER:
            rnd.inconsistent_leader = True
        elif code is Code.TERM_NOT_READY:
            rnd.not_ready_num += 1
        self._maybe_close_hb_round(now_ms)

    def step_down_for(self, term: int, now_ms: int) -> None:
        """A peer answered in a higher term: a leader gives up (Raft's rule for any message
        of a higher term; DLedger only looks at the answers of the current round)."""
        if self.role is Role.LEADER and term > self.term:
            self.change_role_to_candidate(term, now_ms)
            self.need_increase_term = True

    def _maybe_close_hb_round(self, now_ms: int) -> None:
        rnd = self.hb_round
        if rnd is None:
            return
        if (
            self.is_quorum(rnd.succ_num)
            or self.is_quorum(rnd.succ_num + rnd.not_ready_num)
            or rnd.all_num >= len(self.peers)
        ):
            self._close_hb_round(now_ms)

    def _close_hb_round(self, now_ms: int) -> None:
        rnd = self.hb_round
        assert rnd is not None
        self.hb_round = None
        if self.role is not Role.LEADER or rnd.term != self.term:
            return
        cfg = self.config
        if self.is_quorum(rnd.succ_num):
            self.last_succ_hb_ms = now_ms
        elif self.is_quorum(rnd.succ_num + rnd.not_ready_num):
            self.last_send_hb_ms = -1
        elif rnd.max_term > self.term:
            self.step_down_for(rnd.max_term, now_ms)
        elif (
            rnd.inconsistent_leader
            or now_ms - self.last_succ_hb_ms
            > cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms
        ):
            self.change_role_to_candidate(self.term, now_ms, give_up=True)

    def request_failed(self, msg: VoteRequest | HeartBeatRequest, now_ms: int) -> None:
        """The shell could not deliver ``msg`` (no connection): count it as answered with
        nothing, as a failed RPC completes DLedger's latch."""
        if isinstance(msg, VoteRequest):
            rnd = self.vote_round
            if rnd is not None and msg.seq == rnd.seq:
                self._count_vote(rnd, msg.remote_id, VoteResult.UNKNOWN, -1)
                self._maybe_close_vote_round(now_ms)
            return
        hb = self.hb_round
        if hb is not None and msg.seq == hb.seq and msg.remote_id not in hb.answered:
            hb.answered.add(msg.remote_id)
            hb.all_num += 1
            self._maybe_close_hb_round(now_ms)

    # -- leadership transfer -----------------------------------------------------------------
    def transfer_leadership(self, transferee: str, now_ms: int) -> Code:
        """Hand leadership to ``transferee`` (``handleLeadershipTransfer`` on the leader).

        Returns SUCCESS when the transfer started (the outcome shows as a role change),
        otherwise why it did not: NOT_LEADER, UNKNOWN_MEMBER, LEADER_TRANSFERRING or
        FALL_BEHIND_TOO_MUCH.
        """
        if self.role is not Role.LEADER:
            return Code.NOT_LEADER
        if transferee not in self.peers:
            return Code.UNKNOWN_MEMBER
        if transferee == self.self_id:
            return Code.SUCCESS
        if self.transferee is not None:
            return Code.LEADER_TRANSFERRING
        progress = self.progress[transferee]
        if self.log.end - progress.watermark >= self.config.max_leadership_transfer_wait_index:
            return Code.FALL_BEHIND_TOO_MUCH
        self.transferee = transferee
        cfg = self.config
        self.transfer_deadline_ms = (
            now_ms + 2 * cfg.leadership_transfer_wait_timeout_ms + cfg.max_vote_interval_ms
        )
        req = TransferRequest(
            self.group, self.self_id, transferee, self.term, self.self_id, self.self_id,
            transferee, self.log.end, self.next_seq(),
        )  # fmt: skip
        self.send(req)
        return Code.SUCCESS

    def on_transfer_request(self, req: TransferRequest, now_ms: int) -> None:
        """The transferee's side (``handleTakeLeadership``): wait to catch up, then stand."""
        code: Code | None = None
        if req.transferee_id != self.self_id:
            code = Code.UNEXPECTED_ARGUMENT
        elif req.term != self.term:
            code = Code.INCONSISTENT_TERM
        elif req.transfer_id != self.leader_id:
            code = Code.INCONSISTENT_LEADER
        if code is not None:
            self._answer_take(req, code)
            return
        self.take_request = req
        self.take_started = False
        self.take_deadline_ms = now_ms + self.config.leadership_transfer_wait_timeout_ms
        self.check_take_leadership(now_ms)

    def check_take_leadership(self, now_ms: int) -> None:
        """Stand for election once caught up; give up at the deadline."""
        req = self.take_request
        if req is None or self.take_started:
            return
        if self.log.end >= req.take_leadership_ledger_index:
            if self.term != req.term:
                self.take_request = None
                self._answer_take(req, Code.INCONSISTENT_TERM)
                return
            target = req.term + 1
            self.take_started = True
            self.term_to_take_leadership = target
            self.change_role_to_candidate(target, now_ms)
            self.need_increase_term = True
        elif now_ms >= self.take_deadline_ms:
            self.take_request = None
            self._answer_take(req, Code.TAKE_LEADERSHIP_FAILED)

    def on_role_changed(self, old_role: Role) -> None:
        """``TakeLeadershipTask.check``."""
        req = self.take_request
        target = self.term_to_take_leadership
        if req is None or not self.take_started or target == -1:
            return
        code: Code | None
        if self.term > target:
            code = Code.EXPIRED_TERM
        elif self.term == target:
            code = {Role.LEADER: Code.SUCCESS, Role.FOLLOWER: Code.TAKE_LEADERSHIP_FAILED}.get(
                self.role
            )
        elif self.role is Role.FOLLOWER:
            code = Code.TAKE_LEADERSHIP_FAILED
        else:
            code = None  # still a candidate on the way to the target term
        if code is None:
            return
        self.take_request = None
        self.term_to_take_leadership = -1
        self._answer_take(req, code)

    def _answer_take(self, req: TransferRequest, code: Code) -> None:
        self.send(
            TransferResponse(self.group, self.self_id, req.local_id, self.term, req.seq, code)
        )

    def on_transfer_response(self, resp: TransferResponse, now_ms: int) -> None:
        if resp.code is not Code.SUCCESS and self.role is Role.LEADER:
            self.transferee = None

    def check_transfer(self, now_ms: int) -> None:
        """Give up a transfer that did not happen in time; hand over to a preferred leader."""
        if self.role is not Role.LEADER:
            return
        if self.transferee is not None and now_ms >= self.transfer_deadline_ms:
            self.transferee = None
        if now_ms < self.next_preferred_check_ms:
            return
        cfg = self.config
        self.next_preferred_check_ms = now_ms + cfg.check_preferred_leader_interval_ms
        preferred = cfg.preferred_leader_ids
        if not preferred or self.self_id in preferred or self.transferee is not None:
            return
        live_ms = cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms
        best: tuple[int, str] | None = None
        for peer in preferred:
            progress = self.progress.get(peer)
            if (
                progress is None
                or progress.last_ack_ms < 0
                or now_ms - progress.last_ack_ms > live_ms
            ):
                continue
            behind = self.log.end - progress.watermark
            if behind < cfg.max_leadership_transfer_wait_index and (
                best is None or behind < best[0]
            ):
                best = (behind, peer)
        if best is not None:
            self.transfer_leadership(best[1], now_ms)
