"""Master and slave replication services on one event loop, over real sockets: byte identity,
SYNC_MASTER waits, the history check, garbage frames, reconnects."""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from ariane.common.message import HostPort
from ariane.ha import HAClient, HAConfig, HAMaster, ReplicaPolicy, ReplicaWait, SlaveState
from ariane.ha.wire import encode_frame_header
from ariane.store.config import StoreConfig
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.results import PutStatus

FILE = 64 * 1024
HOST = HostPort(b"\x7f\x00\x00\x01", 10911)
CONFIG = HAConfig(
    heartbeat_interval_ms=200,
    housekeeping_interval_ms=2000,
    transfer_batch_size=4096,
    sync_timeout_ms=1000,
    idle_poll_ms=20,
)


def store_at(root: Path) -> MessageStore:
    cfg = StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=FILE,
        max_message_size=16 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=64,
        max_index_num=400,
    )
    store = MessageStore(cfg)
    assert store.load()
    store.start()
    return store


def put(store: MessageStore, i: int, size: int = 300) -> int:
    body = (b"%06d" % i) * (size // 6)
    res = store.put_message(
        MessageInner(
            topic="T", queue_id=i % 4, body=body, properties={"KEYS": f"k{i}"},
            born_timestamp_ms=1, born_host=HOST, store_host=HOST,
        )
    )  # fmt: skip
    assert res.status is PutStatus.PUT_OK
    return res.wrote_offset + res.wrote_bytes


def log_bytes(store: MessageStore, start: int = 0) -> bytes:
    out = []
    pos = start
    while pos < store.max_phy_offset:
        chunk = store.get_commit_log_data(pos)
        assert chunk
        out.append(chunk)
        pos += len(chunk)
    return b"".join(out)


F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, None]])


def aio(fn: F) -> Callable[..., None]:
    """Run an async test on a fresh event loop (with an overall time limit)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 60))

    return wrapper


def as_future(wait: ReplicaWait) -> asyncio.Future[PutStatus]:
    future: asyncio.Future[PutStatus] = asyncio.get_running_loop().create_future()
    wait.callback = future.set_result
    return future


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


@asynccontextmanager
async def pair(
    tmp_path: Path, config: HAConfig = CONFIG
) -> AsyncIterator[tuple[MessageStore, HAMaster, MessageStore, HAClient]]:
    master_store = store_at(tmp_path / "m")
    slave_store = store_at(tmp_path / "s")
    slave_store.set_replica_mode(True)
    master = HAMaster(master_store, config)
    port = await master.start("127.0.0.1", 0)
    client = HAClient(slave_store, config)
    client.set_master_address(f"127.0.0.1:{port}")
    client.start()
    try:
        yield master_store, master, slave_store, client
    finally:
        await client.stop()
        await master.stop()
        master_store.shutdown()
        slave_store.shutdown()


@aio
async def test_slave_copies_the_log_byte_for_byte(tmp_path: Path) -> None:
    async with pair(tmp_path) as (mstore, master, sstore, client):
        for i in range(400):
            put(mstore, i, 100 + i * 7 % 900)
            if i % 50 == 0:
                master.notify()
                await asyncio.sleep(0)
        assert mstore.max_phy_offset > 3 * FILE
        await until(lambda: sstore.max_phy_offset == mstore.max_phy_offset)
        assert log_bytes(sstore) == log_bytes(mstore)
        assert client.state is SlaveState.TRANSFER
        await until(lambda: master.push_max_offset == mstore.max_phy_offset)
        assert sstore.wait_dispatched()
        assert sstore.get_max_offset_in_queue("T", 3) == 100


@aio
async def test_sync_wait_completes_on_ack_and_times_out_without_slave(tmp_path: Path) -> None:
    async with pair(tmp_path) as (mstore, master, sstore, client):
        await until(lambda: len(master.connections) == 1 and master.connections[0].ack_offset >= 0)
        ends = [put(mstore, i) for i in range(20)]
        waits = [master.replicate(end) for end in ends]
        futures = [as_future(w) for w in waits if isinstance(w, ReplicaWait)]
        assert futures  # not everything was acknowledged already
        results = await asyncio.gather(*futures)
        assert set(results) == {PutStatus.PUT_OK}
        assert sstore.max_phy_offset >= ends[-1]
        await client.stop()
        await until(lambda: not master.connections)
        assert master.replicate(put(mstore, 99)) is PutStatus.SLAVE_NOT_AVAILABLE


@aio
async def test_sync_wait_times_out_when_the_slave_stalls(tmp_path: Path) -> None:
    async with pair(tmp_path) as (mstore, master, _sstore, client):
        await until(lambda: len(master.connections) == 1 and master.connections[0].ack_offset >= 0)
        master.connections[0].next_offset = -1  # the link stalls: nothing is sent any more
        wait = master.replicate(put(mstore, 1))
        assert isinstance(wait, ReplicaWait)
        assert await as_future(wait) is PutStatus.FLUSH_SLAVE_TIMEOUT
        # waiting is never for ever, whatever the slave does
        assert len(master.waits) == 0
        assert client.state is SlaveState.TRANSFER


@aio
async def test_in_sync_replicas_one_does_not_wait(tmp_path: Path) -> None:
    config = HAConfig(heartbeat_interval_ms=200, policy=ReplicaPolicy(in_sync_replicas=1))
    async with pair(tmp_path, config) as (mstore, master, _s, _c):
        assert master.replicate(put(mstore, 1)) is PutStatus.PUT_OK


@aio
async def test_slave_restarts_and_catches_up(tmp_path: Path) -> None:
    async with pair(tmp_path) as (mstore, _master, sstore, client):
        for i in range(50):
            put(mstore, i)
        await until(lambda: sstore.max_phy_offset == mstore.max_phy_offset)
        await client.stop()
        for i in range(50, 600):
            put(mstore, i)
        client.start()
        await until(lambda: sstore.max_phy_offset == mstore.max_phy_offset)
        assert log_bytes(sstore) == log_bytes(mstore)
        assert client.connections == 2


@aio
async def test_slave_refuses_a_master_with_another_history(tmp_path: Path) -> None:
    other = store_at(tmp_path / "other")
    for i in range(30):
        put(other, 1000 + i)
    async with pair(tmp_path) as (mstore, _master, sstore, client):
        for i in range(30):
            put(mstore, i)
        await until(lambda: sstore.max_phy_offset == mstore.max_phy_offset)
        before = log_bytes(sstore)
        await client.stop()
        wrong = HAMaster(other, CONFIG)
        port = await wrong.start("127.0.0.1", 0)
        try:
            client.set_master_address(f"127.0.0.1:{port}")
            client.start()
            await until(lambda: client.state is SlaveState.REFUSED)
            assert "differs" in (client.refused_reason or "")
            assert log_bytes(sstore) == before
        finally:
            await wrong.stop()
            other.shutdown()


@aio
async def test_slave_ahead_of_its_master_stops(tmp_path: Path) -> None:
    async with pair(tmp_path) as (mstore, _master, sstore, client):
        for i in range(30):
            put(mstore, i)
        await until(lambda: sstore.max_phy_offset == mstore.max_phy_offset)
        await client.stop()
        fresh = store_at(tmp_path / "fresh")  # a master that lost everything
        put(fresh, 0)
        behind = HAMaster(fresh, CONFIG)
        port = await behind.start("127.0.0.1", 0)
        try:
            client.set_master_address(f"127.0.0.1:{port}")
            client.start()
            await until(lambda: client.state is SlaveState.REFUSED)
            assert "ahead" in (client.refused_reason or "")
            assert sstore.max_phy_offset == mstore.max_phy_offset
        finally:
            await behind.stop()
            fresh.shutdown()


@aio
async def test_garbage_from_a_fake_master_never_reaches_the_log(tmp_path: Path) -> None:
    """A fake master sends a valid start, then junk: the slave closes, its log stays valid."""
    real = store_at(tmp_path / "real")
    for i in range(5):
        put(real, i)
    data = log_bytes(real)
    real.shutdown()
    sstore = store_at(tmp_path / "s")
    sstore.set_replica_mode(True)
    connections = 0

    async def fake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readexactly(8)
        if connections == 1:  # half the log, then a corrupted copy of the rest
            writer.write(encode_frame_header(0, 1000) + data[:1000])
            bad = bytearray(data[1000:])
            bad[-50] ^= 0x55
            writer.write(encode_frame_header(1000, len(bad)) + bytes(bad))
        elif connections == 2:  # a broken header
            writer.write(struct.pack(">qi", 0, -3))
        else:
            writer.write(b"\xff" * 40)
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(fake, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HAClient(sstore, HAConfig(heartbeat_interval_ms=50, housekeeping_interval_ms=500))
    client.set_master_address(f"127.0.0.1:{port}")
    client.start()
    try:
        await until(lambda: connections >= 3)
        end = sstore.max_phy_offset
        assert 0 < end < len(data)
        assert data.startswith(log_bytes(sstore))
    finally:
        await client.stop()
        server.close()
        sstore.shutdown()


@aio
async def test_master_closes_a_connection_that_sends_junk(tmp_path: Path) -> None:
    await closed_by_master(tmp_path, CONFIG, struct.pack(">q", -9))


async def closed_by_master(tmp_path: Path, config: HAConfig, sent: bytes) -> None:
    """Connect to a master as a slave would, send ``sent`` (nothing: b""), and wait until the
    master closes the connection and forgets it."""
    store = store_at(tmp_path / "m")
    master = HAMaster(store, config)
    port = await master.start("127.0.0.1", 0)
    try:
        await asyncio.sleep(0.05)
        assert not master._has_slaves.is_set()  # its housekeeping asleep: no slave
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await until(lambda: len(master.connections) == 1)
        writer.write(sent)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the master
        await until(lambda: not master.connections)
        writer.close()
        await writer.wait_closed()
    finally:
        await master.stop()
        store.shutdown()


@aio
async def test_master_housekeeping_sleeps_without_slaves_and_closes_a_silent_one(
    tmp_path: Path,
) -> None:
    """The housekeeping loop waits for a first slave instead of ticking for none; once one
    connects it runs again: a connection that never sends is closed after the interval."""
    config = HAConfig(heartbeat_interval_ms=50, housekeeping_interval_ms=300, idle_poll_ms=20)
    await closed_by_master(tmp_path, config, b"")
