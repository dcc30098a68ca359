"""The compiled loops of the send pass (``_speedups.send_prepare_run`` / ``send_answer_run``,
``_speedups_sendrun.h``) against their references (``send_run.prepare_run_py`` /
``answer_run_py``: the pass's ``prepare`` and ``frame`` in a loop).

On the same requests and context both give the same ready sends (every ``MessageInner``
field equal and of the same type, the properties in the same order) and stop at the same
request; on the same put results the same answer frames, byte for byte, and the same sizes
per topic. The inputs are odd but legal: V1 and V2 headers, optional header fields missing,
header numbers the lenient reader takes ("+1", " 2"), properties and ids with non-ASCII text,
a topic of the maximal length, the broker's stamps given or not, the properties' final
separator missing, WAIT=false, an empty body, a failed put, a put of two records, negative
opaques and ids JSON must escape; with every kind the pass declines in between. A read of
them through a broker with the compiled loops writes the same bytes (answers) and CommitLog
as with the references. This file is in the Makefile's PURE_TESTS (there the twins are the
same code).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ariane.broker.processors import send_run
from ariane.common.message import HostPort
from ariane.common.properties import encode_properties
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import TOPIC_MAX_LENGTH
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import FLAG_ONEWAY, RemotingCommand, SerializeType
from ariane.store import PutResult, PutStatus
from tests.support.transport import RecordingTransport
from tests.unit.broker.harness import Broker, run
from tests.unit.broker.test_send_run import _commit_log, _frames

LONG = "L" * TOPIC_MAX_LENGTH
TOPICS = (("TA", "SINGLE_TAG"), ("TB", "MULTI_TAG"), (LONG, "SINGLE_TAG"))


def _request(b: Broker, topic: str, props: dict[str, str] | str | None, **kw: Any) -> Any:
    """A SEND request; ``kw``: ``v2`` (default True), ``queue`` (0), ``body``, ``drop``
    (header keys to remove), ``set`` (header values to replace, as strings)."""
    text = props if isinstance(props, str) or props is None else encode_properties(props)
    header = b.send_header(topic, 0, text or "")
    header.queue_id = kw.get("queue", 0)
    v2 = kw.get("v2", True)
    ext = header.to_v2().to_ext_fields() if v2 else header.to_ext_fields()
    if props is None:
        ext.pop("i" if v2 else "properties", None)
    for key in kw.get("drop", ()):
        ext.pop(key, None)
    ext.update(kw.get("set", {}))
    code = RequestCode.SEND_MESSAGE_V2 if v2 else RequestCode.SEND_MESSAGE
    request = RemotingCommand.request(code, ext, kw.get("body", b"payload"))
    request.flag |= kw.get("flag", 0)
    return request


def _requests(b: Broker) -> list[RemotingCommand]:
    u = 0

    def uniq() -> str:
        nonlocal u
        u += 1
        return f"U{u:04d}"

    out = [
        # each topic's first send of a run goes to the reference (the topic's check)
        _request(b, "TA", {"UNIQ_KEY": uniq(), "TAGS": "a"}),
        _request(b, "TB", {"UNIQ_KEY": uniq(), "TAGS": "a"}, queue=1),
        _request(b, LONG, {"UNIQ_KEY": uniq()}, queue=3),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "TAGS": "a"}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "KEYS": "k1 k2"}, v2=False, queue=3),
        # optional header fields missing (reconsume times, unit mode, batch, broker name...)
        _request(b, "TA", {"UNIQ_KEY": uniq()}, drop=("j", "k", "l", "m", "n")),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, v2=False, drop=("reconsumeTimes", "batch")),
        # non-ASCII properties and ids
        _request(b, "TB", {"UNIQ_KEY": uniq(), "KEYS": "ключ 键", "TAGS": "标签"}, queue=2),
        _request(b, "TA", {"UNIQ_KEY": "ü-ид-1", "TAGS": "x"}),
        _request(b, "TA", {"UNIQ_KEY": 'a"b\\c\x01', "TAGS": "x"}),
        _request(b, LONG, {"UNIQ_KEY": uniq()}, queue=1),
        # the broker's stamps given, one of them, the final separator missing
        _request(b, "TA", {"UNIQ_KEY": uniq(), "CLUSTER": "C2", "MSG_REGION": "R2"}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "CLUSTER": "C2"}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "MSG_REGION": "R2", "TRACE_ON": "false"}),
        _request(b, "TA", f"UNIQ_KEY\x01{uniq()}\x02KEYS\x01k"),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "WAIT": "false"}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "WAIT": "true"}, body=b""),
        # numbers the lenient reader takes (the compiled loop hands them to the reference)
        _request(b, "TA", {"UNIQ_KEY": uniq()}, set={"e": "+1", "g": " 12", "j": "2"}),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, set={"h": "-5", "f": "0", "m": "false"}),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, set={"k": "1", "l": "16", "m": "0"}),
        # declined: DELAY, dedup id, transactional sysFlag, timer, batch, no UNIQ_KEY, ...
        _request(b, "TA", {"UNIQ_KEY": uniq(), "DELAY": "3"}),
        _request(b, "TA", {"UNIQ_KEY": uniq()}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "__ARIANE_DEDUP": "d"}),
        _request(b, "TA", {"UNIQ_KEY": uniq()}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "TRAN_MSG": "true"}, set={"f": "4"}),
        _request(b, "TA", {"UNIQ_KEY": uniq(), "TIMER_DELAY_SEC": "3"}),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, set={"m": "true"}),
        _request(b, "TA", {"KEYS": "no-uniq"}),
        _request(b, "TA", ""),
        _request(b, "TA", None),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, queue=4),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, queue=-1),
        _request(b, "TNotThere", {"UNIQ_KEY": uniq()}),
        _request(b, "%RETRY%G", {"UNIQ_KEY": uniq()}),
        _request(b, "TA", {"UNIQ_KEY": uniq()}, drop=("a",)),  # a required field missing
        _request(b, "TA", {"UNIQ_KEY": uniq()}, set={"e": "x"}),  # a field that does not parse
        _request(b, "TA", {"UNIQ_KEY": uniq()}, flag=FLAG_ONEWAY),
        _request(b, "TA", {"UNIQ_KEY": uniq()}),
    ]
    rocketmq = _request(b, "TA", {"UNIQ_KEY": uniq()})
    rocketmq.serialize_type = SerializeType.ROCKETMQ
    out.append(rocketmq)
    out.append(_request(b, "TA", {"UNIQ_KEY": uniq()}))
    for i, request in enumerate(out):
        request.opaque = -3 + i * 7919
    return out


def _inner_view(inner: Any) -> tuple[Any, ...]:
    names = [s.__name__ for s in send_run._INNER_SLOTS]
    values = tuple(getattr(inner, n) for n in names)
    return (
        values,
        tuple(type(v) for v in values),
        list(inner.properties.items()),
    )


def _prepare_all(fn: Any, ctx: tuple[Any, ...], requests: list[RemotingCommand]) -> list[Any]:
    """Every stop of ``fn`` over ``requests`` (resuming after each declined request)."""
    stops: list[Any] = []
    i = 0
    while i < len(requests):
        out: list[Any] = []
        end = fn(ctx, requests, i, out)
        stops.append((i, end, [(_inner_view(o[0]), o[1:], tuple(type(x) for x in o)) for o in out]))
        i = end + 1
    return stops


def _counting_ctx(run_proc: Any, born: HostPort) -> tuple[tuple[Any, ...], list[Any]]:
    """``run_proc``'s prepare context for ``born`` with its reference prepare (slot 1) wrapped
    to record every request handed to it; returns the context and that record."""
    ctx = list(run_proc._prepare_ctx(born))
    reference_prepare, calls = ctx[1], []

    def counting(request: Any) -> Any:
        calls.append(request)
        return reference_prepare(request)

    ctx[1] = counting
    return tuple(ctx), calls


async def _broker(root: Path) -> Broker:
    b = await Broker(root).start()
    for name, filter_type in TOPICS:
        b.c.topics.put(TopicConfig(name, 4, 4, PERM_READ | PERM_WRITE, filter_type))
    return b


def test_prepare_run_gives_the_references_ready_sends(tmp_path: Path) -> None:
    async def main() -> None:
        b = await _broker(tmp_path)
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        requests = _requests(b)
        born = HostPort(b"\x0a\x00\x00\x07", 40123)
        ctx, calls = _counting_ctx(run_proc, born)
        compiled = _prepare_all(send_run.prepare_run, ctx, requests)
        reference = _prepare_all(send_run.prepare_run_py, run_proc._prepare_ctx(born), requests)
        assert compiled == reference
        if send_run.prepare_run is not send_run.prepare_run_py:
            # the odd but plain sends took the compiled path; to the reference went only the
            # three topics' first sends, the lenient numbers, a header that does not parse, one
            # without a required field, and the topics the pass never takes
            assert len(calls) == 8
        accepted = sum(len(stop[2]) for stop in reference)
        assert accepted >= 17  # both kinds, interleaved
        assert len(reference) > 15
        await b.stop()

    run(main())


def test_plain_requests_make_no_python_call(tmp_path: Path) -> None:
    """Past a run's first request of a topic, plain sends never reach the reference."""

    async def main() -> None:
        b = await _broker(tmp_path)
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        requests = [_request(b, "TA", {"UNIQ_KEY": f"U{i}", "TAGS": "t"}) for i in range(50)]
        ctx, calls = _counting_ctx(run_proc, HostPort(b"\x7f\x00\x00\x01", 1))
        out: list[Any] = []
        assert send_run.prepare_run(ctx, requests, 0, out) == 50
        assert len(out) == 50
        assert len(calls) == (50 if send_run.prepare_run is send_run.prepare_run_py else 1)
        await b.stop()

    run(main())


def _results() -> list[PutResult]:
    ok = PutStatus.PUT_OK
    out = []
    for i in range(12):
        phys = (i * 1_234_567) << (i * 3)
        out.append(PutResult(ok, phys, 1100 + i, 1, 7 * i, 1, offsets=(phys,)))
    out[4] = PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, remark="disk full")  # a failed put
    out[7] = PutResult(ok, 10, 2000, 1, 3, 2, offsets=(10, 1010))  # two records: not a single
    out[9] = PutResult(PutStatus.FLUSH_DISK_TIMEOUT, 99, 1000, 1, 5, 1, offsets=(99,))
    return out


def _answer_all(fn: Any, ctx: tuple[Any, ...], requests: list[Any], ready: list[Any]) -> Any:
    results = _results()
    frames: list[bytes] = []
    sizes: dict[str, list[int]] = {}
    stops = []
    i = 0
    while i < len(results):
        i = fn(ctx, requests, ready, results, i, frames, sizes)
        stops.append((i, len(frames)))
        i += 1
    return stops, frames, sizes


@pytest.mark.parametrize("region", ["DefaultRegion", 'r"é%s'])
def test_answer_run_gives_the_references_frames(tmp_path: Path, region: str) -> None:
    async def main() -> None:
        b = await Broker(tmp_path, region_id=region).start()
        run_proc = b.c.send_processor.run
        assert run_proc is not None
        uniqs = ["AB12", "ü-1", 'a"b', "", "0", "x" * 300, "A-B", "Z9", "é", "q", "w", "e"]
        topics = ["TA", "TB", LONG, "TA", "TB", "TA", "TA", "TB", "TA", "TA", LONG, "TB"]
        opaques = [0, -1, 2**31 - 1, -(2**31), 5, 6, 7, 8, 9, 10, 11, 12]
        requests = []
        for opaque in opaques:
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, b"")
            request.opaque = opaque
            requests.append(request)
        ready = [
            (None, t, q % 4, u, True) for q, (t, u) in enumerate(zip(topics, uniqs, strict=True))
        ]
        ctx = run_proc._answer_ctx()
        compiled = _answer_all(send_run.answer_run, ctx, requests, ready)
        reference = _answer_all(send_run.answer_run_py, ctx, requests, ready)
        assert compiled == reference
        stops, frames, sizes = reference
        assert [s[0] for s in stops] == [4, 7, 9, 12]  # stopped at each other result
        assert len(frames) == 9
        assert list(sizes) == ["TA", "TB", LONG]
        for frame in frames:  # each frame is one whole SUCCESS answer
            (answer,) = FrameDecoder().feed(frame)
            assert answer.code == 0
            assert answer.ext_fields["MSG_REGION"] == region
        await b.stop()

    run(main())


async def _drive(root: Path, requests: list[RemotingCommand]) -> tuple[bytes, bytes, int]:
    b = await _broker(root)
    channel = Channel(b.c.remoting.dispatcher)
    transport = RecordingTransport(("127.0.0.1", 50000))
    channel.connection_made(transport)  # type: ignore[arg-type]
    channel.data_received(b"".join(encode(r) for r in requests))
    b.c.store.wait_dispatched()
    run_proc = b.c.send_processor.run
    assert run_proc is not None
    out = (transport.data, _commit_log(b), run_proc.handled)
    await b.stop()
    return out


def test_a_read_through_the_compiled_loops_writes_the_references_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        builder = await _broker(tmp_path / "build")
        # not the sends the broker answers at random (a queue picked for queue id -1, a
        # UNIQ_KEY made for a send without one): both brokers must see the same
        requests = [
            r
            for r in _requests(builder) + _requests(builder)
            if r.ext_fields.get("e", r.ext_fields.get("queueId")) != "-1"
            and "UNIQ_KEY" in (r.ext_fields.get("i", r.ext_fields.get("properties")) or "")
        ]
        for i, request in enumerate(requests):
            request.opaque = i + 1
        await builder.stop()
        compiled = await _drive(tmp_path / "compiled", requests)
        monkeypatch.setattr(send_run, "prepare_run", send_run.prepare_run_py)
        monkeypatch.setattr(send_run, "answer_run", send_run.answer_run_py)
        reference = await _drive(tmp_path / "reference", requests)
        assert compiled[0] == reference[0]  # every answer, byte for byte
        assert compiled[1] == reference[1]  # every record
        assert compiled[2] == reference[2] > 30
        answered = _frames(compiled[0])
        oneway = sum(1 for r in requests if r.flag & FLAG_ONEWAY)
        assert len(answered) == len(requests) - oneway

    run(main())
