"""Offset stores without a broker: memory rules and the local file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ariane.client import LocalFileOffsetStore, MessageQueue, ReadOffsetType
from ariane.remoting.protocol import fastjson

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)
OTHER = MessageQueue("U", "broker-b", 3)


def test_update_offset_increase_only(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("cid", "g", tmp_path)
    store.update_offset(MQ0, 10, True)  # absent: taken whatever increase_only says
    store.update_offset(MQ0, 5, True)
    assert store.offset_table[MQ0] == 10
    store.update_offset(MQ0, 5, False)
    assert store.offset_table[MQ0] == 5
    assert store.clone_offset_table("T") == {MQ0: 5}
    assert store.clone_offset_table("U") == {}


def test_local_file_round_trip_atomic_and_backup(tmp_path: Path) -> None:
    async def go() -> None:
        store = LocalFileOffsetStore("127.0.0.1@x", "grp", tmp_path)
        assert store.path == tmp_path / "127.0.0.1@x" / "grp" / "offsets.json"
        store.update_offset(MQ0, 7, False)
        store.update_offset(MQ1, 9, False)
        store.update_offset(OTHER, 1, False)
        await store.persist_all({MQ0, MQ1, OTHER})
        store.update_offset(MQ0, 8, False)
        await store.persist_all({MQ0, MQ1, OTHER})
        raw = store.path.read_bytes()
        assert b'"offsetTable"' in raw
        assert b'"brokerName"' in raw
        assert not store.path.with_name("offsets.json.tmp").exists()
        again = LocalFileOffsetStore("127.0.0.1@x", "grp", tmp_path)
        again.load()
        assert again.offset_table == {MQ0: 8, MQ1: 9, OTHER: 1}
        assert await again.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == 8
        assert (
            await again.read_offset(MessageQueue("T", "b", 9), ReadOffsetType.READ_FROM_MEMORY)
            == -1
        )
        # a lost file falls back to the previous copy
        store.path.unlink()
        restored = LocalFileOffsetStore("127.0.0.1@x", "grp", tmp_path)
        restored.load()
        assert restored.offset_table == {MQ0: 7, MQ1: 9, OTHER: 1}

    asyncio.run(go())


def test_garbage_file_means_no_offsets(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("c", "g", tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"\x00{not json")
    store.load()
    assert store.offset_table == {}


def test_file_is_readable_by_the_fastjson_reader(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("c", "g", tmp_path)
    store.update_offset(MQ0, 3, False)
    store.write()
    data = fastjson.loads(store.path.read_bytes())
    assert list(data["offsetTable"].values()) == [3]
