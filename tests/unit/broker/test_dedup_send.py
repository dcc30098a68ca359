"""Idempotent sends: the broker stores a message carrying ``__ARIANE_DEDUP`` once per topic
within its window and answers a repeat with the first copy (no sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ariane.common.batch import encode_batch
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import DEDUP, encode_properties
from ariane.common.record import decode_records
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import FlushDiskType
from tests.unit.broker.harness import Broker, FakeChannel, run


def _where(r: RemotingCommand) -> tuple[int, int, str]:
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]), r.ext_fields["msgId"]


def _bodies(b: Broker, topic: str, queue_id: int) -> list[bytes]:
    out: list[bytes] = []
    while True:  # a pull answers at most maxTransferCountOnMessageInMemory messages
        got = b.c.store.get_message("G", topic, queue_id, len(out), 100)
        if not got.messages:
            return out
        out += [decode_records(record)[0].body for record in got.messages]


async def _request(b: Broker, code: int, header: h.CommandHeader, body: bytes) -> RemotingCommand:
    """Dispatch one send and wait for its answer (SYNC_FLUSH answers from the group commit)."""
    ch = FakeChannel()
    b.c.remoting.dispatcher.handle_request(
        ch,  # type: ignore[arg-type]
        RemotingCommand.request(code, header.to_ext_fields(), body),
    )
    for _ in range(60_000):  # a generous deadline (60 s) on a loaded machine
        if ch.sent:
            break
        await asyncio.sleep(0.001)
    (r,) = ch.sent
    b.c.store.wait_dispatched()
    return r


async def _send(b: Broker, topic: str, body: bytes, dedup_id: str) -> RemotingCommand:
    header = b.send_header(topic, 0, encode_properties({DEDUP: dedup_id})).to_v2()
    return await _request(b, RequestCode.SEND_MESSAGE_V2, header, body)


async def _batch(b: Broker, topic: str, msgs: list[tuple[bytes, str | None]]) -> RemotingCommand:
    header = b.send_header(topic, 0, batch=True).to_v2()
    body = encode_batch(
        (body, 0, {"UNIQ_KEY": f"U{i}", **({DEDUP: d} if d else {})})
        for i, (body, d) in enumerate(msgs)
    )
    return await _request(b, RequestCode.SEND_BATCH_MESSAGE, header, body)


def test_a_repeated_send_is_stored_once_and_answered_with_the_first_copy(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        first = await b.send("T", b"one", queue_id=1, props={DEDUP: "id-1"})
        again = await b.send("T", b"one", queue_id=2, props={DEDUP: "id-1"})
        assert _where(again) == _where(first) == (1, 0, first.ext_fields["msgId"])
        other = await b.send("T", b"two", queue_id=1, props={DEDUP: "id-2"})
        assert _where(other)[:2] == (1, 1)
        plain = [await b.send("T", b"p", queue_id=1) for _ in range(2)]  # no id: both stored
        assert [_where(r)[1] for r in plain] == [2, 3]
        elsewhere = await b.send("U", b"one", queue_id=1, props={DEDUP: "id-1"})
        assert _where(elsewhere)[:2] == (1, 0)  # ids are per topic
        assert _bodies(b, "T", 1) == [b"one", b"two", b"p", b"p"]
        assert _bodies(b, "T", 2) == []
        assert (b.c.store.dedup.duplicates, len(b.c.store.dedup)) == (1, 3)
        assert b.c.stats.put_total == 5  # the dropped duplicate is not counted as a put
        await b.stop()

    run(main())


def test_a_batch_drops_just_its_duplicates(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        r1 = await _batch(b, "T", [(b"a", "A"), (b"b", "B"), (b"n", None)])
        assert _where(r1)[:2] == (0, 0)
        r2 = await _batch(b, "T", [(b"b", "B"), (b"c", "C"), (b"c", "C"), (b"m", None)])
        assert _where(r2)[:2] == (0, 3)
        ids2 = r2.ext_fields["msgId"].split(",")
        ids1 = r1.ext_fields["msgId"].split(",")
        assert len(ids2) == 4  # one message id per message of the batch, first copies' too
        assert ids2[0] == ids1[1]
        assert ids2[1] == ids2[2]
        assert decode_offset_msg_id(ids2[3]).phys_offset > decode_offset_msg_id(ids2[1]).phys_offset
        r3 = await _batch(b, "T", [(b"a", "A"), (b"c", "C")])  # all stored before
        assert _where(r3)[:2] == (0, 0)
        assert r3.ext_fields["msgId"].split(",") == [ids1[0], ids2[1]]
        assert _bodies(b, "T", 0) == [b"a", b"b", b"n", b"c", b"m"]
        assert b.c.store.dedup.duplicates == 4
        await b.stop()

    run(main())


def test_repeats_inside_one_batch_point_at_their_first_copy(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        msgs: list[tuple[bytes, str | None]] = []
        for i in range(50):  # each id twice, the repeat 3 items later; every 7th has no id
            msgs.append((f"m{i}".encode(), None if i % 7 == 0 else f"D{i}"))
            if i >= 3 and (i - 3) % 7:
                msgs.append((f"m{i - 3}".encode(), f"D{i - 3}"))
        r = await _batch(b, "T", msgs)
        assert r.code == ResponseCode.SUCCESS, r.remark
        ids = r.ext_fields["msgId"].split(",")
        assert len(ids) == len(msgs)
        first: dict[str, str] = {}
        for (_, d), msg_id in zip(msgs, ids, strict=True):
            if d is not None:
                assert first.setdefault(d, msg_id) == msg_id
        stored = [m[0] for i, m in enumerate(msgs) if m[1] is None or m[1] not in
                  {d for _, d in msgs[:i]}]  # fmt: skip
        assert _bodies(b, "T", 0) == stored
        assert b.c.store.dedup.duplicates == len(msgs) - len(stored)
        await b.stop()

    run(main())


def test_the_window_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        first = await b.send("T", b"one", queue_id=3, props={DEDUP: "id-1"})
        await _batch(b, "T", [(b"a", "A"), (b"b", "B")])
        await b.stop()
        b = await Broker(tmp_path).start()
        assert len(b.c.store.dedup) == 3
        again = await b.send("T", b"one", queue_id=0, props={DEDUP: "id-1"})
        assert _where(again) == _where(first)
        r = await _batch(b, "T", [(b"b", "B"), (b"c", "C")])
        assert _where(r)[:2] == (0, 2)
        assert _bodies(b, "T", 0) == [b"a", b"b", b"c"]
        assert _bodies(b, "T", 3) == [b"one"]
        await b.stop()

    run(main())


def test_sync_flush_answers_duplicates_too(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, store={"flush_disk_type": FlushDiskType.SYNC_FLUSH}).start()
        first = await _send(b, "T", b"one", "id-1")
        again = await _send(b, "T", b"one", "id-1")
        assert _where(again) == _where(first)
        r = await _batch(b, "T", [(b"one", "id-1"), (b"two", "id-2"), (b"two", "id-2")])
        assert _where(r)[:2] == (0, 1)
        assert _bodies(b, "T", 0) == [b"one", b"two"]
        assert b.c.stats.put_total == 2
        await b.stop()

    run(main())


def test_retry_topics_and_a_zero_window_store_every_copy(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path / "a").start()
        b.c.topics.create_in_send_back("%RETRY%G", 1, 6)
        for _ in range(2):
            await b.send("%RETRY%G", b"r", props={DEDUP: "id-r"})
        assert _bodies(b, "%RETRY%G", 0) == [b"r", b"r"]
        await b.stop()
        b = await Broker(tmp_path / "b", store={"dedup_window_size": 0}).start()
        for _ in range(2):
            await b.send("T", b"x", props={DEDUP: "id-x"})
        assert _bodies(b, "T", 0) == [b"x", b"x"]
        await b.stop()

    run(main())
