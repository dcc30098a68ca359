"""A pulled list's SubBefore values captured once (``hook_capture``), each delivery stamping
its start and ending its captured entry (``hook_end``), chunks never delivered cancelled: the
compiled hooks and buffer (``_speedups_tracehook.h``) against their pure twins
(``hook_capture_py``, ``hook_end_py``, ``EntryBufferPy``); the records of a captured-then-consumed
list against today's per-delivery hooks (``hook_before`` / ``hook_after``), byte for byte; and
the coroutine consume service around them (retry topics, dropped queues, ``stop``, a worker
round in the middle of a delivery)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.client import ConsumeConcurrentlyStatus, MessageQueue
from ariane.client._consume import ConcurrentConsumeService, reset_retry_topic
from ariane.client._process_queue import ProcessQueue
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client._trace_records import (
    EntryBufferPy,
    hook_after_py,
    hook_before_py,
    hook_capture_py,
    hook_end_py,
)
from ariane.common import native
from ariane.common.properties import KEYS, MSG_REGION, RETRY_TOPIC, TRACE_SWITCH, UNIQ_KEY
from ariane.common.trace import DEFAULT_REGION_ID, ConsumeReturnType, decode_trace_data
from tests.support.native import compiled
from tests.support.trace import StepClock, consume_dispatcher
from tests.unit.client.fakes import consumed_message

SUCCESS = ConsumeReturnType.SUCCESS
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
MQ = MessageQueue("T", "b", 0)


Twin = tuple[Callable[..., Any], Callable[..., Any], Callable[[], Any]]


def _twins() -> list[Twin]:
    """The pure capture, end and buffer, then the compiled ones when built."""
    out: list[Twin] = [(hook_capture_py, hook_end_py, EntryBufferPy)]
    if not native.PURE_REQUESTED:
        out.append(
            (compiled("trace_hook_capture"), compiled("trace_hook_end"), compiled("trace_entries"))
        )
    return out


class _World:
    """An unstarted dispatcher, its tracer with the twin's buffer, a clock, a counter and the
    wake-ups; ``capture`` / ``end`` call one twin with the tracer's bound values."""

    def __init__(self, twin: Twin, **settings: Any) -> None:
        self._capture, self._end, entries = twin
        self.dispatcher = consume_dispatcher(**settings)
        self.tracer = ConsumeTracer(self.dispatcher, "cg")
        self.entries = self.tracer.entries = entries()
        self.dispatcher.attach_entries(
            self.entries, functools.partial(self.entries.take, "cg", "PFX", 900, 120)
        )
        self.clock = StepClock()
        self.counter = itertools.count(41)
        self.wakes = 0
        self.dispatcher._notify = self._notify  # type: ignore[method-assign]

    def _notify(self) -> None:
        self.wakes += 1

    def capture(self, chunks: Any) -> Any:
        return self._capture(
            self.tracer,
            self.tracer.trace_topic,
            self.counter,
            DEFAULT_REGION_ID,
            self.entries,
            chunks,
        )

    def end(self, handle: Any, count: int, began: Any) -> Any:
        return self._end(
            self.tracer,
            self.clock,
            self.dispatcher.stats,
            self.entries,
            self.dispatcher,
            self.dispatcher._queue,
            vars(self.dispatcher),
            handle,
            count,
            began,
        )

    def take(self) -> list[Any]:
        assert self.dispatcher._take_entries is not None
        return self.dispatcher._take_entries()

    def state(self) -> dict[str, Any]:
        return {
            "pending": len(self.entries),
            "captured": self.entries.captured(),
            "stats": dataclasses.asdict(self.dispatcher.stats),
            "wake_at": self.dispatcher._wake_at,
            "wakes": self.wakes,
            "clock": self.clock.calls,
            "counter": next(self.counter),
        }


def _scenario(
    script: Callable[[_World], list[Any]], caplog: pytest.LogCaptureFixture, **settings: Any
) -> list[Any]:
    """Run ``script`` with the pure twins, then the compiled ones: the same answers, state,
    records and log. The pure run's answers."""
    seen = []
    for twin in _twins():
        caplog.clear()
        world = _World(twin, **settings)
        with caplog.at_level(logging.WARNING):
            answers = script(world)
            records = world.take()
        logged = [
            (r.getMessage().replace(world.dispatcher.group, "G"), bool(r.exc_info))
            for r in caplog.records
        ]
        seen.append((answers, world.state(), records, logged))
    assert all(other == seen[0] for other in seen[1:]), seen
    return seen[0][0]  # type: ignore[no-any-return]


def _msg(n: int, **props: str) -> Any:
    return consumed_message("T", {UNIQ_KEY: f"ID{n}", **props}, retries=n % 3)


def _usual_batch() -> list[list[Any]]:
    return [
        [_msg(0, **{KEYS: "k0"})],
        [_msg(1, **{TRACE_SWITCH: "false"})],  # the storing broker said TRACE_ON=false
        [consumed_message(TRACE_TOPIC, {UNIQ_KEY: "x"})],  # the trace producer's own
        [_msg(3, **{MSG_REGION: "R9"})],
        [_msg(4), _msg(5)],  # several messages: the per-delivery path
        [consumed_message("T", {UNIQ_KEY: 7})],  # not a str: the per-delivery path
        [consumed_message("T", {})],  # no UNIQ_KEY: the offset msgId
    ]


def _kind(x: Any) -> Any:
    return "handle" if x.__class__ is int else x


def test_capture_answers_per_chunk_and_takes_nothing_before_the_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(w: _World) -> list[Any]:
        handles = w.capture(_usual_batch())
        out: list[Any] = [[_kind(h) for h in handles], w.state(), w.take()]
        for h in handles:  # delivered in order: stamp, then the end
            if h.__class__ is int:
                w.end(h, 1, w.clock())
        out.append(w.state())
        return out

    answers = _scenario(script, caplog)
    assert answers[0] == [
        "handle",
        None,
        None,
        "handle",
        NotImplemented,
        NotImplemented,
        "handle",
    ]
    assert answers[1]["pending"] == 0
    assert answers[1]["captured"] == 3
    assert answers[1]["stats"]["appended"] == 0
    assert answers[1]["clock"] == 0
    assert answers[2] == []  # nothing written before a delivery
    assert answers[3]["pending"] == 3
    assert answers[3]["captured"] == 0
    assert answers[3]["stats"]["appended"] == 6  # two records each
    assert answers[3]["wakes"] == 1  # the first of the round


def test_a_round_mid_delivery_writes_only_the_delivered(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        handles = w.capture([[_msg(i)] for i in range(4)])
        began = w.clock()
        w.end(handles[0], 1, began)
        began = w.clock()  # the second delivery started, not ended
        first = w.take()
        w.end(handles[1], 1, began)
        return [first, w.state(), w.take(), w.state()]

    first, mid, second, last = _scenario(script, caplog)
    texts = "".join(item[1] for item in first)
    assert texts.count("SubBefore") == 1
    assert texts.count("SubAfter") == 1
    assert "ID0" in texts
    assert "ID1" not in texts
    assert "ID2" not in texts
    assert mid["captured"] == 2
    assert mid["pending"] == 1
    texts = "".join(item[1] for item in second)
    assert texts.count("SubBefore") == 1
    assert "ID1" in texts
    assert "ID2" not in texts
    assert last["captured"] == 2
    assert last["pending"] == 0


def test_ends_out_of_order_write_each_once(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        handles = w.capture([[_msg(i)] for i in range(4)])
        stamps = [w.clock() for _ in handles]  # all started (several workers)
        out = []
        for i in (2, 0, 3, 1):  # they end in another order than they were captured
            w.end(handles[i], 1, stamps[i])
            out.append(["".join(item[1] for item in w.take()), w.entries.captured()])
        return out

    out = _scenario(script, caplog)
    for (text, captured), i, left in zip(out, (2, 0, 3, 1), (3, 2, 1, 0), strict=True):
        assert text.count("SubBefore") == text.count("SubAfter") == 1
        assert f"ID{i}" in text
        assert captured == left


def test_cancel_full_closed_unknown_and_failures(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        handles = w.capture([[_msg(i)] for i in range(6)])
        out = [w.entries.cancel(handles[0]), w.entries.cancel(handles[0])]
        out.append(w.end(handles[0], 1, w.clock()))  # cancelled: unknown
        w.dispatcher._room = 0  # full, or closed: dropped, counted
        out.append(w.end(handles[1], 1, w.clock()))
        out.append(w.entries.cancel(handles[1]))  # gone
        w.dispatcher._room = 10_000
        w.clock.fail_at = w.clock.calls + 2  # the end's clock
        out.append(w.end(handles[2], 1, w.clock()))  # logged, the entry dropped
        out.append(w.entries.cancel(handles[2]))
        out.append(w.end(handles[3], -1, "x"))  # not a stamp: logged, dropped
        out.append(w.entries.cancel(handles[3]))
        out.append(w.end("x", 1, 5))  # not a handle: logged
        w.end(handles[4], 1, w.clock())
        out.append(w.entries.cancel(handles[4]))  # delivered: not cancelled
        out.append(w.end(handles[4], 1, w.clock()))  # ended twice
        out.append(w.entries.end(handles[5], w.clock(), 1, True, 0))  # captured: needs a start
        out.append(w.entries.end(handles[5], w.clock(), 1, True, 0, w.clock()))
        out.append(w.state())
        return out

    out = _scenario(script, caplog)
    assert out[:2] == [True, False]
    assert out[4] is out[6] is out[8] is out[10] is False
    assert out[12:14] == [-1, 2]
    state = out[14]
    assert state["captured"] == 0
    assert state["pending"] == 2
    # the drop, the cancelled entry's end and the second end of handles[4]: discarded
    assert state["stats"]["discarded"] == 3
    logged = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(logged) == 3


def test_a_capture_failure_is_logged_and_leaves_the_rest_to_the_delivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def __iter__(self) -> Any:
            raise RuntimeError("no numbers")

        def __next__(self) -> int:
            raise RuntimeError("no numbers")

    def script(w: _World) -> list[Any]:
        good = w.capture([[_msg(0)]])
        w.counter = Broken()  # type: ignore[assignment]
        bad = w.capture([[_msg(1)], [_msg(2, **{TRACE_SWITCH: "false"})], [_msg(3)]])
        w.counter = itertools.count(50)
        return [[_kind(h) for h in good + bad]]

    (kinds,) = _scenario(script, caplog)
    assert kinds == ["handle", NotImplemented, NotImplemented, NotImplemented]
    assert [r.getMessage() for r in caplog.records] == ["recording a SubBefore trace failed"]


def test_the_ends_wake_as_appends_wake(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        handles = w.capture([[_msg(i)] for i in range(5)])
        out = []
        for h in handles:
            w.end(h, 1, w.clock())
            out.append((w.wakes, w.dispatcher._wake_at))
            if len(out) == 2:  # the worker re-armed for a round of 4
                w.dispatcher._wake_at = 4
        return out

    out = _scenario(script, caplog)
    assert [wakes for wakes, _ in out] == [1, 1, 1, 2, 2]


def test_the_entries_twin_refuse_what_they_do_not_hold() -> None:
    for twin in _twins():
        entries = twin[2]()
        for bad in (
            ("R", -1, "T", "m", 0, None),
            ("R", 1, "T", "m", 1 << 63, None),
            (1, 1, "T", "m", 0, None),
            ("R", 1, "T", "m", 0, b"k"),
            ("R", 1, "T", "\ud800", 0, None),
        ):
            with pytest.raises(TypeError):
                entries.capture(*bad)
        handle = entries.capture("R", 1, "T", "m", 0, None)
        with pytest.raises(TypeError):
            entries.cancel(-1)
        with pytest.raises(TypeError):
            entries.end(handle, 1, 1, True, 0, -5)
        assert entries.captured() == 1
        entries.clear()
        assert entries.captured() == 0
        assert len(entries) == 0


# -- the records: captured then consumed == per delivery, byte for byte ----------------------

_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"))
_message = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["T", "%RETRY%cg", TRACE_TOPIC, TRACE_TOPIC + "X", "Tè"]),
        "origin": st.one_of(st.none(), st.just(""), st.sampled_from(["T0", "Orig"])),
        "switch": st.one_of(st.none(), st.sampled_from(["false", "true", "False", ""])),
        "region": st.one_of(st.none(), st.just(""), _texts),
        "uniq": st.one_of(st.none(), st.just(""), _texts),
        "keys": st.one_of(st.none(), st.just(""), _texts),
        "retries": st.integers(-3, 1 << 40),
    }
)


def _build(spec: dict[str, Any]) -> Any:
    props: dict[str, Any] = {}
    for key, name in (
        (RETRY_TOPIC, "origin"),
        (TRACE_SWITCH, "switch"),
        (MSG_REGION, "region"),
        (UNIQ_KEY, "uniq"),
        (KEYS, "keys"),
    ):
        if spec[name] is not None:
            props[key] = spec[name]
    return consumed_message(spec["topic"], props, retries=spec["retries"])


def _per_delivery(before: Any, after: Any, entries: Any, msgs: list[Any]) -> list[Any]:
    """Today's path: before, then after, per delivery (one clock, one counter)."""
    w = _World((hook_capture_py, hook_end_py, entries))
    for msg in msgs:
        pair = before(
            w.tracer,
            w.tracer.trace_topic,
            w.clock,
            w.counter,
            DEFAULT_REGION_ID,
            w.dispatcher,
            w.dispatcher._queue,
            w.entries,
            vars(w.dispatcher),
            w.dispatcher.stats,
            [msg],
        )
        if pair is not None:
            after(w.tracer, w.clock, SUCCESS, w.dispatcher.stats, w.entries, pair, 1)
    return [w.take(), dataclasses.asdict(w.dispatcher.stats), next(w.counter)]


def _captured(twin: Twin, msgs: list[Any]) -> list[Any]:
    w = _World(twin)
    handles = w.capture([[m] for m in msgs])
    for h in handles:
        assert h is None or h.__class__ is int
        if h is not None:
            began = w.clock()  # the stamp right before the listener
            w.end(h, 1, began)
    return [w.take(), dataclasses.asdict(w.dispatcher.stats), next(w.counter)]


@settings(max_examples=150, deadline=None)
@given(st.lists(_message, max_size=12))
def test_captured_records_equal_the_per_delivery_records(specs: list[dict[str, Any]]) -> None:
    per = [(hook_before_py, hook_after_py, EntryBufferPy)]
    if not native.PURE_REQUESTED:
        per.append(
            (compiled("trace_hook_before"), compiled("trace_hook_after"), compiled("trace_entries"))
        )
    results = []
    for before, after, entries in per:
        msgs = [_build(s) for s in specs]
        reset_retry_topic(msgs, "%RETRY%cg")
        results.append(_per_delivery(before, after, entries, msgs))
    for twin in _twins():
        msgs = [_build(s) for s in specs]
        reset_retry_topic(msgs, "%RETRY%cg")
        results.append(_captured(twin, msgs))
    assert all(r == results[0] for r in results[1:])


# -- the coroutine consume service ---------------------------------------------------------


@dataclasses.dataclass
class _Consumer:
    group: str = "cg"
    retry_topic: str = "%RETRY%cg"
    consume_message_batch_max_size: int = 1
    consume_timeout_ms: int = 60_000
    tracer: Any = None
    clock: Any = None
    offset_store: Any = None
    stats: Any = None
    message_model: Any = None
    max_reconsume_times: int = -1


class _Store:
    def update_offset(self, mq: Any, offset: int, increase_only: bool) -> None:
        pass


def _service(listener: Any) -> tuple[ConcurrentConsumeService, ConsumeTracer, Any]:
    from ariane.client._stats import ConsumeStats
    from ariane.common.clock import SystemClock

    dispatcher = consume_dispatcher()
    tracer = ConsumeTracer(dispatcher, "cg")
    consumer = _Consumer(
        tracer=tracer, clock=SystemClock(), offset_store=_Store(), stats=ConsumeStats()
    )
    return ConcurrentConsumeService(consumer, listener, 1), tracer, dispatcher  # type: ignore[arg-type]


def _records(dispatcher: Any) -> list[Any]:
    out = []
    for item in dispatcher._take_entries():
        out += decode_trace_data(item[1])
    return out


def _queued(msgs: list[Any]) -> ProcessQueue:
    pq = ProcessQueue()
    pq.put_messages(msgs)
    return pq


def test_the_service_captures_and_traces_a_retry_message_with_its_original_topic() -> None:
    async def listener(msgs: list[Any], ctx: Any) -> Any:
        await asyncio.sleep(0)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def go() -> None:
        service, tracer, dispatcher = _service(listener)
        service.start()
        msgs = [
            consumed_message("%RETRY%cg", {UNIQ_KEY: "r1", RETRY_TOPIC: "Orig"}, retries=2),
            consumed_message("T", {UNIQ_KEY: "t2"}),
        ]
        for i, m in enumerate(msgs):
            m.queue_offset = i
        service.submit(msgs, _queued(msgs), MQ, True)
        assert tracer.entries is not None
        assert tracer.entries.captured() + len(tracer.entries) == 2  # captured at submit
        for _ in range(100):
            if len(tracer.entries) == 2:
                break
            await asyncio.sleep(0.001)
        await service.stop()
        records = _records(dispatcher)
        got = sorted((r.trace_type.value, r.bean.msg_id) for r in records)
        assert got == [
            ("SubAfter", "r1"),
            ("SubAfter", "t2"),
            ("SubBefore", "r1"),
            ("SubBefore", "t2"),
        ]
        befores = {r.bean.msg_id: r for r in records if r.trace_type.value == "SubBefore"}
        assert befores["r1"].bean.retry_times == 2
        assert msgs[0].topic == "Orig"
        assert tracer.entries.captured() == 0
        assert dispatcher.stats.discarded == 0
        assert dispatcher.stats.appended == 4

    asyncio.run(go())


def test_a_dropped_queue_and_stop_cancel_what_was_never_delivered() -> None:
    gates = {"d0": asyncio.Event(), "k0": asyncio.Event()}
    seen: list[str] = []

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        name = msgs[0].properties[UNIQ_KEY]
        seen.append(name)
        if name in gates:
            await gates[name].wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def until(cond: Callable[[], bool]) -> None:
        for _ in range(1000):
            if cond():
                return
            await asyncio.sleep(0.001)
        raise AssertionError("never")

    async def go() -> None:
        service, tracer, dispatcher = _service(listener)
        entries = tracer.entries
        assert entries is not None
        service.start()
        await asyncio.sleep(0)
        dropped = [consumed_message("T", {UNIQ_KEY: f"d{i}"}) for i in range(3)]
        kept = [consumed_message("T", {UNIQ_KEY: f"k{i}"}) for i in range(3)]
        pq_dropped, pq_kept = _queued(dropped), _queued(kept)
        service.submit(dropped, pq_dropped, MQ, True)  # d0 starts at once and waits
        service.submit(kept, pq_kept, MQ, True)
        assert seen == ["d0"]
        assert entries.captured() == 6
        assert len(entries) == 0
        pq_dropped.dropped = True  # rebalanced away: d1, d2 are never delivered
        gates["d0"].set()
        await until(lambda: seen == ["d0", "k0"])  # k0 waits
        assert entries.captured() == 3
        assert len(entries) == 1
        stop = asyncio.ensure_future(service.stop())  # k1, k2 are never delivered
        await asyncio.sleep(0)
        assert entries.captured() == 1  # k0's: still running
        gates["k0"].set()
        await stop
        assert seen == ["d0", "k0"]
        assert entries.captured() == 0  # nothing left behind
        got = sorted((r.trace_type.value, r.bean.msg_id) for r in _records(dispatcher))
        assert got == [
            ("SubAfter", "d0"),
            ("SubAfter", "k0"),
            ("SubBefore", "d0"),
            ("SubBefore", "k0"),
        ]
        assert dispatcher.stats.discarded == 0
        assert dispatcher.stats.appended == 4

    asyncio.run(go())


def test_captured_deliveries_record_each_outcome() -> None:
    async def listener(msgs: list[Any], ctx: Any) -> Any:
        name = msgs[0].properties[UNIQ_KEY]
        if name == "e":
            raise RuntimeError("boom")
        if name == "n":
            return None
        if name == "l":
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def go() -> None:
        service, tracer, dispatcher = _service(listener)
        service.consumer.send_message_back = _back  # type: ignore[attr-defined]
        service.start()
        await asyncio.sleep(0)
        msgs = [consumed_message("T", {UNIQ_KEY: n}) for n in "senl"]
        for i, m in enumerate(msgs):
            m.queue_offset = i
        service.submit(msgs, _queued(msgs), MQ, True)
        assert tracer.entries is not None
        for _ in range(1000):
            if tracer.entries.captured() == 0:
                break
            await asyncio.sleep(0.001)
        await service.stop()
        got = sorted(
            (r.bean.msg_id, r.trace_type.value, r.context_code, r.success)
            for r in _records(dispatcher)
        )
        assert got == [
            ("e", "SubAfter", 2, False),  # EXCEPTION
            ("e", "SubBefore", 0, True),
            ("l", "SubAfter", 4, False),  # FAILED
            ("l", "SubBefore", 0, True),
            ("n", "SubAfter", 3, False),  # RETURNNULL
            ("n", "SubBefore", 0, True),
            ("s", "SubAfter", 0, True),
            ("s", "SubBefore", 0, True),
        ]
        assert dispatcher.stats.appended == 8
        assert dispatcher.stats.discarded == 0

    asyncio.run(go())


async def _back(msg: Any, delay: int, broker: Any) -> bool:
    return True


def test_a_stale_buffer_without_capture_is_never_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build of before the capture (its buffer has no ``capture``): every delivery goes the
    per-delivery way, nothing is logged."""
    from ariane.client import _trace_hooks

    class Stale(EntryBufferPy):
        @property
        def capture(self) -> Any:
            raise AttributeError("capture")

    monkeypatch.setattr(_trace_hooks, "new_entries", Stale)
    tracer = ConsumeTracer(consume_dispatcher(), "cg")
    assert isinstance(tracer.entries, Stale)
    assert tracer.hook_capture is None


def _cancelling_listener(seen: list[str], *, coroutine: bool) -> Any:
    """A listener that raises ``CancelledError`` itself on ``c``: a coroutine (run on the
    service's workers) or a plain function (run on its consume threads)."""

    def plain(msgs: list[Any], ctx: Any) -> Any:
        name = msgs[0].properties[UNIQ_KEY]
        seen.append(name)
        if name == "c":
            raise asyncio.CancelledError()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def coro(msgs: list[Any], ctx: Any) -> Any:
        await asyncio.sleep(0)
        return plain(msgs, ctx)

    return coro if coroutine else plain


@pytest.mark.parametrize("coroutine", [True, False], ids=["worker", "thread"])
def test_a_listener_raising_cancelled_error_is_a_failed_consume_not_a_lost_worker(
    coroutine: bool,
) -> None:
    """A listener's own ``CancelledError`` (its task not cancelled) is handled as any exception:
    the message goes back for a later consume, its trace ends as EXCEPTION, and the only worker
    (or consume thread) goes on with the next message (before, it ended with ``c``: ``b`` was
    never consumed, and the coroutine path left the entries of ``c`` and ``b`` captured)."""
    seen: list[str] = []
    backs: list[str] = []

    async def back(msg: Any, delay: int, broker: Any) -> bool:
        backs.append(msg.properties[UNIQ_KEY])
        return True

    async def go() -> None:
        service, tracer, dispatcher = _service(_cancelling_listener(seen, coroutine=coroutine))
        service.consumer.send_message_back = back  # type: ignore[attr-defined]
        service.start()
        await asyncio.sleep(0)
        msgs = [consumed_message("T", {UNIQ_KEY: n}) for n in "acb"]
        for i, m in enumerate(msgs):
            m.queue_offset = i
        service.submit(msgs, _queued(msgs), MQ, True)
        assert tracer.entries is not None
        for _ in range(2000):
            if (
                seen == ["a", "c", "b"]
                and backs
                and service._running == 0
                and tracer.entries.captured() == 0
            ):
                break
            await asyncio.sleep(0.001)
        await asyncio.wait_for(service.stop(), 5)
        assert seen == ["a", "c", "b"]
        assert backs == ["c"]
        assert tracer.entries.captured() == 0
        got = sorted(
            (r.bean.msg_id, r.trace_type.value, r.context_code, r.success)
            for r in _records(dispatcher)
        )
        assert got == [
            ("a", "SubAfter", 0, True),
            ("a", "SubBefore", 0, True),
            ("b", "SubAfter", 0, True),
            ("b", "SubBefore", 0, True),
            ("c", "SubAfter", 2, False),  # EXCEPTION
            ("c", "SubBefore", 0, True),
        ]
        assert dispatcher.stats.discarded == 0

    asyncio.run(go())
