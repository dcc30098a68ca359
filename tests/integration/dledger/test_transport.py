"""Three DLedger stores with their Raft transports in one event loop, over real loopback
sockets: election, replication, a node going away and coming back, bad frames, and peers that
disagree."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from ariane.dledger.config import DLedgerConfig
from ariane.dledger.format import Peer
from ariane.dledger.message_store import DLedgerMessageStore
from ariane.dledger.transport import RaftTransport
from ariane.errors import ConfigError
from ariane.raft import Role
from ariane.store import PutStatus
from tests.support.processes import free_port
from tests.unit.dledger.group import message, store_config

pytestmark = pytest.mark.integration


class Node:
    def __init__(self, root: Path, node_id: str, peers: tuple[Peer, ...], **kw: object) -> None:
        self.root = root
        self.node_id = node_id
        self.peers = peers
        self.kw = kw
        self.store: DLedgerMessageStore | None = None
        self.transport: RaftTransport | None = None

    def config(self) -> DLedgerConfig:
        settings: dict[str, object] = {
            "heart_beat_time_interval_ms": 100, "min_vote_interval_ms": 20,
            "max_vote_interval_ms": 80, "vote_wait_ms": 300, "max_push_time_out_ms": 200,
            "mapped_file_size_for_entry_index": 32 * 1024,
        }  # fmt: skip
        settings.update(self.kw)
        return DLedgerConfig(group="g", self_id=self.node_id, peers=self.peers, **settings)  # type: ignore[arg-type]

    async def start(self) -> None:
        store = DLedgerMessageStore(store_config(str(self.root / self.node_id)), self.config())
        assert await asyncio.to_thread(store.load)
        store.start()
        transport = RaftTransport(store.commit_log.replica, self.config())
        store.commit_log.work_listeners.append(transport.kick)
        try:
            await transport.start(verify_s=0.3)
        except BaseException:
            await transport.stop()
            await asyncio.to_thread(store.shutdown)
            raise
        self.store, self.transport = store, transport

    async def stop(self) -> None:
        if self.transport is not None:
            await self.transport.stop()
        if self.store is not None:
            await asyncio.to_thread(self.store.shutdown)
        self.store = self.transport = None

    @property
    def role(self) -> Role | None:
        if self.store is None:
            return None
        status = self.store.commit_log.replica.status()
        return status.role if status is not None else None


def peers_on_free_ports(n: int) -> tuple[Peer, ...]:
    return tuple(Peer(f"n{i}", "127.0.0.1", free_port()) for i in range(n))


@asynccontextmanager
async def group(root: Path, n: int = 3) -> AsyncIterator[list[Node]]:
    peers = peers_on_free_ports(n)
    nodes = [Node(root, p.node_id, peers) for p in peers]
    try:
        await asyncio.gather(*(node.start() for node in nodes))
        yield nodes
    finally:
        for node in nodes:
            await node.stop()


async def until(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        await asyncio.sleep(0.01)


async def master(nodes: list[Node]) -> Node:
    found: list[Node] = []

    def promoted() -> bool:
        for node in nodes:
            if node.store is not None and node.role is Role.LEADER and node.store.promote():
                found.append(node)
                return True
        return False

    await until(promoted)
    return found[0]


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro(), 60))  # type: ignore[arg-type]


def test_replicates_and_survives_a_node_going_away(tmp_path: Path) -> None:
    async def main() -> None:
        async with group(tmp_path) as nodes:
            leader = await master(nodes)
            assert leader.store is not None
            futures = [leader.store.submit_message(message("T", b"a%d" % i)) for i in range(50)]
            results = [await asyncio.wrap_future(f) for f in futures]
            assert {r.status for r in results} == {PutStatus.PUT_OK}
            follower = next(n for n in nodes if n is not leader)
            await follower.stop()
            more = [leader.store.submit_message(message("T", b"b%d" % i)) for i in range(10)]
            assert {(await asyncio.wrap_future(f)).status for f in more} == {PutStatus.PUT_OK}
            await follower.start()
            assert follower.store is not None
            store = follower.store
            await until(
                lambda: store.commit_log.committed_index >= leader.store.commit_log.committed_index
            )  # type: ignore[union-attr]
            await asyncio.to_thread(store.wait_dispatched)
            got = store.get_message("x", "T", 0, 0, 100)
            assert got.status.name == "FOUND"

    run(main)


def test_a_new_leader_after_the_leader_stops(tmp_path: Path) -> None:
    async def main() -> None:
        async with group(tmp_path) as nodes:
            leader = await master(nodes)
            assert leader.store is not None
            ok = leader.store.submit_message(message("T", b"before"))
            assert (await asyncio.wrap_future(ok)).status is PutStatus.PUT_OK
            await leader.stop()
            others = [n for n in nodes if n is not leader]
            new = await master(others)
            assert new is not leader
            assert new.store is not None
            put = new.store.submit_message(message("T", b"after"))
            result = await asyncio.wrap_future(put)
            assert result.status is PutStatus.PUT_OK
            assert result.logics_offset == 1

    run(main)


def test_garbage_closes_only_that_connection(tmp_path: Path) -> None:
    async def main() -> None:
        async with group(tmp_path) as nodes:
            leader = await master(nodes)
            target = nodes[0].peers[0]
            reader, writer = await asyncio.open_connection(target.host, target.port)
            writer.write(struct.pack(">ib", 5, 77) + os.urandom(4))
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed
            writer.close()
            assert leader.store is not None
            put = leader.store.submit_message(message("T", b"still fine"))
            assert (await asyncio.wrap_future(put)).status is PutStatus.PUT_OK

    run(main)


def test_a_node_whose_peers_disagree_refuses_to_start(tmp_path: Path) -> None:
    async def main() -> None:
        async with group(tmp_path, 3) as nodes:
            await master(nodes)
            wrong = (*nodes[0].peers, Peer("n3", "127.0.0.1", free_port()))
            intruder = Node(tmp_path, "n3", wrong)
            with pytest.raises(ConfigError, match="dLegerPeers"):
                await intruder.start()
            assert intruder.store is None

    run(main)


def test_raw_socket_hello_with_other_group_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        from ariane.dledger.wire import Hello, HelloAck, decode_frame, encode_frame

        async with group(tmp_path, 3) as nodes:
            target = nodes[1].peers[1]
            reader, writer = await asyncio.open_connection(target.host, target.port)
            writer.write(encode_frame(Hello(1, "other", "n0", nodes[0].transport.peers_text)))  # type: ignore[union-attr]
            data = await asyncio.wait_for(reader.read(), 5)
            decoded = decode_frame(data)
            assert decoded is not None
            ack = decoded[0]
            assert isinstance(ack, HelloAck)
            assert not ack.ok
            assert "group" in ack.reason
            writer.close()

    run(main)
