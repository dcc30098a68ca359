"""Log replication (DLedger's ``DLedgerEntryPusher``: ``EntryDispatcher``,
``QuorumAckChecker`` and ``EntryHandler``).

How it works. On the leader, one dispatcher per follower walks the book's states:

* COMPARE finds where the logs agree: it asks about the leader's last entry, then lower ones
  (jumping to the follower's end, or past a whole term run the follower reports as
  different). A match goes to APPEND, or to TRUNCATE when the follower holds more than the
  leader's whole log (DLedger truncates after any match below the follower's end, which can
  cut entries a late push brought that are already committed); no overlap at all (the follower is behind the leader's first retained entry, or nothing
  matches) to a TRUNCATE that wipes the follower and restarts it at the leader's begin.
* TRUNCATE cuts the follower's log after the matching entry, then APPEND.
* APPEND pipelines pushes of up to ``max_push_batch`` entries, at most ``max_pending_size``
  entries in ``max_pushes_in_flight`` pushes in flight (entries proposed meanwhile go out
  together with the next answer); the push that starts right after the follower's watermark is sent again after
  ``max_push_time_out_ms``; INCONSISTENT_STATE goes back to COMPARE. Every push carries the
  commit index; an idle follower gets a COMMIT push on the next tick after the commit index
  moved (not from the answer that moved it: under load the next APPEND, sent first, carries
  it, which halves the frames) and every ``commit_push_interval_ms``.

The quorum check takes the largest index stored on a quorum (the leader counts what it has
persisted) and commits it when that entry is of the leader's term (Raft's rule; DLedger adds
a NOOP entry when a new leader has uncommitted entries, and so do we). Proposals wait in
blocks and fail with WAIT_QUORUM_ACK_TIMEOUT after ``max_wait_ack_time_ms``, or TERM_CHANGED
when the node stops leading.

On the follower, pushes apply strictly in order: an APPEND whose first entry is past the end
waits in a buffer (a second one for the same index gets REPEATED_PUSH); each APPEND must
follow an entry of its ``check_term``; an entry of another term than the one held at its
index cuts the log there (never below the commit index). APPENDs are answered once the shell
has persisted them. COMPARE and TRUNCATE clear the buffer; a gap older than
``follower_gap_time_out_ms`` is answered INCONSISTENT_STATE so the leader compares again.
The commit index follows the leader's, capped by the last entry known to match the leader.
"""

from __future__ import annotations

from ariane.raft._base import NodeBase, PeerProgress, PendingBlock
from ariane.raft.effects import AppendEntries, Committed, ProposalsFailed, TruncateLog
from ariane.raft.messages import (
    NOOP,
    Code,
    Message,
    PushRequest,
    PushResponse,
    PushType,
    Role,
)

__all__ = ["Replicator"]

_BUFFER_MAX = 4096


class Replicator(NodeBase):
    """The replication half of :class:`~ariane.raft.RaftNode`."""

    # -- leader: proposals ------------------------------------------------------------------
    def propose_entries(self, payloads: tuple[object, ...], now_ms: int) -> tuple[Code, int]:
        """Append ``payloads`` as new entries of this leader's term.

        Returns:
            (SUCCESS, first index) or (NOT_LEADER / LEADER_TRANSFERRING /
            LEADER_PENDING_FULL, -1).
        """
        if self.role is not Role.LEADER:
            return Code.NOT_LEADER, -1
        if self.transferee is not None:
            return Code.LEADER_TRANSFERRING, -1
        n = len(payloads)
        if n == 0:
            return Code.SUCCESS, self.log.end + 1
        if self.proposal_count + n > self.config.max_pending_requests_num:
            return Code.LEADER_PENDING_FULL, -1
        first = self._append_own(payloads)
        deadline = now_ms + self.config.max_wait_ack_time_ms
        blocks = self.proposals
        if blocks and blocks[-1].deadline_ms == deadline and blocks[-1].last == first - 1:
            blocks[-1].last = first + n - 1
        else:
            blocks.append(PendingBlock(first, first + n - 1, deadline))
        self.proposal_count += n
        return Code.SUCCESS, first

    def _append_own(self, payloads: tuple[object, ...]) -> int:
        n = len(payloads)
        term = self.term
        first = self.log.append_term(n, term)
        out = self.out
        last = out[-1] if out else None
        if (
            type(last) is AppendEntries
            and last.first_index + len(last.terms) == first
            and last.terms[-1] == term
        ):
            # proposals in a row (a burst of puts before the shell takes the effects): one
            # effect for the run, written and reported persisted together, in the same order
            out[-1] = AppendEntries(
                last.first_index, last.terms + (term,) * n, last.payloads + payloads
            )
        else:
            out.append(AppendEntries(first, (term,) * n, payloads))
        return first

    def on_become_leader(self, now_ms: int) -> None:
        end = self.log.end
        for peer in self.others:
            self.progress[peer] = PeerProgress(peer, write_index=end + 1)
        if self.log.committed < end:
            self._append_own((NOOP,))
        self.update_commit(now_ms)
        self.drive(now_ms)

    def on_peer_alive(self, peer: str, now_ms: int) -> None:
        progress = self.progress.get(peer)
        if progress is None:
            return
        progress.last_ack_ms = now_ms
        if progress.state is PushType.APPEND:
            return
        # the peer follows us: send the COMPARE/TRUNCATE again if it was refused, or lost
        # (unanswered for a push timeout)
        lost = now_ms - progress.ctl_sent_ms >= self.config.max_push_time_out_ms
        if not progress.ctl_seq or lost:
            progress.ctl_seq = None
            self._drive_peer(progress, now_ms)

    # -- leader: dispatchers ----------------------------------------------------------------
    def drive(self, now_ms: int, *, commits: bool = False) -> None:
        """Run every dispatcher once (send what is due; COMMIT pushes only with
        ``commits``, which the tick passes)."""
        if self.role is not Role.LEADER:
            return
        for progress in self.progress.values():
            self._drive_peer(progress, now_ms, commits=commits)

    def _push(
        self,
        peer: str,
        kind: PushType,
        index: int,
        check_term: int,
        terms: tuple[int, ...] = (),
        *,
        wipe: bool = False,
    ) -> int:
        seq = self.next_seq()
        msg = PushRequest(
            self.group, self.self_id, peer, self.term, self.self_id, kind, index, check_term,
            self.log.committed, seq, terms, (), wipe,
        )  # fmt: skip
        self.send(msg)
        return seq

    def _drive_peer(self, p: PeerProgress, now_ms: int, *, commits: bool = False) -> None:
        cfg = self.config
        if p.state is not PushType.APPEND:
            if p.ctl_seq is None or now_ms - p.ctl_sent_ms >= cfg.compare_time_out_ms:
                self._send_control(p, now_ms)
            return
        log = self.log
        if p.pending:
            first = p.watermark + 1
            sent = p.pending.get(first)
            if sent is not None:
                if now_ms - sent[1] >= cfg.max_push_time_out_ms:
                    self._send_append(p, first, sent[0], now_ms)
            elif now_ms - next(iter(p.pending.values()))[1] >= cfg.compare_time_out_ms:
                self.to_compare(p)
                self._send_control(p, now_ms)
                return
        while (
            p.write_index <= log.end
            and p.inflight < cfg.max_pending_size
            and len(p.pending) < cfg.max_pushes_in_flight
        ):
            last = min(log.end, p.write_index + cfg.max_push_batch - 1)
            self._send_append(p, p.write_index, last, now_ms)
            p.inflight += last - p.write_index + 1
            p.write_index = last + 1
        if commits and p.write_index > log.end and not p.pending:
            stale = now_ms - p.last_commit_push_ms >= cfg.commit_push_interval_ms
            if p.commit_sent < log.committed or stale:
                self._push(p.peer, PushType.COMMIT, -1, -1)
                p.commit_sent = log.committed
                p.last_commit_push_ms = now_ms

    def _send_append(self, p: PeerProgress, first: int, last: int, now_ms: int) -> None:
        log = self.log
        prev = log.term_at(first - 1)
        if prev is None or first < log.begin or last > log.end:
            self.to_compare(p)
            return
        terms = log.terms(first, last)
        self._push(p.peer, PushType.APPEND, first, prev, terms)
        p.pending[first] = (last, now_ms)
        p.commit_sent = log.committed
        p.last_commit_push_ms = now_ms

    def _send_control(self, p: PeerProgress, now_ms: int) -> None:
        log = self.log
        if p.state is PushType.COMPARE and log.end < log.begin:
            if log.begin == 0:  # nothing anywhere is committed: appends sort the peer out
                self._to_append(p, -1, now_ms)
                self._drive_peer(p, now_ms)
                return
            self._to_truncate(p, log.begin, wipe=True)
        if p.state is PushType.COMPARE:
            if p.compare_index == -1 or not log.begin <= p.compare_index <= log.end:
                p.compare_index = log.end
            term = log.term_at(p.compare_index)
            assert term is not None
            p.ctl_seq = self._push(p.peer, PushType.COMPARE, p.compare_index, term)
        else:
            index = p.truncate_index
            check = log.term_at(index - 1 if p.wipe else index)
            if check is None or (not p.wipe and index > log.end):
                self.to_compare(p)
                self._send_control(p, now_ms)
                return
            p.ctl_seq = self._push(p.peer, PushType.TRUNCATE, index, check, wipe=p.wipe)
        p.ctl_sent_ms = now_ms

    def to_compare(self, p: PeerProgress) -> None:
        p.state = PushType.COMPARE
        p.compare_index = -1
        p.ctl_seq = None
        p.pending.clear()
        p.inflight = 0

    def _to_truncate(self, p: PeerProgress, index: int, *, wipe: bool) -> None:
        p.state = PushType.TRUNCATE
        p.truncate_index = index
        p.wipe = wipe
        p.ctl_seq = None

    def _to_append(self, p: PeerProgress, match: int, now_ms: int) -> None:
        p.state = PushType.APPEND
        p.ctl_seq = None
        p.compare_index = -1
        p.watermark = max(p.watermark, match)
        p.write_index = match + 1
        p.pending.clear()
        p.inflight = 0
        p.last_commit_push_ms = -1

    def on_push_response(self, resp: PushResponse, now_ms: int) -> None:
        if self.role is not Role.LEADER or resp.term != self.term:
            if resp.code is Code.INCONSISTENT_TERM:
                self.step_down_for(resp.term, now_ms)
            return
        p = self.progress.get(resp.local_id)
        if p is None:
            return
        p.last_ack_ms = now_ms
        kind = resp.kind
        if (
            p.state is PushType.APPEND
            and resp.code is Code.SUCCESS
            and resp.end_index < p.watermark
        ):
            self.to_compare(p)  # the follower lost entries it had stored (restored files...)
            self._drive_peer(p, now_ms)
            return
        if kind is PushType.APPEND:
            self._on_append_response(p, resp, now_ms)
        elif kind is PushType.COMPARE:
            if p.state is PushType.COMPARE and resp.seq == p.ctl_seq:
                self._on_compare_response(p, resp, now_ms)
        elif kind is PushType.TRUNCATE and p.state is PushType.TRUNCATE and resp.seq == p.ctl_seq:
            p.ctl_seq = None
            if resp.code is Code.SUCCESS:
                match = p.truncate_index - 1 if p.wipe else p.truncate_index
                self._to_append(p, match, now_ms)
            else:
                self.to_compare(p)
        if self.update_commit(now_ms):
            self.drive(now_ms)
        else:
            self._drive_peer(p, now_ms)

    def _on_append_response(self, p: PeerProgress, resp: PushResponse, now_ms: int) -> None:
        if p.state is not PushType.APPEND:
            return
        if resp.code is Code.SUCCESS:
            if resp.index > p.watermark:
                p.watermark = resp.index
                for first in [f for f, (last, _) in p.pending.items() if last <= resp.index]:
                    last = p.pending.pop(first)[0]
                    p.inflight -= last - first + 1
        elif resp.code is Code.INCONSISTENT_STATE:
            self.to_compare(p)

    def _on_compare_response(self, p: PeerProgress, resp: PushResponse, now_ms: int) -> None:
        p.ctl_seq = None
        log = self.log
        c = p.compare_index
        if resp.code is Code.SUCCESS:
            if c < resp.end_index and c >= log.end:
                # what the follower holds past our whole log is of older terms: cut it
                self._to_truncate(p, c, wipe=False)
            else:
                # entries the follower holds past c may be ours (a late push): APPEND skips
                # the ones that match and cuts from the first that does not
                self._to_append(p, c, now_ms)
            return
        if resp.code is not Code.INCONSISTENT_STATE:
            p.ctl_seq = 0  # not following us yet: resent on its next heartbeat answer
            return
        if resp.end_index < 0 and resp.begin_index == 0 and log.begin == 0:
            self._to_append(p, -1, now_ms)  # an empty follower: nothing to compare or cut
            return
        if resp.end_index < log.begin or c < resp.begin_index:
            self._to_truncate(p, log.begin, wipe=True)
            return
        if c > resp.end_index:
            p.compare_index = resp.end_index
        else:
            nxt = c - 1
            if 0 <= resp.conflict_index <= c:
                # the follower holds conflict_term from conflict_index to c: an entry there can
                # only match where we hold that term too
                their = resp.conflict_index - 1
                held = log.last_index_of_term(resp.conflict_term)
                if held is not None:
                    their = max(their, min(held, c - 1))
                nxt = min(nxt, their)
            p.compare_index = nxt
        if p.compare_index < log.begin:
            self._to_truncate(p, log.begin, wipe=True)

    def update_commit(self, now_ms: int) -> bool:
        """``QuorumAckChecker``: commit the largest index a quorum stores, if of our term.
        Returns True when the commit index moved."""
        if self.role is not Role.LEADER:
            return False
        log = self.log
        marks = [log.persisted, *(p.watermark for p in self.progress.values())]
        marks.sort(reverse=True)
        index = marks[self.quorum - 1]
        if index <= log.committed or log.term_at(index) != self.term:
            return False
        log.committed = index
        self.out.append(Committed(index))
        blocks = self.proposals
        while blocks and blocks[0].first <= index:
            block = blocks[0]
            if block.last <= index:
                blocks.popleft()
                self.proposal_count -= block.last - block.first + 1
            else:
                self.proposal_count -= index + 1 - block.first
                block.first = index + 1
        return True

    def expire_proposals(self, now_ms: int) -> None:
        """Fail proposals older than ``max_wait_ack_time_ms`` (WAIT_QUORUM_ACK_TIMEOUT)."""
        blocks = self.proposals
        while blocks and blocks[0].deadline_ms <= now_ms:
            block = blocks.popleft()
            self.proposal_count -= block.last - block.first + 1
            self.out.append(ProposalsFailed(block.first, block.last, Code.WAIT_QUORUM_ACK_TIMEOUT))

    # -- follower ------------------------------------------------------------------------------
    def _answer(
        self, req: PushRequest, code: Code, index: int, conflict: int = -1, conflict_term: int = -1
    ) -> None:
        log = self.log
        resp = PushResponse(
            self.group, self.self_id, req.local_id, self.term, req.seq, req.kind, code, index,
            log.begin, log.end, conflict, conflict_term,
        )  # fmt: skip
        self.send(resp)

    def on_push_request(self, req: PushRequest, now_ms: int) -> None:
        """``EntryHandler.handlePush`` and the handlers behind it."""
        if req.local_id not in self.peers or req.leader_id != req.local_id:
            self._answer(req, Code.UNKNOWN_MEMBER, -1)
            return
        if req.term != self.term:
            self._answer(req, Code.INCONSISTENT_TERM, -1)
            return
        if self.role is Role.CANDIDATE and self.leader_id is None:
            self.change_role_to_follower(self.term, req.leader_id, now_ms)
        if self.role is not Role.FOLLOWER or self.leader_id != req.leader_id:
            self._answer(req, Code.INCONSISTENT_LEADER, -1)
            return
        self.last_leader_hb_ms = now_ms
        kind = req.kind
        if kind is PushType.TRUNCATE and req.seq < self.push_seq_floor:
            return  # a late duplicate: entries appended since must stay
        self.push_seq_floor = max(self.push_seq_floor, req.seq)
        if kind is PushType.APPEND:
            if req.index > self.log.end + 1:
                self._buffer(req, now_ms)
            else:
                self._apply_append(req)
                self._drain_buffer()
        elif kind is PushType.COMMIT:
            self._follow_commit(req.commit_index)
            self._answer(req, Code.SUCCESS, self.log.committed)
        elif kind is PushType.COMPARE:
            self.buffer.clear()
            self._on_compare(req)
        else:
            self.buffer.clear()
            self._on_truncate(req)

    def _buffer(self, req: PushRequest, now_ms: int) -> None:
        if req.index in self.buffer:
            self._answer(req, Code.REPEATED_PUSH, -1)
            return
        if len(self.buffer) >= _BUFFER_MAX:
            self._answer(req, Code.INCONSISTENT_STATE, -1)
            return
        self.buffer[req.index] = (req, now_ms)

    def _drain_buffer(self) -> None:
        buffer = self.buffer
        while buffer:
            ready = [i for i in buffer if i <= self.log.end + 1]
            if not ready:
                return
            for index in sorted(ready):
                msg = buffer.pop(index)[0]
                assert isinstance(msg, PushRequest)
                self._apply_append(msg)

    def _apply_append(self, req: PushRequest) -> None:
        log = self.log
        first, terms, payloads = req.index, req.terms, req.payloads
        check = req.check_term
        if len(payloads) != len(terms):
            self._answer(req, Code.UNEXPECTED_ARGUMENT, -1)
            return
        if first < log.begin:  # entries below our begin are committed and cleaned up
            skip = log.begin - first
            if skip > len(terms):
                self._answer(req, Code.SUCCESS, req.last_index)
                return
            check = terms[skip - 1]
            first, terms, payloads = log.begin, terms[skip:], payloads[skip:]
        if log.term_at(first - 1) != check:
            self._answer(req, Code.INCONSISTENT_STATE, -1)
            return
        n = len(terms)
        i = 0
        while i < n and first + i <= log.end and log.term_at(first + i) == terms[i]:
            i += 1
        if i < n:
            if first + i <= log.end:
                cut = first + i - 1
                if cut < log.committed:
                    self._answer(req, Code.INCONSISTENT_STATE, -1)
                    return
                self._cut(cut)
            log.append(first + i, terms[i:])
            self.out.append(AppendEntries(first + i, terms[i:], payloads[i:]))
        self.verified = max(self.verified, req.last_index)
        self._follow_commit(req.commit_index)
        if log.persisted >= req.last_index:
            self._answer(req, Code.SUCCESS, req.last_index)
        else:
            self.pending_acks.append((req.last_index, req))

    def _cut(self, after: int) -> None:
        self.log.truncate_after(after)
        self.out.append(TruncateLog(after))
        self.verified = min(self.verified, after)
        self.pending_acks = type(self.pending_acks)(a for a in self.pending_acks if a[0] <= after)

    def _follow_commit(self, leader_commit: int) -> None:
        log = self.log
        index = min(leader_commit, max(self.verified, log.committed), log.end)
        if index > log.committed:
            log.committed = index
            self.out.append(Committed(index))

    def _on_compare(self, req: PushRequest) -> None:
        log = self.log
        index = req.index
        if log.begin <= index and log.term_at(index) == req.check_term:
            if index == log.end:
                self.verified = max(self.verified, index)
                self._follow_commit(req.commit_index)
            self._answer(req, Code.SUCCESS, index)
            return
        if log.begin <= index <= log.end:
            term = log.term_at(index)
            assert term is not None
            self._answer(req, Code.INCONSISTENT_STATE, index, log.run_start(index), term)
        else:
            self._answer(req, Code.INCONSISTENT_STATE, index)

    def _on_truncate(self, req: PushRequest) -> None:
        log = self.log
        index = req.index
        if req.wipe:
            if log.committed >= index:
                self._answer(req, Code.INCONSISTENT_STATE, -1)
                return
            log.reset(index, req.check_term)
            self.pending_acks.clear()
            self.out.append(TruncateLog(index - 1, wipe=True, base_term=req.check_term))
            self.verified = index - 1
            self._answer(req, Code.SUCCESS, index - 1)
            return
        if index < log.begin or log.term_at(index) != req.check_term or index < log.committed:
            self._answer(req, Code.INCONSISTENT_STATE, -1)
            return
        if index < log.end:
            self._cut(index)
        self.verified = max(self.verified, index)
        self._follow_commit(req.commit_index)
        self._answer(req, Code.SUCCESS, index)

    def acknowledge_persisted(self) -> None:
        """Answer the APPENDs whose entries are now persisted."""
        acks = self.pending_acks
        persisted = self.log.persisted
        while acks and acks[0][0] <= persisted:
            last, req = acks.popleft()
            assert isinstance(req, PushRequest)
            self._answer(req, Code.SUCCESS, last)

    def check_gaps(self, now_ms: int) -> None:
        """``checkAbnormalFuture``: fail the oldest waiting push of a stale gap."""
        if self.role is not Role.FOLLOWER or not self.buffer:
            return
        if now_ms - self.last_gap_check_ms < self.config.follower_gap_time_out_ms:
            return
        self.last_gap_check_ms = now_ms
        timeout = self.config.follower_gap_time_out_ms
        stale = [i for i, (_, at) in self.buffer.items() if now_ms - at >= timeout]
        if stale:
            msg: Message = self.buffer.pop(min(stale))[0]
            assert isinstance(msg, PushRequest)
            self._answer(msg, Code.INCONSISTENT_STATE, -1)
