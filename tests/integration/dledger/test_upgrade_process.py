"""Upgrading a plain broker's store to DLedger (book section 2.16), with real processes: a
broker without DLedger stores messages with keys and stops; its store (and two copies of it,
as its slaves would hold) becomes a three-node DLedger group. Every old message is still found
by key, by id and at its queue offset, and new sends continue the old queue offsets."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ariane.client import Admin, Message, MessageQueue, Producer
from tests.integration.dledger.cluster import FAST_RAFT, DLedgerCluster
from tests.support.cluster import start_broker, start_namesrv

pytestmark = [pytest.mark.integration]

TOPIC = "Upgraded"
OLD = 24
NEW = 6


async def _send(namesrv: str, bodies: list[tuple[bytes, str]]) -> list[tuple[int, int, str]]:
    """Send each (body, key); returns (queue id, queue offset, msg id) per message."""
    out = []
    async with Producer("upgrade-pg", namesrv_addr=namesrv) as producer:
        for body, key in bodies:
            r = await producer.send(Message(TOPIC, body, keys=key))
            out.append((r.message_queue.queue_id, r.queue_offset, r.msg_id))
    return out


def test_a_plain_store_becomes_a_dledger_group_and_keeps_its_messages(tmp_path: Path) -> None:
    old_bodies = [(b"old-%02d-" % i + b"x" * (i * 97), f"old{i}") for i in range(OLD)]
    namesrv = start_namesrv(tmp_path / "plain-ns")
    try:
        plain = start_broker(
            tmp_path / "n0",
            namesrv.ready["namesrv"],
            {"mappedFileSizeCommitLog": FAST_RAFT["mappedFileSizeCommitLog"]},
        )
        try:
            old = asyncio.run(_send(namesrv.ready["namesrv"], old_bodies))
        finally:
            plain.stop()
    finally:
        namesrv.stop()
    for node in ("n1", "n2"):
        shutil.copytree(tmp_path / "n0" / "store", tmp_path / node / "store")

    cluster = DLedgerCluster(tmp_path).start()
    try:
        new_bodies = [(b"new-%d" % i, f"new{i}") for i in range(NEW)]

        async def main() -> None:
            async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
                await cluster.master(admin, timeout_s=60)
                new = await _send(cluster.namesrv_addr, new_bodies)
                for (body, key), (qid, offset, msg_id) in zip(
                    old_bodies + new_bodies, old + new, strict=True
                ):
                    found = await _until_found(admin, key)
                    assert [m.body for m in found] == [body], key
                    by_id = await admin.query_message_by_id(TOPIC, msg_id)
                    assert by_id.body == body
                    at = await admin.query_message_by_offset(
                        MessageQueue(TOPIC, "broker-a", qid), offset
                    )
                    assert at is not None, (qid, offset)
                    assert at.body == body, (qid, offset)
                # the queue offsets go on from the old ones, without a gap or a repeat
                per_queue: dict[int, list[int]] = {}
                for qid, offset, _ in old + new:
                    per_queue.setdefault(qid, []).append(offset)
                for offsets in per_queue.values():
                    assert offsets == list(range(len(offsets)))

        asyncio.run(main())
    finally:
        cluster.stop()


async def _until_found(admin: Admin, key: str) -> list[object]:
    """Query by key until the index has it (a new message is indexed after its answer)."""
    for _ in range(200):
        found = await admin.query_message(TOPIC, key)
        if found:
            return found  # type: ignore[return-value]
        await asyncio.sleep(0.05)
    raise AssertionError(f"key {key} never found")
