"""A read's single sends handled in one pass (``processors.send_run``, ``store.put_run``):
the same answers, records and statistics as one request at a time.

Two brokers on real stores (tiny CommitLog files, a manual clock: every timestamp is the
same in both) get the same reads through a real ``Channel`` on a recording transport (no
sockets); the reference has a hook without ``ignores``, which turns the pass off there. The
reads mix plain sends with every kind the pass declines (DELAY, dedup id, an illegal queue, a
topic created by its first send, a batch, a one-way request, properties not ending in the
separator), so declined requests sit between accepted ones in one read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ariane.broker.processors import send_run
from ariane.broker.processors.send_sync import SyncRun
from ariane.broker.stats import TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from ariane.common.batch import encode_batch
from ariane.common.properties import decode_properties, encode_properties
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.remoting.channel import Channel
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import FLAG_ONEWAY, RemotingCommand
from ariane.store import FlushDiskType, PutResult, PutStatus
from ariane.store.put_run import RunCompletion
from tests.support.transport import RecordingTransport
from tests.unit.broker.harness import Broker, run


class _Observer:
    """A hook that looks at every request: no runs while it is installed."""

    def before_request(self, channel: object, request: RemotingCommand) -> None:
        return None

    def after_response(self, channel: object, request: RemotingCommand, response: object) -> None:
        pass


def _send(
    b: Broker, topic: str, queue_id: int, props: dict[str, str] | str, body: bytes, *, v2: bool
) -> RemotingCommand:
    text = props if isinstance(props, str) else encode_properties(props)
    header = b.send_header(topic, queue_id, text)
    if v2:
        return RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_v2().to_ext_fields(), body
        )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), body)


def _reads(b: Broker) -> list[list[RemotingCommand]]:
    """Four reads; opaques are set by the caller (the same in both brokers)."""
    reads: list[list[RemotingCommand]] = []
    n = 0
    for r in range(4):
        read = []
        for i in range(40):
            n += 1
            props: dict[str, str] | str = {"UNIQ_KEY": f"U{n:05d}", "TAGS": f"t{i % 3}"}
            topic, queue_id = ("TA", i % 4) if i % 3 else ("TB", i % 2)
            kind = (r * 40 + i) % 23
            if kind == 5:
                props = {"UNIQ_KEY": f"U{n:05d}", "DELAY": "2"}
            elif kind == 7:
                props = {"UNIQ_KEY": f"U{n:05d}", "__ARIANE_DEDUP": f"D{n}"}
            elif kind == 9:
                queue_id = 99  # illegal: INVALID_PARAMETER
            elif kind == 11:
                topic = f"TNew{r}"  # auto-created by this send, then taken by the pass
            elif kind == 13:
                props = f"UNIQ_KEY\x01U{n:05d}\x02KEYS\x01k{n}"  # no final separator
            elif kind == 15:
                props = {"UNIQ_KEY": f"U{n:05d}", "WAIT": "false", "KEYS": f"k{n} j{n}"}
            elif kind == 17:
                props = {"UNIQ_KEY": f"U{n:05d}", "CLUSTER": "Other", "MSG_REGION": "R"}
            body = bytes([65 + n % 26]) * (700 + 97 * (n % 31))
            request = _send(b, topic, queue_id, props, body, v2=bool(i % 4))
            if kind == 19:
                request.flag |= FLAG_ONEWAY  # never answered
            read.append(request)
            if kind == 21:
                batch = b.send_header("TA", 1, batch=True).to_v2()
                data = encode_batch((bytes(30), 0, {"UNIQ_KEY": f"B{n}-{k}"}) for k in range(3))
                read.append(
                    RemotingCommand.request(
                        RequestCode.SEND_BATCH_MESSAGE, batch.to_ext_fields(), data
                    )
                )
        reads.append(read)
    return reads


def _frames(data: bytes) -> dict[int, bytes]:
    """Every frame of ``data`` by its opaque."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        frame = bytes(data[pos : pos + 4 + length])
        (cmd,) = FrameDecoder().feed(frame)
        assert cmd.opaque not in out
        out[cmd.opaque] = frame
        pos += 4 + length
    return out


def _commit_log(b: Broker) -> bytes:
    """The CommitLog's bytes up to its end (the allocation thread may or may not have made
    the next, empty file yet, and may be renaming its ``.new`` file meanwhile: only the
    CommitLog's own 20-digit names are read)."""
    files = sorted(
        f
        for f in Path(b.c.store.config.commit_log_dir).iterdir()
        if len(f.name) == 20 and f.name.isdigit()
    )
    assert files[0].name == "0" * 20
    return b"".join(f.read_bytes() for f in files)[: b.c.store.commit_log.max_offset]


async def _drive(root: Path, *, reference: bool, store: dict[str, Any]) -> dict[str, Any]:
    b = await Broker(root, store=store).start()
    if reference:
        b.c.remoting.dispatcher.register_hook(_Observer())
    for name, filter_type in (("TA", "SINGLE_TAG"), ("TB", "MULTI_TAG")):
        b.c.topics.put(TopicConfig(name, 4, 4, PERM_READ | PERM_WRITE, filter_type))
    channel = Channel(b.c.remoting.dispatcher)
    transport = RecordingTransport(("127.0.0.1", 50000))
    channel.connection_made(transport)  # type: ignore[arg-type]
    opaque = 1000
    expected = 0
    for read in _reads(b):
        chunks = []
        for request in read:
            opaque += 1
            request.opaque = opaque
            expected += 0 if request.flag & FLAG_ONEWAY else 1
            chunks.append(encode(request))
        channel.data_received(b"".join(chunks))
    for _ in range(10_000):  # SYNC_FLUSH answers follow the group commit
        if len(_frames(transport.data)) == expected:
            break
        await asyncio.sleep(0.001)
    b.c.store.wait_dispatched()
    stats = b.c.stats
    counters = {name: sorted(stats.sets[name].items()) for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE)}
    hists = {t: (list(x.counts), x.sum, x.count) for t, x in stats.message_size.items()}
    run_proc = b.c.send_processor.run
    out = {
        "bytes": transport.data,
        "frames": _frames(transport.data),
        "expected": expected,
        "log": _commit_log(b),
        "stats": (counters, hists, stats.put_total),
        "failed": b.c.store.put_failed_times,
        "handled": 0 if run_proc is None else run_proc.handled,
    }
    await b.stop()
    return out


def test_async_runs_answer_and_store_as_one_at_a_time(tmp_path: Path) -> None:
    async def main() -> None:
        fast = await _drive(tmp_path / "fast", reference=False, store={})
        ref = await _drive(tmp_path / "ref", reference=True, store={})
        assert ref["handled"] == 0
        assert fast["handled"] > 100  # most of the 160 sends took the pass
        assert len(fast["frames"]) == fast["expected"] == ref["expected"]
        assert fast["bytes"] == ref["bytes"]  # every answer, byte for byte, in the same order
        assert fast["log"] == ref["log"]  # every record (several CommitLog files)
        assert len(fast["log"]) > 3 * 64 * 1024
        assert fast["stats"] == ref["stats"]
        assert fast["failed"] == ref["failed"]

    run(main())


def test_sync_flush_runs_answer_and_store_as_one_at_a_time(tmp_path: Path) -> None:
    async def main() -> None:
        store = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}
        fast = await _drive(tmp_path / "fast", reference=False, store=store)
        ref = await _drive(tmp_path / "ref", reference=True, store=store)
        assert ref["handled"] == 0
        assert fast["handled"] > 100
        assert len(fast["frames"]) == fast["expected"] == ref["expected"]
        # answers leave per group-commit round: compare them request by request
        assert fast["frames"] == ref["frames"]
        assert fast["log"] == ref["log"]
        assert fast["stats"] == ref["stats"]

    run(main())


def test_pass_answers_parse_as_send_answers(tmp_path: Path) -> None:
    async def main() -> None:
        fast = await _drive(tmp_path / "fast", reference=False, store={})
        answers = FrameDecoder().feed(fast["bytes"])
        ok = [a for a in answers if a.code == 0 and "," not in a.ext_fields["msgId"]]
        assert len(ok) > 100
        for a in ok:
            hdr = h.SendMessageResponseHeader.from_ext_fields(a.ext_fields)
            assert hdr.transaction_id is not None
            assert hdr.transaction_id.startswith("U")

    run(main())


class _Done:
    def __init__(self, log: list[tuple[int, str]], n: int) -> None:
        self.log, self.n = log, n

    def done(self) -> bool:
        return False

    def set_result(self, result: PutResult) -> None:
        self.log.append((self.n, result.status.name))


def test_run_completion_gives_each_its_result_and_a_timeout_to_all() -> None:
    for status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
        log: list[tuple[int, str]] = []
        own = [PutResult(PutStatus.PUT_OK, i * 10, 10) for i in range(3)]
        run_done = RunCompletion([(r, _Done(log, i)) for i, r in enumerate(own)])
        assert not run_done.done()
        run_done.set_result(PutResult(status, 20, 10))
        assert run_done.done()
        assert log == [(i, status.name) for i in range(3)]
        assert all(r.status is status for r in own)


def test_sync_flush_run_waits_with_one_group_commit_request(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, store={"flush_disk_type": FlushDiskType.SYNC_FLUSH}).start()
        b.c.topics.put(TopicConfig("TA", 4, 4, PERM_READ | PERM_WRITE))
        gc = b.c.store.group_commit
        assert gc is not None
        requests: list[int] = []
        original = gc.put_request

        def counted(next_offset: int, future: Any, result: PutResult) -> None:
            requests.append(next_offset)
            original(next_offset, future, result)

        gc.put_request = counted  # type: ignore[method-assign]
        channel = Channel(b.c.remoting.dispatcher)
        transport = RecordingTransport(("127.0.0.1", 50000))
        channel.connection_made(transport)  # type: ignore[arg-type]
        sends = [
            _send(b, "TA", i % 4, {"UNIQ_KEY": f"U{i}"}, b"x" * 100, v2=True) for i in range(50)
        ]
        channel.data_received(b"".join(encode(r) for r in sends))
        for _ in range(10_000):
            if len(_frames(transport.data)) == 50:
                break
            await asyncio.sleep(0.001)
        answers = FrameDecoder().feed(transport.data)
        assert sorted(a.opaque for a in answers) == sorted(r.opaque for r in sends)
        assert all(a.code == 0 for a in answers)
        assert len(requests) == 1  # the whole run: one request, for the end of its last record
        assert requests[0] == b.c.store.commit_log.max_offset
        await b.stop()

    run(main())


def test_a_request_the_pass_cannot_read_goes_the_per_request_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = decode_properties

    def fussy(text: str) -> dict[str, str]:
        if "BOOM" in text:
            raise ValueError("cannot read")
        return real(text)

    monkeypatch.setattr(send_run, "decode_properties", fussy)
    # the reference loop (the compiled one hands a request it cannot read to the same prepare)
    monkeypatch.setattr(send_run, "prepare_run", send_run.prepare_run_py)

    async def main() -> None:
        b = await Broker(tmp_path).start()
        b.c.topics.put(TopicConfig("TA", 4, 4, PERM_READ | PERM_WRITE))
        channel = Channel(b.c.remoting.dispatcher)
        transport = RecordingTransport(("127.0.0.1", 50000))
        channel.connection_made(transport)  # type: ignore[arg-type]
        props = [{"UNIQ_KEY": "U1"}, {"UNIQ_KEY": "U2", "K": "BOOM"}, {"UNIQ_KEY": "U3"}]
        sends = [_send(b, "TA", 0, p, b"x", v2=True) for p in props]
        channel.data_received(b"".join(encode(r) for r in sends))
        answers = FrameDecoder().feed(transport.data)
        assert [a.opaque for a in answers] == [r.opaque for r in sends]
        assert [a.code for a in answers] == [0, 0, 0]
        assert [a.ext_fields["queueOffset"] for a in answers] == ["0", "1", "2"]
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        assert run_proc.handled == 2
        await b.stop()

    run(main())


def _mixed_read(b: Broker) -> list[RemotingCommand]:
    """One read of 30 plain sends to TA with, in between, two whose put fails (properties
    over the store's limit: answered at once) and one ``WAIT=false`` (answered at once)."""
    read = []
    for i in range(30):
        props = {"UNIQ_KEY": f"M{i:03d}", "TAGS": f"t{i % 3}"}
        if i in (7, 19):
            props["BIG"] = "x" * 40_000  # PROPERTIES_SIZE_EXCEEDED
        elif i == 13:
            props["WAIT"] = "false"
        request = _send(b, "TA", i % 4, props, bytes([65 + i]) * (300 + 41 * i), v2=bool(i % 3))
        request.opaque = 5000 + i
        read.append(request)
    return read


async def _drive_mixed(
    root: Path, *, reference: bool, never_flushed: bool
) -> tuple[dict[int, bytes], list[int], Any]:
    """The answers of :func:`_mixed_read` by opaque, and the number of frames of each
    ``send_frames`` call; ``never_flushed``: the group commit never gets the log durable (its
    requests time out after 200 ms)."""
    store: dict[str, Any] = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}
    if never_flushed:
        store["sync_flush_timeout_ms"] = 200
    b = await Broker(root, store=store).start()
    if reference:
        b.c.remoting.dispatcher.register_hook(_Observer())
    b.c.topics.put(TopicConfig("TA", 4, 4, PERM_READ | PERM_WRITE, "SINGLE_TAG"))
    channel = Channel(b.c.remoting.dispatcher)
    transport = RecordingTransport(("127.0.0.1", 50000))
    channel.connection_made(transport)  # type: ignore[arg-type]
    writes: list[int] = []
    send_frames = channel.send_frames

    def counted(frames: list[bytes]) -> None:
        writes.append(len(frames))
        send_frames(frames)

    channel.send_frames = counted  # type: ignore[method-assign]
    log = b.c.store.commit_log
    flush = log.flush
    if never_flushed:
        log.flush = lambda least_pages: True  # type: ignore[method-assign]
    read = _mixed_read(b)
    channel.data_received(b"".join(encode(r) for r in read))
    for _ in range(10_000):
        if len(_frames(transport.data)) == len(read):
            break
        await asyncio.sleep(0.001)
    log.flush = flush  # type: ignore[method-assign]
    stats = b.c.stats
    counters = {name: sorted(stats.sets[name].items()) for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE)}
    run_proc = b.c.send_processor.run
    handled = 0 if run_proc is None else run_proc.handled
    await b.stop()
    return _frames(transport.data), writes, (counters, stats.put_total, handled)


@pytest.mark.parametrize("timeout", [False, True], ids=["flushed", "timed-out"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "reference"])
def test_sync_flush_run_is_answered_in_one_write_as_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: bool, compiled: bool
) -> None:
    """A SYNC_FLUSH run's sends that waited are answered together when the group commit
    completes them: one write of their frames, byte for byte the per-request path's answers
    (SUCCESS, or FLUSH_DISK_TIMEOUT for each when the request timed out), with the failed puts
    and the WAIT=false send in between answered at once, as that path answers them."""
    if not compiled:
        monkeypatch.setattr(send_run, "answer_run", send_run.answer_run_py)
    elif send_run.answer_run is send_run.answer_run_py:
        pytest.skip("pure build: no compiled answer_run")

    async def main() -> None:
        fast, writes, fast_stats = await _drive_mixed(
            tmp_path / "fast", reference=False, never_flushed=timeout
        )
        ref, _writes, ref_stats = await _drive_mixed(
            tmp_path / "ref", reference=True, never_flushed=timeout
        )
        assert sorted(fast) == [5000 + i for i in range(30)]
        assert fast == ref  # every answer, byte for byte
        assert fast_stats[:2] == ref_stats[:2]
        assert fast_stats[2] == 30  # all taken by the pass
        assert ref_stats[2] == 0
        codes = {o: FrameDecoder().feed(f)[0].code for o, f in fast.items()}
        waited = 10 if timeout else 0  # FLUSH_DISK_TIMEOUT
        assert sorted(o - 5000 for o, c in codes.items() if c == 13) == [7, 19]  # MESSAGE_ILLEGAL
        assert sorted(o - 5000 for o, c in codes.items() if c == waited and o != 5013) == [
            i for i in range(30) if i not in (7, 19, 13)
        ]
        assert codes[5013] == 0
        # the 27 that waited: one write (SUCCESS frames); the WAIT=false one before them
        assert writes == ([1] if timeout else [1, 27])

    run(main())


def test_sync_run_gives_a_timeout_to_each_and_is_queued_once() -> None:
    class Answers:
        def __init__(self) -> None:
            self.queued: list[object] = []

        def add(self, item: object) -> None:
            self.queued.append(item)

    for status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
        answers = Answers()
        own = [PutResult(PutStatus.PUT_OK, i * 10, 10) for i in range(3)]
        sync_run = SyncRun(answers, None, [], [], own)  # type: ignore[arg-type]
        assert not sync_run.done()
        sync_run.set_result(PutResult(status, 20, 10))
        assert sync_run.done()
        assert answers.queued == [sync_run]
        assert all(r.status is status for r in own)
