"""A deterministic simulation of a Raft group: several :class:`RaftNode` cores, a network that
drops, delays, duplicates and reorders messages and can be partitioned (also one way), a
simulated clock and simulated disks that lose unsynced entries when their node crashes.

Everything comes from one seed. Raft's invariants are checked as the simulation runs:

* election safety: at most one leader per term;
* log matching: an entry (index, term) is the same everywhere and always follows the same
  term (so two logs holding it agree on everything before it);
* leader completeness: a new leader holds every entry known committed;
* state machine safety: a node commits at each index the entry every other node committed
  there, and no node ever cuts an entry that is committed;
* proposals: an acknowledged proposal is committed at the index it was acknowledged at, and
  no payload is ever stored at two indexes;
* liveness: once the network heals and every node is up, a leader is elected, a new proposal
  commits and every log converges.

A failure raises :class:`Violation` naming the seed and the last events, so ``run(seed)``
replays it.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ariane.raft import (
    AppendEntries,
    Committed,
    Message,
    ProposalsFailed,
    PushRequest,
    PushType,
    RaftConfig,
    RaftLog,
    RaftNode,
    Role,
    RoleChanged,
    SaveState,
    Send,
    TruncateLog,
)
from ariane.raft.log import runs_of

__all__ = ["SimConfig", "Simulation", "Violation", "run"]


class Violation(AssertionError):
    """An invariant broke (the message names the seed)."""


@dataclass
class SimConfig:
    """The shape of one simulated run (drawn from the seed by :func:`scenario`)."""

    nodes: int = 3
    chaos_ms: int = 2000
    heal_ms: int = 2500
    drop: float = 0.05
    duplicate: float = 0.02
    min_delay_ms: int = 1
    max_delay_ms: int = 15
    crash_every_ms: int = 900
    partition_every_ms: int = 700
    propose_every_ms: int = 40
    max_fsync_ms: int = 12


def raft_config(group_ids: tuple[str, ...], self_id: str, preferred: tuple[str, ...]) -> RaftConfig:
    """Timeouts scaled down (about 20x) from DLedger's defaults, batches kept small; odd
    nodes push as the DLedger CommitLog does (one push in flight, twice the entries), even
    nodes with the core's default (two in flight)."""
    one_in_flight = int(self_id[1:]) % 2 == 1
    return RaftConfig(
        group="g",
        self_id=self_id,
        peers=group_ids,
        heart_beat_time_interval_ms=100,
        max_heart_beat_leak=3,
        min_vote_interval_ms=15,
        max_vote_interval_ms=50,
        vote_wait_ms=150,
        max_pending_requests_num=64,
        max_wait_ack_time_ms=400,
        max_push_time_out_ms=60,
        max_pending_size=12,
        max_push_batch=8 if one_in_flight else 4,
        max_pushes_in_flight=1 if one_in_flight else 2,
        compare_time_out_ms=150,
        commit_push_interval_ms=50,
        follower_gap_time_out_ms=50,
        preferred_leader_ids=preferred,
        max_leadership_transfer_wait_index=20,
        leadership_transfer_wait_timeout_ms=50,
        min_take_leadership_vote_interval_ms=2,
        max_take_leadership_vote_interval_ms=6,
        check_preferred_leader_interval_ms=200,
    )


@dataclass
class Disk:
    """A node's durable state: term and vote (always synced), entries (a synced prefix)."""

    term: int = 0
    voted_for: str | None = None
    begin: int = 0
    base_term: int = -1
    entries: list[tuple[int, object]] = field(default_factory=list)  # (term, payload)
    synced: int = 0  # number of entries synced
    checkpoint: int = -1  # committed index last written

    @property
    def end(self) -> int:
        return self.begin + len(self.entries) - 1

    def term_at(self, index: int) -> int:
        if index == self.begin - 1:
            return self.base_term
        return int(self.entries[index - self.begin][0])

    def crash(self, rng: random.Random) -> None:
        """Lose a random part of the unsynced tail."""
        keep = rng.randint(self.synced, len(self.entries))
        del self.entries[keep:]
        self.synced = min(self.synced, keep)


@dataclass
class SimNode:
    """One node: its core (None while down), disk and what its shell remembers."""

    node_id: str
    disk: Disk
    core: RaftNode | None = None
    tick_at: int = -1
    fsync_pending: bool = False
    applied: int = -1
    proposals: deque[tuple[int, int]] = field(default_factory=deque)  # (index, payload id)


class Simulation:
    """Runs one seed. ``check_every_step`` costs time; invariants are checked at each event
    that could break them either way."""

    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.cfg = config or scenario(self.rng)
        self.ids = tuple(f"n{i}" for i in range(self.cfg.nodes))
        preferred = (self.ids[-1],) if self.rng.random() < 0.2 else ()
        self.raft = {i: raft_config(self.ids, i, preferred) for i in self.ids}
        self.nodes = {i: SimNode(i, Disk()) for i in self.ids}
        self.now = 0
        self.queue: list[tuple[int, int, str, Any]] = []
        self._seq = 0
        self.blocked: set[tuple[str, str]] = set()
        self.drop = self.cfg.drop
        self.duplicate = self.cfg.duplicate
        self.trace: deque[str] = deque(maxlen=40)
        # global knowledge for the invariants
        self.leaders: dict[int, str] = {}
        self.registry: dict[tuple[int, int], tuple[object, int]] = {}
        self.committed: dict[int, tuple[int, object]] = {}
        self.acked: dict[int, tuple[int, int]] = {}  # payload id -> (index, term)
        self.failed: set[int] = set()
        self.next_payload = 0
        self.healed = False
        for node in self.nodes.values():
            self._start(node)

    # -- events ----------------------------------------------------------------------------
    def _push(self, at: int, kind: str, data: Any) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (at, self._seq, kind, data))

    def fail(self, what: str) -> None:
        lines = "\n  ".join(self.trace)
        raise Violation(f"seed {self.seed} at {self.now} ms: {what}\n  last events:\n  {lines}")

    def run(self) -> None:
        cfg = self.cfg
        self._push(0, "propose", None)
        self._push(self.rng.randint(100, cfg.crash_every_ms), "crash", None)
        self._push(self.rng.randint(100, cfg.partition_every_ms), "partition", None)
        self._push(cfg.chaos_ms, "heal", None)
        end = cfg.chaos_ms + cfg.heal_ms
        handlers = {name[4:]: getattr(self, name) for name in dir(self) if name.startswith("_on_")}
        queue = self.queue
        pop = heapq.heappop
        steps = 0
        while queue and queue[0][0] <= end:
            at, _, kind, data = pop(queue)
            self.now = at
            steps += 1
            if steps > 200_000:
                self.fail("too many events (a node that never rests?)")
            handlers[kind](data)
        self.now = end
        self._check_converged()

    # -- nodes -----------------------------------------------------------------------------
    def _start(self, node: SimNode) -> None:
        disk = node.disk
        disk.synced = len(disk.entries)  # recovery syncs what survived the crash
        terms = [t for t, _ in disk.entries]
        log = RaftLog(
            disk.begin, runs_of(disk.begin, terms), disk.end, disk.base_term,
            committed=min(disk.checkpoint, disk.end),
        )  # fmt: skip
        log.persisted = disk.begin - 1 + disk.synced
        node.core = RaftNode(
            self.raft[node.node_id], term=disk.term, voted_for=disk.voted_for, log=log,
            rng=random.Random(self.rng.random()), now_ms=self.now,
        )  # fmt: skip
        node.applied = log.committed
        node.proposals.clear()
        node.tick_at = -1
        self._after(node)

    def _after(self, node: SimNode) -> None:
        """Carry out the node's effects, then schedule its next tick."""
        core = node.core
        assert core is not None
        for effect in core.take():
            self._effect(node, effect)
        if node.core is None:
            return
        at = max(self.now, core.next_deadline_ms())
        if node.tick_at < 0 or at < node.tick_at or node.tick_at < self.now:
            node.tick_at = at
            self._push(at, "tick", (node.node_id, at))

    def _on_tick(self, data: tuple[str, int]) -> None:
        node = self.nodes[data[0]]
        if node.core is None or node.tick_at != data[1]:
            return
        node.tick_at = -1
        node.core.tick(self.now)
        self._after(node)

    def _on_deliver(self, msg: Message) -> None:
        node = self.nodes[msg.remote_id]
        if node.core is None:
            return
        node.core.step(msg, self.now)
        self._after(node)

    def _on_send_failed(self, data: tuple[str, Message]) -> None:
        node = self.nodes[data[0]]
        if node.core is None:
            return
        node.core.send_failed(data[1], self.now)
        self._after(node)

    def _on_fsync(self, node_id: str) -> None:
        node = self.nodes[node_id]
        node.fsync_pending = False
        if node.core is None:
            return
        disk = node.disk
        disk.synced = len(disk.entries)
        if disk.entries:
            node.core.persisted(disk.end, disk.term_at(disk.end), self.now)
        self._after(node)

    # -- effects ---------------------------------------------------------------------------
    def _effect(self, node: SimNode, effect: object) -> None:
        if isinstance(effect, Send):
            self._send(node, effect.msg)
        elif isinstance(effect, SaveState):
            node.disk.term, node.disk.voted_for = effect.term, effect.voted_for
        elif isinstance(effect, AppendEntries):
            self._append(node, effect)
        elif isinstance(effect, TruncateLog):
            self._truncate(node, effect)
        elif isinstance(effect, Committed):
            self._commit(node, effect.index)
        elif isinstance(effect, ProposalsFailed):
            kept: deque[tuple[int, int]] = deque()
            for index, pid in node.proposals:
                if effect.first <= index <= effect.last:
                    self.failed.add(pid)
                else:
                    kept.append((index, pid))
            node.proposals = kept
        elif isinstance(effect, RoleChanged):
            self._role_changed(node, effect)

    def _send(self, node: SimNode, msg: Message) -> None:
        if isinstance(msg, PushRequest) and msg.kind is PushType.APPEND and not msg.payloads:
            disk = node.disk
            payloads = tuple(
                disk.entries[i - disk.begin][1] for i in range(msg.index, msg.last_index + 1)
            )
            msg = dataclasses.replace(msg, payloads=payloads)
        dest = msg.remote_id
        if (node.node_id, dest) in self.blocked or self.rng.random() < self.drop:
            return
        if self.nodes[dest].core is None:
            if self.rng.random() < 0.5:  # a connection refused, reported at once
                self._push(self.now + 1, "send_failed", (node.node_id, msg))
            return
        cfg = self.cfg
        self._push(self.now + self.rng.randint(cfg.min_delay_ms, cfg.max_delay_ms), "deliver", msg)
        if self.rng.random() < self.duplicate:
            later = self.now + self.rng.randint(cfg.min_delay_ms, 3 * cfg.max_delay_ms)
            self._push(later, "deliver", msg)

    def _append(self, node: SimNode, effect: AppendEntries) -> None:
        disk = node.disk
        if effect.first_index != disk.end + 1:
            self.fail(f"{node.node_id} appends at {effect.first_index}, disk ends at {disk.end}")
        for offset, (term, payload) in enumerate(zip(effect.terms, effect.payloads, strict=True)):
            index = effect.first_index + offset
            prev = disk.term_at(index - 1)
            known = self.registry.setdefault((index, term), (payload, prev))
            if known != (payload, prev):
                self.fail(
                    f"log matching: {node.node_id} stores ({index}, {term}) = {payload!r} after "
                    f"term {prev}, elsewhere {known!r}"
                )
            disk.entries.append((term, payload))
        if not node.fsync_pending:
            node.fsync_pending = True
            self._push(self.now + self.rng.randint(0, self.cfg.max_fsync_ms), "fsync", node.node_id)

    def _truncate(self, node: SimNode, effect: TruncateLog) -> None:
        disk = node.disk
        cut_from = disk.begin if effect.wipe else effect.after_index + 1
        for index in range(max(cut_from, disk.begin), disk.end + 1):
            entry = disk.entries[index - disk.begin]
            if self.committed.get(index) == entry:
                self.fail(f"{node.node_id} cuts committed entry {index} {entry!r}")
        if effect.wipe:
            disk.entries.clear()
            disk.begin = effect.after_index + 1
            disk.base_term = effect.base_term
            disk.synced = 0
        else:
            del disk.entries[effect.after_index + 1 - disk.begin :]
            disk.synced = min(disk.synced, len(disk.entries))
        node.applied = min(node.applied, disk.end)

    def _commit(self, node: SimNode, index: int) -> None:
        disk = node.disk
        if index > disk.end:
            self.fail(f"{node.node_id} commits {index} beyond its log end {disk.end}")
        for i in range(max(node.applied + 1, disk.begin), index + 1):
            entry = disk.entries[i - disk.begin]
            known = self.committed.setdefault(i, entry)
            if known != entry:
                self.fail(
                    f"state machine safety: {node.node_id} commits {i}={entry!r}, was {known!r}"
                )
        node.applied = max(node.applied, index)
        disk.checkpoint = (
            max(disk.checkpoint, index) if self.rng.random() < 0.7 else disk.checkpoint
        )
        while node.proposals and node.proposals[0][0] <= index:
            i, pid = node.proposals.popleft()
            self.acked[pid] = (i, disk.term_at(i))

    def _role_changed(self, node: SimNode, effect: RoleChanged) -> None:
        self.trace.append(f"{self.now} {node.node_id} {effect.role.name} term {effect.term}")
        if effect.role is not Role.LEADER:
            return
        other = self.leaders.setdefault(effect.term, node.node_id)
        if other != node.node_id:
            self.fail(f"two leaders in term {effect.term}: {other} and {node.node_id}")
        disk = node.disk
        for index, entry in self.committed.items():
            if index >= disk.begin and (
                index > disk.end or disk.entries[index - disk.begin] != entry
            ):
                self.fail(f"leader completeness: {node.node_id} lacks committed {index}={entry!r}")

    # -- faults and clients ----------------------------------------------------------------
    def _on_propose(self, _: None) -> None:
        if self.now < self.cfg.chaos_ms + self.cfg.heal_ms - 900:
            self._push(
                self.now + self.rng.randint(1, 2 * self.cfg.propose_every_ms), "propose", None
            )
        for node in self.nodes.values():
            core = node.core
            if core is None or core.role is not Role.LEADER:
                continue
            count = self.rng.randint(1, 3)
            pids = list(range(self.next_payload, self.next_payload + count))
            self.next_payload += count
            _code, first = core.propose(tuple(f"p{p}" for p in pids), self.now)
            if first >= 0:
                node.proposals.extend((first + k, pid) for k, pid in enumerate(pids))
            if self.rng.random() < 0.03 and len(self.ids) > 1:
                core.transfer_leadership(self.rng.choice(self.ids), self.now)
            self._after(node)

    def _on_crash(self, _: None) -> None:
        if self.healed:
            return
        self._push(self.now + self.rng.randint(50, self.cfg.crash_every_ms), "crash", None)
        node = self.nodes[self.rng.choice(self.ids)]
        if node.core is None:
            return
        self.trace.append(f"{self.now} crash {node.node_id}")
        for _, pid in node.proposals:
            self.failed.add(pid)
        node.core = None
        node.disk.crash(self.rng)
        node.fsync_pending = False
        self._push(self.now + self.rng.randint(20, 600), "restart", node.node_id)

    def _on_restart(self, node_id: str) -> None:
        node = self.nodes[node_id]
        if node.core is None:
            self.trace.append(f"{self.now} restart {node_id}")
            self._start(node)

    def _on_partition(self, _: None) -> None:
        if self.healed:
            return
        self._push(self.now + self.rng.randint(50, self.cfg.partition_every_ms), "partition", None)
        rng = self.rng
        ids = self.ids
        choice = rng.random()
        self.blocked = set()
        if choice < 0.3:
            return  # a healed spell
        if choice < 0.55:  # isolate one node
            lone = rng.choice(ids)
            self.blocked = {(a, b) for a in ids for b in ids if (a == lone) != (b == lone)}
        elif choice < 0.75:  # split in two
            side = set(rng.sample(ids, len(ids) // 2))
            self.blocked = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
        else:  # one-way links
            self.blocked = {(a, b) for a in ids for b in ids if a != b and rng.random() < 0.3}
        self.trace.append(f"{self.now} partition {sorted(self.blocked)}")

    def _on_heal(self, _: None) -> None:
        self.healed = True
        self.blocked = set()
        self.drop = 0.0
        self.duplicate = 0.0
        self.trace.append(f"{self.now} heal")
        for node in self.nodes.values():
            if node.core is None:
                self._start(node)

    # -- the end ---------------------------------------------------------------------------
    def _check_converged(self) -> None:
        cores = {i: n.core for i, n in self.nodes.items()}
        leaders = [c for c in cores.values() if c is not None and c.role is Role.LEADER]
        top = max(c.term for c in cores.values() if c is not None)
        current = [c for c in leaders if c.term == top]
        if len(current) != 1:
            self.fail(f"liveness: no single leader in term {top} after healing: {self._states()}")
        leader = current[0]
        lead_log = self.nodes[leader.self_id].disk
        if leader.log.committed != leader.log.end:
            self.fail(
                f"liveness: leader {leader.self_id} has not committed its log: {self._states()}"
            )
        for node in self.nodes.values():
            core = node.core
            assert core is not None
            if core.log.committed != leader.log.end or node.disk.entries != lead_log.entries:
                self.fail(f"liveness: {node.node_id} did not converge: {self._states()}")
        final = {
            payload: i for i, (_, payload) in enumerate(lead_log.entries) if payload is not None
        }
        if len(final) != sum(1 for _, p in lead_log.entries if p is not None):
            self.fail("a payload is stored at two indexes")
        for pid, (index, term) in self.acked.items():
            if final.get(f"p{pid}") != index or lead_log.term_at(index) != term:
                self.fail(f"acknowledged p{pid} at {index} (term {term}) is not in the final log")
        if not self.acked:
            self.fail("liveness: nothing was ever acknowledged")

    def _states(self) -> str:
        parts = []
        for i, node in self.nodes.items():
            core = node.core
            if core is None:
                parts.append(f"{i}: down")
            else:
                log = core.log
                parts.append(
                    f"{i}: {core.role.name} t{core.term} end={log.end} "
                    f"commit={log.committed} persisted={log.persisted}"
                )
        return "; ".join(parts)


def scenario(rng: random.Random) -> SimConfig:
    """Draw the shape of a run: group size, fault rates, delays."""
    return SimConfig(
        nodes=rng.choice((1, 3, 3, 3, 5)),
        drop=rng.choice((0.0, 0.02, 0.1, 0.25)),
        duplicate=rng.choice((0.0, 0.05, 0.2)),
        max_delay_ms=rng.choice((3, 15, 60)),
        crash_every_ms=rng.choice((300, 900, 5000)),
        partition_every_ms=rng.choice((200, 700, 5000)),
        max_fsync_ms=rng.choice((0, 10, 40)),
    )


def run(seed: int) -> Simulation:
    """Simulate ``seed``; raise :class:`Violation` when an invariant breaks."""
    sim = Simulation(seed)
    sim.run()
    return sim
