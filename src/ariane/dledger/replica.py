"""One DLedger node's state machine bound to its files (DLedger's ``DLedgerServer`` minus the
network): the glue between :class:`ariane.raft.RaftNode` and :class:`DLedgerFiles`.

How it works: every call takes the replica's lock (the DLedger CommitLog's put lock too, so a
put and a replicated entry never interleave), feeds the core, then carries out the effects in
order: the term and vote go to ``currterm`` (written, synced and renamed before anything is
sent), entries are written to the data and index files, truncations and wipes keep a copy of
what they cut, commits and failed proposals and role changes go to the listener, and messages
wait in an outbox the transport empties after the call. Under ASYNC_FLUSH an entry counts as
persisted once it is in the page cache (what survives a killed process, as DLedger does);
under SYNC_FLUSH only after :meth:`Replica.flush` synced it (the transport calls it from a
thread). Any storage error stops the replica for good (fail-stop): its disk and its core could
disagree, and recovery at the next start sorts it out.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import threading
from collections.abc import Callable
from typing import Protocol

from ariane.common.fileio import write_file_atomically
from ariane.dledger.files import DLedgerFiles
from ariane.dledger.format import (
    decode_checkpoint,
    decode_currterm,
    encode_checkpoint,
    encode_currterm,
)
from ariane.errors import StoreError
from ariane.raft import (
    NOOP,
    AppendEntries,
    Code,
    Committed,
    Message,
    NodeStatus,
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
from ariane.store.mapped_file import MappedFile

__all__ = ["WRITTEN", "Replica", "ReplicaListener"]

logger = logging.getLogger(__name__)


class _Written:
    """The payload of an entry its proposer already wrote (the DLedger CommitLog's puts)."""

    def __repr__(self) -> str:
        return "WRITTEN"


#: Payload marker: the caller of :meth:`Replica.propose` writes the entry itself.
WRITTEN = _Written()


class ReplicaListener(Protocol):
    """What the replica tells its owner (the DLedger CommitLog), under the replica's lock."""

    def on_copied(self, records: list[tuple[MappedFile, int, int, int]]) -> None:
        """Entries from the leader were written: (data file, in-file position, index, body
        size) of each that holds a record, in log order."""

    def on_truncated(self, pos: int) -> None:
        """Entries from data offset ``pos`` on were cut."""

    def on_committed(self, index: int, pos: int) -> None:
        """Entries up to ``index`` are committed; the data up to ``pos`` may be read."""

    def on_failed(self, first: int, last: int, code: Code) -> None:
        """Proposals ``first .. last`` of this node will not succeed (``code``)."""

    def on_role(self, term: int, role: Role, leader_id: str | None) -> None:
        """The node changed role."""


class Replica:
    """A node's Raft core, files and persistent state.

    Args:
        config: the Raft settings.
        files: the data and index files (loaded by :meth:`load`).
        listener: told about copies, cuts, commits, failures and role changes.
        now_ms: a monotonic clock in milliseconds.
        sync_persist: entries count as persisted only once synced (SYNC_FLUSH).
        lock: the lock to share (the DLedger CommitLog's put lock).
        rng: randomness for the vote intervals.
    """

    def __init__(
        self,
        config: RaftConfig,
        files: DLedgerFiles,
        listener: ReplicaListener,
        now_ms: Callable[[], int],
        *,
        sync_persist: bool = False,
        lock: threading.RLock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.files = files
        self.listener = listener
        self.now_ms = now_ms
        self.sync_persist = sync_persist
        self.lock = lock if lock is not None else threading.RLock()
        self.rng = rng or random.Random()
        self.node: RaftNode | None = None
        self.outbox: list[Message] = []
        #: callbacks the listener leaves to run once the lock is released (future results)
        self.completions: list[Callable[[], None]] = []
        self.failed: str | None = None
        self._generation = 0

    # -- paths and start ---------------------------------------------------------------------
    @property
    def currterm_path(self) -> str:
        return os.path.join(self.files.base_dir, "currterm")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.files.base_dir, "checkpoint")

    def load(self) -> None:
        """Recover the files and build the core from them, ``currterm`` and ``checkpoint``.

        Raises:
            OSError: files cannot be read or written.
            CorruptionError: ``currterm`` is unreadable.
        """
        with self.lock:
            report = self.files.load()
            self.files.flush()  # what survived is durable from now on
            term, voted_for = 0, None
            try:
                with open(self.currterm_path, "rb") as f:
                    term, voted_for = decode_currterm(f.read())
            except FileNotFoundError:
                pass
            _, committed = self._read_checkpoint()
            files = self.files
            begin = files.begin
            log = RaftLog(
                begin.index, files.term_runs(), files.end, begin.base_term,
                committed=min(committed, files.end),
            )  # fmt: skip
            self.node = RaftNode(
                self.config, term=term, voted_for=voted_for, log=log, rng=self.rng,
                now_ms=self.now_ms(),
            )  # fmt: skip
            logger.info(
                "DLedger %s/%s loaded: term %d, vote %s, entries %d..%d, committed %d (%s)",
                self.config.group, self.config.self_id, term, voted_for, begin.index, files.end,
                log.committed, report.reason or "clean",
            )  # fmt: skip

    def _read_checkpoint(self) -> tuple[int, int]:
        try:
            with open(self.checkpoint_path, "rb") as f:
                return decode_checkpoint(f.read())
        except FileNotFoundError:
            return -1, -1

    def write_checkpoint(self) -> None:
        """Persist the end and commit index (every few seconds and at shutdown)."""
        with self.lock:
            node = self.node
            if node is None:
                return
            data = encode_checkpoint(node.log.end, node.log.committed)
        write_file_atomically(self.checkpoint_path, data)

    # -- inputs (each takes the lock and runs the effects) ------------------------------------
    def _core(self) -> RaftNode:
        if self.failed is not None:
            raise StoreError(f"DLedger replica stopped: {self.failed}")
        node = self.node
        if node is None:
            raise StoreError("DLedger replica not loaded")
        return node

    def complete(self) -> None:
        """Run what the listener left for after the lock (call without holding it)."""
        with self.lock:
            done, self.completions = self.completions, []
        for callback in done:
            callback()

    def step(self, msg: Message) -> None:
        """A message from a peer."""
        with self.lock:
            if self.failed is None:
                self._core().step(msg, self.now_ms())
                self.run()
        self.complete()

    def tick(self) -> None:
        """Time passed (the transport calls it at :meth:`next_deadline_ms`)."""
        with self.lock:
            if self.failed is None:
                self._core().tick(self.now_ms())
                self.run()
        self.complete()

    def send_failed(self, msg: Message) -> None:
        """The transport could not deliver ``msg``."""
        with self.lock:
            if self.failed is None:
                self._core().send_failed(msg, self.now_ms())
                self.run()
        self.complete()

    def transfer_leadership(self, transferee: str) -> Code:
        """Hand leadership to ``transferee`` (see ``RaftNode.transfer_leadership``)."""
        with self.lock:
            code = self._core().transfer_leadership(transferee, self.now_ms())
            self.run()
        self.complete()
        return code

    def can_propose(self, count: int) -> Code:
        """Under the lock: SUCCESS when ``count`` entries would be accepted now."""
        node = self._core()
        if node.role is not Role.LEADER:
            return Code.NOT_LEADER
        if node.transferee is not None:
            return Code.LEADER_TRANSFERRING
        if node.proposal_count + count > self.config.max_pending_requests_num:
            return Code.LEADER_PENDING_FULL
        return Code.SUCCESS

    def propose(self, count: int) -> tuple[Code, int, int]:
        """Under the lock (held by the caller): make room for ``count`` entries the caller
        writes itself. Returns (code, first index, term).

        The effects this leaves in the core (the entries, to count as persisted) are carried
        out by the next call that runs the core or takes the outbox, once for a whole burst of
        puts rather than once per put: until then the leader's own copy is not counted towards
        the quorum, so nothing commits early."""
        node = self._core()
        code, first = node.propose((WRITTEN,) * count, self.now_ms())
        return code, first, node.term

    def next_deadline_ms(self) -> int:
        """When :meth:`tick` is due."""
        with self.lock:
            node = self.node
            if node is None or self.failed is not None:
                return self.now_ms() + 1000
            return node.next_deadline_ms()

    def settle(self) -> None:
        """Under the lock: carry out effects a put left in the core (see :meth:`propose`)."""
        node = self.node
        if node is not None and node.out and self.failed is None:
            self.run()

    def take_outbox(self) -> list[Message]:
        """The messages to send, in order (effects left by puts are carried out first; their
        completions wait for the next :meth:`complete`).

        Raises:
            OSError, StoreError: storage failed carrying out an effect (the replica stops).
        """
        with self.lock:
            self.settle()
            out, self.outbox = self.outbox, []
            return out

    def status(self) -> NodeStatus | None:
        """The core's status (None before loading)."""
        with self.lock:
            return self.node.status() if self.node is not None else None

    # -- effects ---------------------------------------------------------------------------------
    def run(self) -> None:
        """Carry out the core's effects (the caller holds the lock)."""
        node = self.node
        assert node is not None
        try:
            while True:
                effects = node.take()
                if not effects:
                    return
                appended = False
                for effect in effects:
                    appended |= self._apply(effect)
                if appended and not self.sync_persist:
                    end = self.files.end
                    node.persisted(end, self.files.term_at(end), self.now_ms())
        except (OSError, StoreError) as exc:
            self.failed = f"storage failed: {exc}"
            logger.critical("DLedger replica %s stops: %s", self.config.self_id, self.failed)
            raise

    def _apply(self, effect: object) -> bool:
        files = self.files
        listener = self.listener
        if isinstance(effect, Send):
            self.outbox.append(self._fill(effect.msg))
        elif isinstance(effect, AppendEntries):
            payloads = effect.payloads
            if payloads and type(payloads[0]) is bytes:  # a follower's copies of a push
                listener.on_copied(files.append_copies(payloads, effect.first_index, effect.terms))
                return True
            for offset, payload in enumerate(payloads):
                index = effect.first_index + offset
                if payload is WRITTEN:
                    continue
                if payload is NOOP:
                    mf, at = files.reserve(0)
                    files.seal(mf, at, index, effect.terms[offset], 0, noop=True)
                    continue
                raise StoreError(f"entry {index}: unexpected payload {type(payload)}")
            return True
        elif isinstance(effect, SaveState):
            write_file_atomically(
                self.currterm_path, encode_currterm(effect.term, effect.voted_for)
            )
        elif isinstance(effect, TruncateLog):
            self._generation += 1
            if effect.wipe:
                files.reset(effect.after_index + 1, effect.base_term)
                listener.on_truncated(0)
            else:
                files.truncate_after(effect.after_index)
                listener.on_truncated(files.end_pos)
        elif isinstance(effect, Committed):
            unit = files.unit(effect.index)
            pos = unit[1] + unit[2] if unit is not None else files.end_pos
            listener.on_committed(effect.index, pos)
        elif isinstance(effect, ProposalsFailed):
            listener.on_failed(effect.first, effect.last, effect.code)
        elif isinstance(effect, RoleChanged):
            logger.info(
                "DLedger %s is %s in term %d (leader %s)", self.config.self_id,
                effect.role.name, effect.term, effect.leader_id,
            )  # fmt: skip
            listener.on_role(effect.term, effect.role, effect.leader_id)
        return False

    def _fill(self, msg: Message) -> Message:
        """An APPEND push leaves the core without payloads: read the entries."""
        if not isinstance(msg, PushRequest) or msg.kind is not PushType.APPEND or msg.payloads:
            return msg
        payloads = self.files.entries(msg.index, msg.last_index)
        if payloads is None:
            raise StoreError(f"entries {msg.index}..{msg.last_index} to push are not in the files")
        return dataclasses.replace(msg, payloads=tuple(payloads))

    # -- durability ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Sync the files, then report the entries synced (SYNC_FLUSH; from a thread)."""
        with self.lock:
            if self.node is None or self.failed is not None:
                return
            end = self.files.end
            term = self.files.term_at(end)
            generation = self._generation
        self.files.flush()
        with self.lock:
            if self.failed is None and generation == self._generation and end >= 0:
                node = self._core()
                node.persisted(end, term, self.now_ms())
                self.run()
        self.complete()
