"""The Raft core, rule by rule: the log's term runs, DLedger's vote and heartbeat rules, the
candidate's arbitration, replication states and the follower's checks, proposals and
leadership transfer. Messages are routed by hand; time is a number."""

from __future__ import annotations

import random
from collections import deque

import pytest

from ariane.errors import ConfigError
from ariane.raft import (
    NOOP,
    AppendEntries,
    Code,
    Committed,
    Effect,
    HeartBeatRequest,
    HeartBeatResponse,
    Message,
    ParseResult,
    ProposalsFailed,
    PushRequest,
    PushResponse,
    PushType,
    RaftConfig,
    RaftLog,
    RaftNode,
    Role,
    RoleChanged,
    SaveState,
    Send,
    TruncateLog,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ariane.raft.log import runs_of

IDS = ("n0", "n1", "n2")


def config(self_id: str, **kw: object) -> RaftConfig:
    return RaftConfig(group="g", self_id=self_id, peers=IDS, **kw)  # type: ignore[arg-type]


def node(self_id: str = "n0", **kw: object) -> RaftNode:
    log = kw.pop("log", None)
    term = int(kw.pop("term", 0))  # type: ignore[call-overload]
    voted = kw.pop("voted_for", None)
    return RaftNode(
        config(self_id, **kw), term=term, voted_for=voted,  # type: ignore[arg-type]
        log=log, rng=random.Random(1), now_ms=0,  # type: ignore[arg-type]
    )  # fmt: skip


def sends(effects: list[Effect]) -> list[Message]:
    return [e.msg for e in effects if isinstance(e, Send)]


class Router:
    """Delivers every message at once, persists appends at once."""

    def __init__(self, nodes: dict[str, RaftNode]) -> None:
        self.nodes = nodes
        self.logs: dict[str, list[tuple[int, object]]] = {i: [] for i in nodes}
        self.committed: dict[str, int] = {i: -1 for i in nodes}
        self.failed: list[ProposalsFailed] = []
        self.cut: set[str] = set()
        self.now = 0

    def run(self, origin: str) -> None:
        queue: deque[tuple[str, list[Effect]]] = deque([(origin, self.nodes[origin].take())])
        while queue:
            who, effects = queue.popleft()
            for effect in effects:
                self._effect(who, effect, queue)

    def _effect(self, who: str, effect: Effect, queue: deque[tuple[str, list[Effect]]]) -> None:
        n = self.nodes[who]
        if isinstance(effect, Send):
            msg = effect.msg
            if isinstance(msg, PushRequest) and msg.kind is PushType.APPEND and not msg.payloads:
                log = self.logs[who]
                payloads = tuple(log[i][1] for i in range(msg.index, msg.last_index + 1))
                msg = PushRequest(**{**_fields(msg), "payloads": payloads})
            if msg.remote_id in self.cut or who in self.cut:
                return
            target = self.nodes[msg.remote_id]
            target.step(msg, self.now)
            queue.append((msg.remote_id, target.take()))
        elif isinstance(effect, AppendEntries):
            log = self.logs[who]
            assert effect.first_index == len(log)
            log.extend(zip(effect.terms, effect.payloads, strict=True))
            n.persisted(len(log) - 1, effect.terms[-1], self.now)
            queue.append((who, n.take()))
        elif isinstance(effect, TruncateLog):
            del self.logs[who][effect.after_index + 1 :]
        elif isinstance(effect, Committed):
            self.committed[who] = effect.index
        elif isinstance(effect, ProposalsFailed):
            self.failed.append(effect)

    def tick(self, ms: int = 0) -> None:
        self.now += ms
        for who, n in self.nodes.items():
            if who in self.cut:
                continue
            n.tick(self.now)
            self.run(who)


def _fields(msg: PushRequest) -> dict[str, object]:
    return {name: getattr(msg, name) for name in PushRequest.__dataclass_fields__}


def cluster(**kw: object) -> Router:
    return Router({i: node(i, **kw) for i in IDS})


def elect(router: Router, who: str = "n0") -> RaftNode:
    """Make ``who`` stand first; everyone else waits."""
    for i, n in router.nodes.items():
        if i != who:
            n.next_vote_ms = 10**9
            n.last_parse = ParseResult.WAIT_TO_REVOTE
    router.tick()
    for _ in range(20):
        if router.nodes[who].is_leader:
            break
        router.tick(5)
    leader = router.nodes[who]
    assert leader.is_leader
    return leader


# -- the log ---------------------------------------------------------------------------------


def test_log_term_runs() -> None:
    log = RaftLog()
    assert (log.begin, log.end, log.last_term, log.term_at(-1), log.term_at(0)) == (
        0,
        -1,
        -1,
        -1,
        None,
    )
    log.append(0, (1, 1, 2))
    log.append_term(2, 2)
    log.append(5, (3,))
    assert log.runs == [(0, 1), (2, 2), (5, 3)]
    assert [log.term_at(i) for i in range(-1, 7)] == [-1, 1, 1, 2, 2, 2, 3, None]
    assert log.terms(1, 5) == (1, 2, 2, 2, 3)
    assert (log.run_start(4), log.last_index_of_term(2), log.last_index_of_term(4)) == (2, 4, None)
    log.committed = 3
    log.truncate_after(3)
    assert (log.end, log.runs, log.committed, log.persisted) == (3, [(0, 1), (2, 2)], 3, -1)
    log.discard_before(2)
    assert (log.begin, log.base_term, log.term_at(1), log.term_at(0)) == (2, 1, 1, None)
    with pytest.raises(ValueError, match="below the log begin"):
        log.truncate_after(0)
    with pytest.raises(ValueError, match="append at 9"):
        log.append(9, (3,))
    log.reset(10, 7)
    assert (log.begin, log.end, log.last_term, log.term_at(9), log.committed) == (10, 9, 7, 7, 9)


def test_runs_of() -> None:
    assert runs_of(5, [1, 1, 2, 2, 2, 4]) == [(5, 1), (7, 2), (10, 4)]
    assert runs_of(0, []) == []


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="dLegerSelfId"):
        RaftConfig(group="g", self_id="n9", peers=IDS)
    with pytest.raises(ConfigError, match="dLegerPeers"):
        RaftConfig(group="g", self_id="n0", peers=("n0", "n0"))
    with pytest.raises(ConfigError, match="minVoteIntervalMs"):
        config("n0", min_vote_interval_ms=500, max_vote_interval_ms=500)
    assert config("n0").quorum == 2
    assert RaftConfig(group="g", self_id="a", peers=("a", "b", "c", "d", "e")).quorum == 3


# -- votes -----------------------------------------------------------------------------------


def vote(
    n: RaftNode, *, term: int, end_index: int = -1, end_term: int = -1, who: str = "n1"
) -> VoteResult:
    n.step(VoteRequest("g", who, n.self_id, term, who, end_index, end_term, 7), 0)
    (resp,) = [m for m in sends(n.take()) if isinstance(m, VoteResponse)]
    return resp.result


def log_of(terms: tuple[int, ...]) -> RaftLog:
    return RaftLog(0, runs_of(0, terms), len(terms) - 1)


def test_vote_rules_in_order() -> None:
    n = node(term=3, log=log_of((1, 2, 2)))
    n.next_vote_ms = 10**9  # it does not stand itself here
    assert vote(n, term=3, end_index=5, end_term=1) is VoteResult.REJECT_EXPIRED_LEDGER_TERM
    assert vote(n, term=3, end_index=1, end_term=2) is VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    assert vote(n, term=2, end_index=2, end_term=2) is VoteResult.REJECT_EXPIRED_VOTE_TERM
    assert vote(n, term=3, end_index=2, end_term=2) is VoteResult.ACCEPT
    assert n.voted_for == "n1"
    assert vote(n, term=3, end_index=2, end_term=2) is VoteResult.ACCEPT  # the same candidate
    assert vote(n, term=3, end_index=9, end_term=2, who="n2") is VoteResult.REJECT_ALREADY_VOTED
    n.leader_id = "n1"
    assert (
        vote(n, term=3, end_index=9, end_term=2, who="n2") is VoteResult.REJECT_ALREADY_HAS_LEADER
    )
    # unknown candidate, or one pretending to be us
    n2 = node()
    n2.step(VoteRequest("g", "n1", "n0", 0, "zz", -1, -1, 1), 0)
    assert sends(n2.take())[0].result is VoteResult.REJECT_UNKNOWN_LEADER  # type: ignore[union-attr]
    n2.step(VoteRequest("g", "n1", "n0", 0, "n0", -1, -1, 1), 0)
    assert sends(n2.take())[0].result is VoteResult.REJECT_UNEXPECTED_LEADER  # type: ignore[union-attr]


def test_vote_of_a_higher_term_is_not_ready_and_makes_the_voter_candidate() -> None:
    n = node(term=3, log=log_of((1, 2)))
    n.role = Role.FOLLOWER
    n.leader_id = "n2"
    n.step(VoteRequest("g", "n1", "n0", 5, "n1", 1, 2, 1), 100)
    effects = n.take()
    (resp,) = sends(effects)
    assert isinstance(resp, VoteResponse)
    assert (resp.result, resp.term) == (VoteResult.REJECT_TERM_NOT_READY, 3)
    # it became a candidate, moved to the requester's term without voting, and waits
    assert n.role is Role.CANDIDATE
    assert n.term == 5
    assert n.voted_for is None
    assert SaveState(5, None) in effects
    assert n.next_vote_ms >= 100 + 300
    assert n.vote_round is None
    # so the requester's revote is accepted
    assert vote(n, term=5, end_index=1, end_term=2) is VoteResult.ACCEPT


def test_term_smaller_than_ledger() -> None:
    n = node(term=1, log=log_of((4,)))
    n.term = 1
    result = vote(n, term=1, end_index=0, end_term=4)
    assert result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER


def test_fresh_node_votes_at_once_in_term_0_and_saves_before_sending() -> None:
    n = node()
    n.tick(0)
    effects = n.take()
    assert effects[0] == SaveState(0, "n0")
    requests = sends(effects)
    assert [m.remote_id for m in requests] == ["n1", "n2"]
    assert all(isinstance(m, VoteRequest) and m.term == 0 for m in requests)


def test_restarted_node_that_voted_for_itself_starts_a_new_term() -> None:
    n = node(term=4, voted_for="n0")
    n.tick(0)
    effects = n.take()
    assert effects[0] == SaveState(5, None)
    assert effects[1] == SaveState(5, "n0")
    assert all(m.term == 5 for m in sends(effects))


def round_with(n: RaftNode, *results: VoteResult, now: int = 10) -> None:
    n.tick(0)
    requests = sends(n.take())
    for req, result in zip(requests, results, strict=False):
        n.step(VoteResponse("g", req.remote_id, "n0", n.term, req.seq, result), now)  # type: ignore[union-attr]


def test_arbitration_passed() -> None:
    n = node()
    round_with(n, VoteResult.ACCEPT)
    assert n.role is Role.LEADER
    assert n.last_parse is ParseResult.PASSED


def test_arbitration_revote_immediately_keeps_the_term() -> None:
    n = node()
    round_with(n, VoteResult.REJECT_TERM_NOT_READY)
    assert n.last_parse is ParseResult.REVOTE_IMMEDIATELY
    assert n.term == 0
    n.tick(10)
    assert all(isinstance(m, VoteRequest) and m.term == 0 for m in sends(n.take()))


def test_arbitration_split_vote_bumps_the_term_next_time() -> None:
    n = node()
    round_with(n, VoteResult.REJECT_ALREADY_VOTED, VoteResult.REJECT_ALREADY_VOTED)
    assert n.last_parse is ParseResult.WAIT_TO_VOTE_NEXT
    assert 10 + 300 <= n.next_vote_ms < 10 + 10 + 1000
    n.tick(n.next_vote_ms)
    assert n.term == 1
    assert n.voted_for == "n0"


def test_arbitration_already_has_leader_waits_a_heartbeat_leak_longer() -> None:
    n = node()
    round_with(n, VoteResult.REJECT_ALREADY_HAS_LEADER)
    assert n.last_parse is ParseResult.WAIT_TO_VOTE_NEXT
    assert n.next_vote_ms >= 10 + 300 + 6000


def test_arbitration_bigger_ledger_revotes_in_the_same_term() -> None:
    n = node()
    round_with(
        n, VoteResult.REJECT_SMALL_LEDGER_END_INDEX, VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    )
    assert n.last_parse is ParseResult.WAIT_TO_REVOTE
    assert n.term == 0


def test_arbitration_known_higher_term() -> None:
    n = node()
    n.tick(0)
    req = sends(n.take())[0]
    n.step(VoteResponse("g", "n1", "n0", 9, req.seq, VoteResult.REJECT_EXPIRED_VOTE_TERM), 5)  # type: ignore[union-attr]
    n.step(VoteResponse("g", "n2", "n0", 0, req.seq, VoteResult.REJECT_ALREADY_VOTED), 5)  # type: ignore[union-attr]
    assert n.known_max_term == 9
    assert n.last_parse is ParseResult.WAIT_TO_VOTE_NEXT
    n.tick(n.next_vote_ms)
    assert n.term == 9


def test_unreachable_peers_close_the_round() -> None:
    n = node()
    n.tick(0)
    requests = sends(n.take())
    for req in requests:
        n.send_failed(req, 3)
    assert n.vote_round is None
    assert n.last_parse is ParseResult.WAIT_TO_REVOTE


# -- heartbeats ------------------------------------------------------------------------------


def heartbeat(n: RaftNode, term: int, leader: str = "n1", now: int = 0) -> HeartBeatResponse:
    n.step(HeartBeatRequest("g", leader, n.self_id, term, leader, 3), now)
    (resp,) = [m for m in sends(n.take()) if isinstance(m, HeartBeatResponse)]
    return resp


def test_heartbeat_rules() -> None:
    n = node(term=2)
    assert heartbeat(n, 1).code is Code.EXPIRED_TERM
    resp = heartbeat(n, 2, now=50)
    assert resp.code is Code.SUCCESS
    assert n.role is Role.FOLLOWER
    assert n.leader_id == "n1"
    assert n.last_leader_hb_ms == 50
    assert heartbeat(n, 2, leader="n2").code is Code.INCONSISTENT_LEADER
    resp = heartbeat(n, 3)
    assert resp.code is Code.TERM_NOT_READY
    assert n.role is Role.CANDIDATE
    assert n.term == 3
    assert heartbeat(n, 3).code is Code.SUCCESS
    assert n.role is Role.FOLLOWER


def test_follower_stands_after_missing_heartbeats() -> None:
    n = node(term=2)
    heartbeat(n, 2, now=0)
    n.tick(6000)
    assert n.role is Role.FOLLOWER
    n.tick(6001)
    assert n.role is Role.CANDIDATE
    n.tick(6001 + 700)
    assert n.term == 3
    assert n.voted_for == "n0"


def test_leader_steps_down_without_a_quorum_of_heartbeat_answers() -> None:
    router = cluster()
    leader = elect(router)
    start = router.now
    router.cut = {"n1", "n2"}
    while leader.role is Role.LEADER:
        router.tick(100)
    # 3 heartbeat intervals without a quorum, noticed when a heartbeat round ends
    assert start + 6000 < router.now <= start + 8000


# -- replication -----------------------------------------------------------------------------


def test_propose_replicates_and_commits() -> None:
    router = cluster()
    leader = elect(router)
    assert router.committed["n0"] == -1  # empty log: no NOOP needed
    code, first = leader.propose(("a", "b"), router.now)
    assert (code, first) == (Code.SUCCESS, 0)
    router.run("n0")
    router.tick()
    # the answers commit on the leader; the followers learn it from the COMMIT push the next
    # tick sends (or from the next APPEND, which would go first)
    assert router.committed == {"n0": 1, "n1": -1, "n2": -1}
    router.tick()
    assert router.committed == {"n0": 1, "n1": 1, "n2": 1}
    assert router.logs["n1"] == [(0, "a"), (0, "b")] == router.logs["n0"]


def test_not_leader_pending_full_and_transferring() -> None:
    n = node()
    assert n.propose(("x",), 0) == (Code.NOT_LEADER, -1)
    router = cluster(max_pending_requests_num=2)
    leader = elect(router)
    router.cut = {"n1", "n2"}
    assert leader.propose(("a", "b"), 0)[0] is Code.SUCCESS
    assert leader.propose(("c",), 0) == (Code.LEADER_PENDING_FULL, -1)


def test_proposals_time_out_and_fail_when_the_leader_steps_down() -> None:
    router = cluster()
    leader = elect(router)
    router.cut = {"n1", "n2"}
    leader.propose(("a",), router.now)
    router.run("n0")
    router.tick(2499)
    assert router.failed == []
    router.tick(1)
    assert router.failed == [ProposalsFailed(0, 0, Code.WAIT_QUORUM_ACK_TIMEOUT)]
    router = cluster(max_wait_ack_time_ms=60_000)
    leader = elect(router)
    router.cut = {"n1", "n2"}
    leader.propose(("b",), router.now)
    router.run("n0")
    while leader.role is Role.LEADER:
        router.tick(500)
    assert router.failed == [ProposalsFailed(0, 0, Code.TERM_CHANGED)]


def test_new_leader_appends_a_noop_to_commit_older_entries() -> None:
    # n0 holds two uncommitted entries of term 1; elected in term 2 it adds a NOOP
    logs = {i: log_of((1, 1)) for i in IDS}
    router = Router({i: node(i, term=1, log=logs[i]) for i in IDS})
    for i in IDS:
        router.logs[i] = [(1, "x"), (1, "y")]
    leader = elect(router)
    assert leader.term >= 1
    router.tick()
    assert router.logs["n0"][-1] == (leader.term, NOOP)
    assert router.committed["n1"] == 2


def test_divergent_follower_is_compared_and_cut() -> None:
    # n1 holds entries of term 1 the others never saw; n0 leads term 2 with other entries
    router = Router(
        {
            "n0": node("n0", term=2, log=log_of((1, 2, 2))),
            "n1": node("n1", term=2, log=log_of((1, 1, 1, 1))),
            "n2": node("n2", term=2, log=log_of((1, 2, 2))),
        }
    )
    router.logs = {
        "n0": [(1, "a"), (2, "b"), (2, "c")],
        "n1": [(1, "a"), (1, "x"), (1, "y"), (1, "z")],
        "n2": [(1, "a"), (2, "b"), (2, "c")],
    }
    leader = elect(router)
    leader.propose(("d",), router.now)
    router.run("n0")
    router.tick()
    assert router.logs["n1"] == router.logs["n0"]
    assert router.logs["n0"][-2:] == [(leader.term, NOOP), (leader.term, "d")]


def follower(term: int = 1, log: RaftLog | None = None) -> RaftNode:
    n = node("n1", term=term, log=log)
    heartbeat_to(n, term)
    return n


def heartbeat_to(n: RaftNode, term: int) -> None:
    n.step(HeartBeatRequest("g", "n0", "n1", term, "n0", 1), 0)
    n.take()


def push(
    n: RaftNode, kind: PushType, index: int, check: int, terms: tuple[int, ...] = (), *,
    commit: int = -1, seq: int = 10, wipe: bool = False,
) -> list[Effect]:  # fmt: skip
    payloads = tuple(f"e{index + k}" for k in range(len(terms)))
    n.step(
        PushRequest(
            "g", "n0", "n1", n.term, "n0", kind, index, check, commit, seq, terms, payloads, wipe
        ),
        0,
    )
    return n.take()


def answers(effects: list[Effect]) -> list[PushResponse]:
    return [m for m in sends(effects) if isinstance(m, PushResponse)]


def test_follower_acks_only_after_persisting() -> None:
    n = follower()
    effects = push(n, PushType.APPEND, 0, -1, (1, 1), commit=5)
    assert AppendEntries(0, (1, 1), ("e0", "e1")) in effects
    assert answers(effects) == []
    assert Committed(1) in effects  # the leader's commit, capped by what matches
    n.persisted(1, 1, 0)
    (resp,) = answers(n.take())
    assert (resp.code, resp.index, resp.end_index) == (Code.SUCCESS, 1, 1)


def test_follower_buffers_out_of_order_pushes() -> None:
    n = follower()
    assert push(n, PushType.APPEND, 2, 1, (1,), seq=12) == []
    (resp,) = answers(push(n, PushType.APPEND, 2, 1, (1,), seq=13))
    assert resp.code is Code.REPEATED_PUSH
    effects = push(n, PushType.APPEND, 0, -1, (1, 1), seq=11)
    assert [e for e in effects if isinstance(e, AppendEntries)] == [
        AppendEntries(0, (1, 1), ("e0", "e1")),
        AppendEntries(2, (1,), ("e2",)),
    ]
    n.persisted(2, 1, 0)
    assert [r.index for r in answers(n.take())] == [1, 2]


def test_follower_checks_the_previous_term() -> None:
    n = follower(log=log_of((1, 1)))
    (resp,) = answers(push(n, PushType.APPEND, 2, 3, (3,)))
    assert resp.code is Code.INCONSISTENT_STATE


def test_follower_cuts_a_conflict_but_never_below_its_commit() -> None:
    n = follower(term=3, log=log_of((1, 1, 2, 2)))
    effects = push(n, PushType.APPEND, 2, 1, (3, 3))
    assert TruncateLog(1) in effects
    assert AppendEntries(2, (3, 3), ("e2", "e3")) in effects
    n2 = follower(term=3, log=RaftLog(0, runs_of(0, (1, 1, 2, 2)), 3, committed=3))
    (resp,) = answers(push(n2, PushType.APPEND, 2, 1, (3, 3)))
    assert resp.code is Code.INCONSISTENT_STATE
    assert n2.log.end == 3


def test_compare_answers_with_the_conflicting_run() -> None:
    n = follower(term=5, log=log_of((1, 2, 2, 2)))
    (resp,) = answers(push(n, PushType.COMPARE, 3, 4))
    assert (resp.code, resp.conflict_index, resp.conflict_term) == (Code.INCONSISTENT_STATE, 1, 2)
    (resp,) = answers(push(n, PushType.COMPARE, 3, 2))
    assert (resp.code, resp.index, resp.end_index) == (Code.SUCCESS, 3, 3)


def test_truncate_and_a_late_duplicate_of_it() -> None:
    n = follower(term=5, log=log_of((1, 2, 2, 2)))
    effects = push(n, PushType.TRUNCATE, 1, 2, seq=20)
    assert TruncateLog(1) in effects
    assert n.log.end == 1
    push(n, PushType.APPEND, 2, 2, (5, 5), seq=21)
    assert push(n, PushType.TRUNCATE, 1, 2, seq=20) == []  # late duplicate: ignored
    assert n.log.end == 3
    effects = push(n, PushType.TRUNCATE, 7, 4, seq=30, wipe=True)
    assert TruncateLog(6, wipe=True, base_term=4) in effects
    assert (n.log.begin, n.log.end, n.log.base_term) == (7, 6, 4)


def test_pushes_from_another_term_or_leader() -> None:
    n = follower(term=2)
    n.step(PushRequest("g", "n0", "n1", 1, "n0", PushType.COMMIT, -1, -1, 0, 3), 0)
    assert answers(n.take())[0].code is Code.INCONSISTENT_TERM
    n.step(PushRequest("g", "n2", "n1", 2, "n2", PushType.COMMIT, -1, -1, 0, 3), 0)
    assert answers(n.take())[0].code is Code.INCONSISTENT_LEADER
    n.step(PushRequest("other", "n0", "n1", 2, "n0", PushType.COMMIT, -1, -1, 0, 3), 0)
    assert answers(n.take())[0].code is Code.UNKNOWN_GROUP


def test_a_stale_gap_is_reported_so_the_leader_compares_again() -> None:
    n = follower()
    push(n, PushType.APPEND, 5, 1, (1,))
    n.tick(500)
    assert answers(n.take()) == []
    n.tick(1001)
    (resp,) = answers(n.take())
    assert resp.code is Code.INCONSISTENT_STATE
    assert n.buffer == {}


# -- leadership transfer ---------------------------------------------------------------------


def test_transfer_preconditions() -> None:
    assert node().transfer_leadership("n1", 0) is Code.NOT_LEADER
    router = cluster()
    leader = elect(router)
    assert leader.transfer_leadership("zz", 0) is Code.UNKNOWN_MEMBER
    assert leader.transfer_leadership("n0", 0) is Code.SUCCESS


def test_transfer_hands_over_leadership() -> None:
    router = cluster()
    leader = elect(router)
    leader.propose(("a",), router.now)
    router.run("n0")
    router.tick()
    assert leader.transfer_leadership("n2", router.now) is Code.SUCCESS
    assert leader.propose(("b",), router.now) == (Code.LEADER_TRANSFERRING, -1)
    router.run("n0")
    for _ in range(30):
        router.tick(20)
        if router.nodes["n2"].is_leader:
            break
    assert router.nodes["n2"].is_leader
    assert not leader.is_leader
    roles = [e for e in router.nodes["n2"].take() if isinstance(e, RoleChanged)]
    assert roles == []  # already taken by the router


def test_the_core_is_sans_io() -> None:
    """Layer 2: the core imports only the standard library's pure parts, ``ariane.errors``
    and itself; no sockets, threads, clocks or asyncio."""
    import ast
    from pathlib import Path

    import ariane.raft

    banned = {"asyncio", "socket", "threading", "time", "os", "select", "selectors", "datetime"}
    for path in Path(ariane.raft.__file__).parent.glob("*.py"):
        for tree_node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(tree_node, ast.Import):
                names = [a.name for a in tree_node.names]
            elif isinstance(tree_node, ast.ImportFrom) and tree_node.module:
                names = [tree_node.module]
            for name in names:
                root = name.split(".")[0]
                assert root not in banned, f"{path.name} imports {name}"
                if root == "ariane":
                    assert name.startswith(("ariane.raft", "ariane.errors")), f"{path.name}: {name}"
