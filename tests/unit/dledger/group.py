"""A DLedger group of real stores in one process: messages go from one replica's outbox to
another's ``step`` by hand, Raft's clock is a number the test moves."""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import Future

from ariane.common.message import HostPort
from ariane.dledger.config import DLedgerConfig
from ariane.dledger.format import Peer
from ariane.dledger.message_store import DLedgerMessageStore
from ariane.raft import Message, Role
from ariane.store import MessageInner, PutResult, StoreConfig

HOST = HostPort(b"\x7f\x00\x00\x01", 10911)


def message(topic: str, body: bytes, *, queue_id: int = 0, keys: str | None = None) -> MessageInner:
    props = {"UNIQ_KEY": body.hex()[:32] or "empty"}
    if keys:
        props["KEYS"] = keys
    return MessageInner(topic, queue_id, body, 0, props, 0, 1, HOST, HOST, 0, 0, None)


def store_config(root: str, **kw: object) -> StoreConfig:
    settings: dict[str, object] = {
        "store_path_root_dir": root,
        "mapped_file_size_commit_log": 64 * 1024,
        "max_message_size": 16 * 1024,
        "mapped_file_size_consume_queue": 20 * 200,
        "max_hash_slot_num": 64,
        "max_index_num": 256,
        "flush_interval_consume_queue_ms": 50,
    }
    settings.update(kw)
    return StoreConfig(**settings)  # type: ignore[arg-type]


class Group:
    """``n`` DLedger stores under ``root/<id>``, started."""

    def __init__(self, root: str, n: int = 3, **store_kw: object) -> None:
        self.root = root
        self.now = 0
        self.ids = [f"n{i}" for i in range(n)]
        self.peers = tuple(Peer(i, "127.0.0.1", 40000 + k) for k, i in enumerate(self.ids))
        self.store_kw = store_kw
        self.stores: dict[str, DLedgerMessageStore] = {}
        self.cut: set[str] = set()
        self.dropped: list[Message] = []
        for i in self.ids:
            self.start(i)

    def dledger(self, node: str) -> DLedgerConfig:
        return DLedgerConfig(
            group="g", self_id=node, peers=self.peers, heart_beat_time_interval_ms=100,
            min_vote_interval_ms=10, max_vote_interval_ms=30, vote_wait_ms=200,
            max_wait_ack_time_ms=1000, max_push_time_out_ms=100,
            mapped_file_size_for_entry_index=32 * 64,
            check_point_interval_ms=60_000,
        )  # fmt: skip

    def start(self, node: str) -> DLedgerMessageStore:
        store = DLedgerMessageStore(
            store_config(os.path.join(self.root, node), **self.store_kw),
            self.dledger(node),
            monotonic_ms=lambda: self.now,
        )
        assert store.load()
        store.start()
        self.stores[node] = store
        return store

    def crash(self, node: str) -> None:
        """The state a killed process leaves."""
        self.stores.pop(node).close_without_cleanup()

    def stop(self, node: str) -> None:
        self.stores.pop(node).shutdown()

    def close(self) -> None:
        for node in list(self.stores):
            self.stop(node)

    # -- moving messages and time -------------------------------------------------------
    def pump(self) -> None:
        """Deliver every message until none is left (messages to or from cut nodes are
        lost; to a stopped node they fail at once)."""
        for _ in range(10_000):
            moved = False
            for node, store in list(self.stores.items()):
                for msg in store.commit_log.replica.take_outbox():
                    moved = True
                    target = self.stores.get(msg.remote_id)
                    if msg.remote_id in self.cut or node in self.cut:
                        self.dropped.append(msg)
                    elif target is None:
                        store.commit_log.replica.send_failed(msg)
                    else:
                        target.commit_log.replica.step(msg)
            if not moved:
                return
        raise AssertionError("messages never stop")

    def tick(self, ms: int = 0, *, times: int = 1) -> None:
        for _ in range(times):
            self.now += ms
            for store in list(self.stores.values()):
                store.commit_log.replica.tick()
            self.pump()
            self._due()

    def _due(self) -> None:
        """Tick the nodes whose next deadline has come again, as the transport's timer does
        (a leader sends a COMMIT push on the tick after the commit index moved)."""
        for _ in range(8):
            due = [
                store.commit_log.replica
                for node, store in self.stores.items()
                if node not in self.cut and store.commit_log.replica.next_deadline_ms() <= self.now
            ]
            if not due:
                return
            for replica in due:
                replica.tick()
            self.pump()

    def role(self, node: str) -> Role:
        status = self.stores[node].commit_log.replica.status()
        assert status is not None
        return status.role

    def leader(self) -> str | None:
        """The leader of the highest term among nodes that are not cut off."""
        best: tuple[int, str] | None = None
        for node, store in self.stores.items():
            status = store.commit_log.replica.status()
            if node in self.cut or status is None or status.role is not Role.LEADER:
                continue
            if best is None or status.term > best[0]:
                best = (status.term, node)
        return best[1] if best is not None else None

    def elect(self, node: str | None = None) -> str:
        """Tick until there is a leader (``node``, if given: the others never stand)."""
        for _ in range(600):
            if node is not None:
                for other, store in self.stores.items():
                    core = store.commit_log.replica.node
                    assert core is not None
                    if other == node:
                        continue
                    # a follower that loses its leader stands after a random delay that may
                    # be 0 ms, inside one tick: keep its leader "alive" so it never does
                    if core.role is Role.FOLLOWER:
                        core.last_leader_hb_ms = self.now
                    elif core.vote_round is None:
                        core.next_vote_ms = self.now + 10**6
                        core.need_increase_term = False
            self.tick(5)
            leader = self.leader()
            if leader is not None and (node is None or leader == node):
                return self.promote(leader)
        raise AssertionError("no leader")

    def promote(self, node: str) -> str:
        """Tick until ``node`` takes writes (its log committed and dispatched)."""
        store = self.stores[node]
        for _ in range(200):
            self.tick(5)
            store.wait_dispatched(1.0)
            if store.promote():
                return node
        raise AssertionError(f"{node} never became the writable master")

    def put(self, node: str, msgs: Iterable[MessageInner]) -> list[Future[PutResult]]:
        futures = [self.stores[node].submit_message(m) for m in msgs]
        self.pump()
        self.tick()
        return futures

    def dispatched(self) -> None:
        for store in self.stores.values():
            assert store.wait_dispatched(10.0)
