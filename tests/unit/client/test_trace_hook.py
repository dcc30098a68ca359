"""The consume service's trace hooks in one call (``_speedups_tracehook.h``) against their pure
twins ``hook_before_py`` / ``hook_after_py``, each with its entry buffer (``TraceEntries`` /
``EntryBufferPy``): the same answers, the same queue (the general path's pairs, their ends,
the SubAfter a late end ships), the same counters, wake-ups and threshold, the same clock and
counter calls, the same logged failures, and the same records once the worker writes the
round. The buffers' records against ``sub_records_py`` (the reference the golden bytes
check). Also how ``ConsumeTracer`` binds them."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from ariane.client import _trace_dispatch, _trace_hooks, _trace_records
from ariane.client._trace_dispatch import (
    TAKEN,
    AsyncTraceDispatcher,
    TraceStats,
)
from ariane.client._trace_hooks import _ITEM_CHARS, _ITEM_KEY_CHARS, ConsumeTracer
from ariane.client._trace_records import (
    EntryBufferPy,
    hook_after_py,
    hook_before_py,
    sub_records_py,
)
from ariane.common import native
from ariane.common.clock import ManualClock
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from ariane.common.trace import DEFAULT_REGION_ID, ConsumeReturnType
from tests.support.native import compiled
from tests.support.trace import StepClock, consume_dispatcher
from tests.unit.client.fakes import consumed_message

SUCCESS = ConsumeReturnType.SUCCESS


class _World:
    """A dispatcher (not started: no loop), its tracer, a clock, a counter and a record of
    the wake-ups; ``before``/``after`` run one hook build with the tracer's bound values."""

    def __init__(
        self,
        before: Callable[..., Any],
        after: Callable[..., Any],
        entries: Callable[[], Any],
        **settings: Any,
    ) -> None:
        self.dispatcher = consume_dispatcher(**settings)
        self.tracer = ConsumeTracer(self.dispatcher, "cg")
        self.entries = self.tracer.entries = entries()  # the twin's buffer
        self.dispatcher.attach_entries(
            self.entries, functools.partial(self.entries.take, "cg", "PFX", 900, 120)
        )
        self.clock = StepClock()
        self.counter = itertools.count(41)
        self.wakes = 0
        self.notify_error: Exception | None = None
        self.dispatcher._notify = self._notify  # type: ignore[method-assign]
        self.tracer.now_ns = self.clock  # the general path's clock too
        self._before, self._after = before, after

    def _notify(self) -> None:
        self.wakes += 1
        if self.notify_error is not None:
            raise self.notify_error

    def before(self, msgs: Any) -> Any:
        return self._before(
            self.tracer,
            self.tracer.trace_topic,
            self.clock,
            self.counter,
            DEFAULT_REGION_ID,
            self.dispatcher,
            self.dispatcher._queue,
            self.entries,
            vars(self.dispatcher),
            self.dispatcher.stats,
            msgs,
        )

    def after(self, pair: Any, count: int) -> Any:
        return self._after(
            self.tracer, self.clock, SUCCESS, self.dispatcher.stats, self.entries, pair, count
        )

    def take(self) -> Any:
        """The worker's take of the entries (small items: several per round)."""
        assert self.dispatcher._take_entries is not None
        return self.dispatcher._take_entries()

    def state(self) -> dict[str, Any]:
        """Everything observable, the tracer shown as ``"T"`` and the worker's mark as
        ``"TAKEN"``."""

        def plain(x: Any) -> Any:
            if x is self.tracer:
                return "T"
            if x is TAKEN:
                return "TAKEN"
            if isinstance(x, list | tuple):
                return type(x).__name__, [plain(i) for i in x]
            return x

        return {
            "queue": plain(list(self.dispatcher._queue)),
            "pending": len(self.entries),
            "stats": dataclasses.asdict(self.dispatcher.stats),
            "wake_at": self.dispatcher._wake_at,
            "wakes": self.wakes,
            "clock": self.clock.calls,
            "counter": next(self.counter),
            "plain": plain,
        }


Twin = tuple[Callable[..., Any], Callable[..., Any], Callable[[], Any]]


def _both() -> list[Twin]:
    """The pure hooks and buffer, then the compiled ones when built (on the pure build the
    scenarios run the references alone)."""
    out: list[Twin] = [(hook_before_py, hook_after_py, EntryBufferPy)]
    if not native.PURE_REQUESTED:
        out.append(
            (
                compiled("trace_hook_before"),
                compiled("trace_hook_after"),
                compiled("trace_entries"),
            )
        )
    return out


def _buffers() -> list[Callable[[], Any]]:
    return [twin[2] for twin in _both()]


def _scenario(
    script: Callable[[_World], list[Any]],
    caplog: pytest.LogCaptureFixture,
    *,
    shapes: bool = True,
    **settings: Any,
) -> None:
    """Run ``script`` with the pure hooks, then the compiled ones: every answer, the final
    state, the log and the records the worker writes of the queue are the same (but for the
    pairs' shapes when ``shapes`` is false: the general path's data of a one-message call is
    a ``BeforeData`` where ``sub_before_py`` writes a ``OneData``; the same records)."""
    seen = []
    for before, after, entries in _both():
        caplog.clear()
        world = _World(before, after, entries, **settings)
        with (
            pytest.MonkeyPatch.context() as mp,  # the general path's request numbers
            caplog.at_level(logging.WARNING),
        ):
            mp.setattr(_trace_hooks, "_request_counter", world.counter)
            answers = script(world)
        state = world.state()
        plain = state.pop("plain")
        items = list(world.dispatcher._queue)
        pairs = [i for i in items if isinstance(i, list)]
        records = world.tracer.encode_pairs(pairs) if pairs else []
        records += world.take()
        logged = [
            (r.getMessage().replace(world.dispatcher.group, "G"), bool(r.exc_info))
            for r in caplog.records
        ]
        if not shapes:
            answers = [a is None for a in answers]
            del state["queue"]
        seen.append((plain(answers), state, records, logged))
    assert all(other == seen[0] for other in seen[1:])


def test_the_compiled_hooks_are_used_when_built() -> None:
    assert _trace_records.hook_before is compiled("trace_hook_before")
    assert _trace_records.hook_after is compiled("trace_hook_after")
    assert _trace_records.hook_capture is compiled("trace_hook_capture")
    assert _trace_records.hook_end is compiled("trace_hook_end")
    assert type(_trace_records.new_entries()) is type(compiled("trace_entries")())


def test_consume_tracer_binds_the_hooks_to_its_dispatcher_only() -> None:
    dispatcher = consume_dispatcher()
    tracer = ConsumeTracer(dispatcher, "cg")
    entries = tracer.entries
    assert entries is not None
    assert type(entries) is type(_trace_records.new_entries())
    assert dispatcher._entries is entries
    take = dispatcher._take_entries
    assert getattr(take, "args", None) == (
        "cg",
        _trace_hooks._REQUEST_PREFIX,
        _ITEM_CHARS,
        _ITEM_KEY_CHARS,
    )
    hb = tracer.hook_before
    assert getattr(hb, "func", None) is _trace_records.hook_before
    assert getattr(hb, "args", None) == (
        tracer,
        tracer.trace_topic,
        time.time_ns,  # the system clock's
        hb.args[3],  # type: ignore[attr-defined]  # the process's request counter
        DEFAULT_REGION_ID,
        dispatcher,
        dispatcher._queue,
        entries,
        vars(dispatcher),
        dispatcher.stats,
    )
    ha = tracer.hook_after
    assert getattr(ha, "func", None) is _trace_records.hook_after
    assert getattr(ha, "args", None) == (tracer, time.time_ns, SUCCESS, dispatcher.stats, entries)

    class Sink(AsyncTraceDispatcher):  # may queue differently: the Python methods
        pass

    hc = tracer.hook_capture
    assert getattr(hc, "func", None) is _trace_records.hook_capture
    assert getattr(hc, "args", None) == (
        tracer,
        tracer.trace_topic,
        hb.args[3],  # type: ignore[attr-defined]
        DEFAULT_REGION_ID,
        entries,
    )
    he = tracer.hook_end
    assert getattr(he, "func", None) is _trace_records.hook_end
    assert getattr(he, "args", None) == (
        tracer,
        time.time_ns,
        dispatcher.stats,
        entries,
        dispatcher,
        dispatcher._queue,
        vars(dispatcher),
    )

    other = ConsumeTracer(consume_dispatcher(Sink), "cg")
    assert other.hook_before == other.before
    assert other.entries is None
    assert other.hook_capture is None  # nothing captured: hook_before at each delivery
    assert other.hook_end == other._end_usual


def test_usual_deliveries_wake_once_per_round(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        out = []
        for i in range(3):
            msg = consumed_message(
                "T", {UNIQ_KEY: f"ID{i}", MSG_REGION: "R1", KEYS: "k1 k2"}, retries=i
            )
            handle = w.before([msg])
            out += [handle, w.dispatcher._wake_at, w.wakes]
            out.append(w.after(handle, 1))
        w.dispatcher._wake_at = 4  # the worker lingers: a round's worth wakes it
        out += [
            w.before([consumed_message("T", {UNIQ_KEY: "ID9"})]),
            w.dispatcher._wake_at,
            w.wakes,
        ]
        w.dispatcher._queue.append(("T", "x", 1, ()))  # queued items count too
        w.dispatcher._wake_at = 6
        out += [
            w.before([consumed_message("T", {UNIQ_KEY: "ID10"})]),
            w.dispatcher._wake_at,
            w.wakes,
        ]
        return out

    _scenario(script, caplog)


def test_a_full_queue_and_a_closed_dispatcher_drop_and_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(w: _World) -> list[Any]:
        first = w.before([consumed_message("T", {UNIQ_KEY: "A"})])
        dropped = w.before([consumed_message("T", {UNIQ_KEY: "B"})])  # queue_size 1: no handle
        out = [first, dropped, w.after(first, 1), len(w.take())]
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "C"})]))  # room again
        w.dispatcher._queue.append(("T", "x", 1, ()))
        w.take()
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "D"})]))  # a queued item fills it
        w.dispatcher._queue.clear()
        w.dispatcher._room = 0  # closed
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "E"})]))
        return out

    _scenario(script, caplog, queue_size=1)


def test_untraced_and_general_path_calls(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        two = [
            consumed_message("T", {UNIQ_KEY: "M1", KEYS: "a"}),
            consumed_message("T", {UNIQ_KEY: "M2"}, 2),
        ]
        return [
            w.before([consumed_message("T", {UNIQ_KEY: "X", TRACE_SWITCH: "false"})]),
            w.before([consumed_message("RMQ_SYS_TRACE_TOPIC", {UNIQ_KEY: "Y"})]),
            w.before([consumed_message("T", {})]),  # no UNIQ_KEY: the offset msgId
            w.before(
                [consumed_message("T", {UNIQ_KEY: "", KEYS: "", MSG_REGION: ""})]
            ),  # empty values
            w.before(two),
            w.before([]),
            w.before((consumed_message("T", {UNIQ_KEY: "Z"}),)),  # not a list: the general path
        ]

    _scenario(script, caplog)


def test_values_the_compiled_hook_leaves_to_the_general_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(w: _World) -> list[Any]:
        odd = consumed_message("T", {UNIQ_KEY: "M3", MSG_REGION: 7, KEYS: "k"})  # not a str
        pair = w.before([odd])
        out = [pair, w.after(pair, 1), w.before([consumed_message("T", {UNIQ_KEY: "M4"})])]
        lone = w.before([consumed_message("T", {UNIQ_KEY: "M5\ud800"})])  # no UTF-8 form
        out += [lone, w.before([consumed_message("T", {UNIQ_KEY: "M6"}, retries=1 << 70)])]
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "M7", KEYS: "k\u00e9\U0001f600"})]))
        return out

    _scenario(script, caplog, shapes=False)


def test_ends_after_the_worker_wrote_the_subbefore(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        a = w.before([consumed_message("T", {UNIQ_KEY: "A", KEYS: "ka"})])
        b = w.before([consumed_message("T", {UNIQ_KEY: "B"})])
        c = w.before([consumed_message("T", {UNIQ_KEY: "C"})])
        w.after(c, 1)
        first = w.take()  # the worker came before the listeners of a and b returned
        w.dispatcher._wake_at = 1  # re-armed
        out = [first, len(w.entries), w.after(a, 1), w.wakes, w.dispatcher._wake_at]
        out += [w.after(b, 2), len(w.entries), w.after(c, 1), w.after(a, 1)]  # ended twice
        return out

    _scenario(script, caplog)


def test_several_messages_end_as_a_tuple(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        msgs = [consumed_message("T", {UNIQ_KEY: f"M{i}"}) for i in range(3)]
        pair = w.before(msgs)
        return [w.after(pair, 3), pair]

    _scenario(script, caplog)


def test_failures_are_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        out = []
        w.clock.fail_at = 1  # the clock raises in the SubBefore hook
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "A"})]))
        handle = w.before([consumed_message("T", {UNIQ_KEY: "B"})])
        w.clock.fail_at = 3  # and in the SubAfter hook
        out += [handle, w.after(handle, 1), len(w.entries)]
        w.notify_error = ValueError("no loop")  # the wake-up fails: queued, counted, logged
        w.dispatcher._wake_at = 1
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "C"})]))
        w.notify_error = None
        w.clock.fail_at = 0
        out.append(w.after(-1, 1))  # not a handle
        out.append(w.after(12345, 1))  # unknown: discarded
        return out

    _scenario(script, caplog)
    assert "recording a SubBefore trace failed" in caplog.text
    assert "recording a SubAfter trace failed" in caplog.text


def test_a_bad_pair_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    for twin in _both():
        caplog.clear()
        world = _World(*twin)
        assert world.after(cast(Any, ("not", "a", "list")), 1) is None
        assert [r.getMessage() for r in caplog.records] == ["recording a SubAfter trace failed"]
        assert world.dispatcher.stats.appended == 0


def test_base_exceptions_propagate() -> None:
    for twin in _both():
        world = _World(*twin)
        world.notify_error = cast(Exception, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            world.before([consumed_message("T", {UNIQ_KEY: "A"})])


def test_the_bound_hooks_write_what_before_and_after_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ConsumeTracer.hook_before``/``hook_after`` (the entries) against ``before``/``after``
    (the open pairs of the queue, ``sub_pairs``): byte for byte the same records, the same
    counters."""
    seen = []
    for hooked in (False, True):
        monkeypatch.setattr(_trace_hooks, "_request_counter", itertools.count(1 << 40))
        dispatcher = consume_dispatcher()
        clock = ManualClock(1_765_000_000_000)
        tracer = ConsumeTracer(dispatcher, "cg", clock)
        dispatcher._notify = lambda: None  # type: ignore[method-assign]
        for i in range(700):
            msg = consumed_message(
                "T", {UNIQ_KEY: f"ID{i:05}", KEYS: f"k{i}" if i % 3 else ""}, i % 2
            )
            if hooked:
                handle = tracer.hook_before([msg])
                clock.advance(i % 5)
                tracer.hook_after(cast(Any, handle), 1)
            else:
                pair = tracer.before([msg])
                clock.advance(i % 5)
                tracer.after(cast(Any, pair), 1, True, SUCCESS)
        pairs = list(dispatcher._queue)
        dispatcher._queue.clear()
        items = _trace_dispatch.encoded(pairs)
        assert dispatcher._entries is not None
        if dispatcher._entries:
            items += dispatcher._taken_entries()
        seen.append((_trace_dispatch.pack(items), dataclasses.asdict(dispatcher.stats)))
    assert seen[0] == seen[1]
    assert seen[1][1]["appended"] == 1400
    assert len(seen[1][0]) > 1


def test_the_count_goes_to_any_stats_object() -> None:
    """The compiled hook writes ``TraceStats.appended`` in its slot; other stats objects (a
    subclass, one without slots, a class whose attribute became a property) by their
    attributes, as the pure twin does."""

    class Sub(TraceStats):
        pass

    @dataclasses.dataclass
    class Plain:
        appended: int = 40

    class Watched(TraceStats):
        pass

    counts: list[list[int]] = []
    for before, after, entries in _both():
        seen = []
        for stats in (TraceStats(appended=7), Sub(appended=9), Plain()):
            world = _World(before, after, entries)
            handle = world.before([consumed_message("T", {UNIQ_KEY: "A"})])
            after(world.tracer, world.clock, SUCCESS, stats, world.entries, handle, 1)
            fresh = [world.tracer, (0, "R", 1, "T", "M", 0, None)]
            after(world.tracer, world.clock, SUCCESS, stats, world.entries, fresh, 1)
            seen.append(stats.appended)
        watched = Watched()
        world = _World(before, after, entries)
        after(
            world.tracer,
            world.clock,
            SUCCESS,
            watched,
            world.entries,
            [world.tracer, (0, "R", 1, "T", "M", 0, None)],
            1,
        )
        Watched.appended = property(lambda self: 100, lambda self, v, out=seen: out.append(v))  # type: ignore[assignment,method-assign]
        after(
            world.tracer,
            world.clock,
            SUCCESS,
            watched,
            world.entries,
            [world.tracer, (0, "R", 1, "T", "M", 0, None)],
            1,
        )
        del Watched.appended
        seen.append(watched.appended)
        counts.append(seen)
    assert counts[0] == [9, 11, 42, 101, 1]  # two ends each (an entry, then a fresh pair)
    assert all(c == counts[0] for c in counts[1:])


# -- the buffers ---------------------------------------------------------------------------------

_CALLS = [
    # (began ns, region, number, topic, msgId, retries, keys), end (ns, count, success, code)
    ((1_765_000_000_123_456_789, "R1", 0x41, "T", "ID1", 0, "k1 k2"), (1_765_000_000_125_000_000, 1, True, 0)),
    ((1_765_000_000_123_999_999, "R1", 0x1FF, "T", "ID2", 3, None), None),
    ((1_765_000_000_124_000_000, "R\u00e9", 0x200, "T2", "ID\U0001f600", 1, ""), (1_765_000_000_124_000_000, 3, False, 4)),
    ((5, "R", (1 << 64) - 1, "T", "M", -2, "k"), (1_000_000, 0, True, 1)),  # cost < 0: 0
    ((1_765_000_000_130_000_000, "R", 7, "T", "ID5", 0, "kk"), (1_765_000_000_131_000_000, 1, True, 0)),
]  # fmt: skip


def _reference(calls: list[Any], sub_before: bool, chars: int, key_chars: int) -> list[Any]:
    return sub_records_py(
        [((b[0], b[1], b[2], b[3], ((b[4], b[5], b[6]),)), e) for b, e in calls],
        "cg",
        "PFX",
        sub_before,
        chars,
        key_chars,
    )


@pytest.mark.parametrize(("chars", "key_chars"), [(1 << 20, 1 << 20), (200, 1 << 20), (1 << 20, 9)])
def test_the_buffers_write_what_sub_records_writes(chars: int, key_chars: int) -> None:
    for new in _buffers():
        buf = new()
        handles = [buf.add(*b) for b, _e in _CALLS]
        assert handles == list(range(len(_CALLS)))
        assert len(buf) == len(_CALLS)
        ended = [(h, e) for h, (_b, e) in zip(handles, _CALLS, strict=True) if e is not None]
        assert [buf.end(h, *e) for h, e in ended] == [0] * len(ended)
        assert buf.take("cg", "PFX", chars, key_chars) == _reference(_CALLS, True, chars, key_chars)
        assert len(buf) == 0
        assert buf.take("cg", "PFX", chars, key_chars) == []
        # the running call: its SubAfter alone once it ends
        assert buf.end(handles[1], 1_765_000_000_200_000_000, 1, True, 0) == 1
        assert buf.end(handles[1], 1_765_000_000_200_000_000, 1, True, 0) == -1
        assert buf.end(handles[0], 1, 1, True, 0) == -1  # written and gone
        assert len(buf) == 1
        late = [(_CALLS[1][0], (1_765_000_000_200_000_000, 1, True, 0))]
        assert buf.take("cg", "PFX", chars, key_chars) == _reference(late, False, chars, key_chars)
        assert buf.end(handles[1], 1, 1, True, 0) == -1


def test_the_buffers_agree_on_many_calls() -> None:
    """Random interleavings of adds, ends and takes: the same answers and records."""
    import random

    runs = []
    for new in _buffers():
        rng = random.Random(7)
        buf = new()
        open_handles: list[int] = []
        out: list[Any] = []
        for step in range(3000):
            op = rng.random()
            if op < 0.5:
                keys = rng.choice([None, "", "k", f"key{step}", "k\u00e9"])
                h = buf.add(
                    step * 1_000_003,
                    rng.choice(["R", "R2"]),
                    step,
                    rng.choice(["T", "U"]),
                    f"M{step}",
                    step % 4,
                    keys,
                )
                open_handles.append(h)
                out.append(h)
            elif op < 0.9 and open_handles:
                h = open_handles.pop(rng.randrange(len(open_handles)))
                out.append(
                    buf.end(
                        h,
                        step * 1_000_003 + rng.randrange(10**8),
                        rng.randrange(4),
                        rng.random() < 0.8,
                        rng.randrange(5),
                    )
                )
            elif op < 0.95:
                out.append(buf.end(rng.randrange(4000), 1, 1, True, 0))
            else:
                out.append(buf.take("cg", "P", rng.choice([300, 4000]), rng.choice([40, 900])))
            out.append(len(buf))
        out.append(buf.take("cg", "P", 4000, 900))
        out.append(buf.clear())
        out.append((len(buf), buf.take("cg", "P", 4000, 900)))
        runs.append(out)
    assert all(r == runs[0] for r in runs[1:])


def test_the_buffers_refuse_what_they_do_not_hold() -> None:
    bad_adds = [
        (-1, "R", 1, "T", "M", 0, None),  # negative time
        (1, "R", -1, "T", "M", 0, None),  # negative number
        (1, "R", 1 << 64, "T", "M", 0, None),
        (1, "R", 1, "T", "M", 1 << 63, None),
        (1, "R", 1, "T", "M", 0, b"k"),
        (1, "R", 1, "T", "M\ud800", 0, None),
        (1, 1, 1, "T", "M", 0, None),
        (True, "R", 1, "T", "M", 0, None),  # not an exact int
    ]
    for new in _buffers():
        buf = new()
        for args in bad_adds:
            with pytest.raises(TypeError):
                buf.add(*args)
        assert len(buf) == 0
        h = buf.add(1, "R", 1, "T", "M", 0, None)
        for args in [
            (h, -1, 1, True, 0),
            (-1, 1, 1, True, 0),
            (h, 1, 1.0, True, 0),
            (h, 1, 1, True, "0"),
        ]:
            with pytest.raises(TypeError):
                buf.end(*args)
        with pytest.raises(ValueError, match="request_prefix"):
            buf.take("cg", "P" * 17, 10, 10)
        with pytest.raises(TypeError):
            buf.take(1, "P", 10, 10)
        assert len(buf) == 1
        assert buf.clear() == 1
        assert buf.end(h, 1, 1, True, 0) == -1


def test_the_system_clock_is_read_as_time_ns_reads_it() -> None:
    """The bound hooks of a tracer on the system clock (``time.time_ns``, which the compiled
    hooks read themselves): the records' times lie between the calls' neighbours."""
    dispatcher = consume_dispatcher()
    dispatcher._notify = lambda: None  # type: ignore[method-assign]
    tracer = ConsumeTracer(dispatcher, "cg")
    t0 = time.time_ns() // 1_000_000
    handle = tracer.hook_before([consumed_message("T", {UNIQ_KEY: "A"})])
    t1 = time.time_ns() // 1_000_000
    tracer.hook_after(cast(Any, handle), 1)
    t2 = time.time_ns() // 1_000_000
    ((_topic, text, count, _keys),) = dispatcher._taken_entries()
    before, after, rest = text.split("\x02")
    assert (count, rest) == (2, "")
    assert t0 <= int(before.split("\x01")[1]) <= t1
    assert t1 <= int(after.split("\x01")[7]) <= t2
