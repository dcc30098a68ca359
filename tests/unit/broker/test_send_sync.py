"""SYNC_FLUSH single sends answered in bulk on the loop (``processors.send_sync``), on a real
store through the dispatcher (no sockets), and ``LoopAnswers`` / ``SyncSend`` alone."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from ariane.broker.processors.send_sync import LoopAnswers, SyncSend
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import encode_properties
from ariane.common.record import decode_records
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import FlushDiskType
from tests.unit.broker.harness import Broker, FakeChannel, run

N = 60


def test_pipelined_sync_sends_every_answer_offset_and_body(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, store={"flush_disk_type": FlushDiskType.SYNC_FLUSH}).start()
        ch = FakeChannel()
        requests = []
        for i in range(N):
            props = {"UNIQ_KEY": f"U{i:04d}"}
            if i % 5 == 4:
                props["WAIT"] = "false"  # completed at once: answered by the processor
            header = b.send_header("S", i % 4, encode_properties(props)).to_v2()
            request = RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), f"body-{i}".encode()
            )
            requests.append(request)
            b.c.remoting.dispatcher.handle_request(ch, request)  # type: ignore[arg-type]
        for _ in range(5000):
            if len(ch.sent) == N:
                break
            await asyncio.sleep(0.001)
        assert len(ch.sent) == N
        by_opaque = {r.opaque: r for r in ch.sent}
        assert sorted(by_opaque) == sorted(r.opaque for r in requests)
        next_offset = [0, 0, 0, 0]
        for i, request in enumerate(requests):
            answer = by_opaque[request.opaque]
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            hdr = h.SendMessageResponseHeader.from_ext_fields(answer.ext_fields)
            assert hdr.queue_id == i % 4
            assert hdr.queue_offset == next_offset[i % 4]  # in sending order per queue
            next_offset[i % 4] += 1
            assert hdr.transaction_id == f"U{i:04d}"
            record = b.c.store.look_message_by_offset(decode_offset_msg_id(hdr.msg_id).phys_offset)
            assert record is not None
            (msg,) = decode_records(record)
            assert (msg.body, msg.queue_id, msg.queue_offset) == (
                f"body-{i}".encode(), i % 4, hdr.queue_offset,
            )  # fmt: skip
        assert b.c.store.commit_log.flushed_where >= b.c.store.commit_log.max_offset
        await b.stop()

    run(main())


def test_loop_answers_from_another_thread_in_order_once() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        answered: list[int] = []
        drains: list[int] = []
        answers = LoopAnswers(loop, lambda send: answered.append(send.queue_id))
        original = answers._drain

        def counted() -> None:
            drains.append(len(answers._queue))
            original()

        answers._drain = counted  # type: ignore[method-assign]
        sends = [SyncSend(answers, None, "T", i, None) for i in range(100)]  # type: ignore[arg-type]
        for send in sends:
            send.submitting = False
        results = [object() for _ in sends]

        def complete() -> None:  # the group commit: one round for all of them
            for send, result in zip(sends, results, strict=True):
                assert not send.done()
                send.set_result(result)  # type: ignore[arg-type]

        thread = threading.Thread(target=complete)
        thread.start()
        thread.join()
        for _ in range(1000):
            if len(answered) == 100:
                break
            await asyncio.sleep(0.001)
        assert answered == list(range(100))
        assert drains == [100]  # one drain for the round
        assert all(s.done() and s.result is r for s, r in zip(sends, results, strict=True))
        assert not any(s.at_once for s in sends)

    asyncio.run(main())


def test_sync_send_completed_on_the_loop() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        answered: list[int] = []
        answers = LoopAnswers(loop, lambda send: answered.append(send.queue_id))
        now = SyncSend(answers, None, "T", 1, None)  # type: ignore[arg-type]
        now.set_result(object())  # type: ignore[arg-type]  # inside the put call
        assert now.at_once
        assert now.done()
        later = SyncSend(answers, None, "T", 2, None)  # type: ignore[arg-type]
        later.submitting = False
        later.set_result(object())  # type: ignore[arg-type]  # on the loop, after the put call
        assert not later.at_once
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert answered == [2]

    asyncio.run(main())
