"""The consume service's trace hooks in one call (``_speedups_tracehook.h``) against their pure
twins ``hook_before_py`` / ``hook_after_py``: the same answers, the same queue (pairs, their
ends, the SubAfter a late end ships), the same counters, wake-ups and threshold, the same
clock and counter calls, the same logged failures, and the same records once the worker
encodes the round. Also how ``ConsumeTracer`` binds them."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import shutil
import sysconfig
import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from ariane.client import _trace_hooks, _trace_records
from ariane.client._trace_dispatch import (
    _NEVER,
    TAKEN,
    AsyncTraceDispatcher,
    TraceSettings,
    TraceStats,
)
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client._trace_records import hook_after_py, hook_before_py
from ariane.client.config import ClientConfig
from ariane.common import native
from ariane.common.message import HostPort, MessageExt
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from ariane.common.trace import DEFAULT_REGION_ID, ConsumeReturnType

SUCCESS = ConsumeReturnType.SUCCESS


def _compiled(name: str) -> Any:
    fast = getattr(native.speedups, name, None)
    if fast is None:
        cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        if native.PURE_REQUESTED or shutil.which(cc.split()[0]) is None:
            pytest.skip(f"pure-Python build ({native.build_name()}): nothing compiled to compare")
        pytest.fail(f"a C compiler is present but ariane._speedups.{name} is not built")
    return fast


def _message(topic: str, properties: dict[str, Any], retries: int = 0) -> MessageExt:
    return MessageExt(
        topic,
        b"body",
        properties=properties,
        reconsume_times=retries,
        store_host=HostPort(b"\x7f\x00\x00\x01", 10911),
        commit_log_offset=1 << 20,
    )


class _Clock:
    def __init__(self, fail_at: int = 0) -> None:
        self.calls = 0
        self.fail_at = fail_at

    def __call__(self) -> int:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("clock broke")
        return 1_765_000_000_123_456_789 + self.calls * 1_000_000


class _World:
    """A dispatcher (not started: no loop), its tracer, a clock, a counter and a record of
    the wake-ups; ``before``/``after`` run one hook build with the tracer's bound values."""

    def __init__(
        self, before: Callable[..., Any], after: Callable[..., Any], **settings: Any
    ) -> None:
        self.dispatcher = AsyncTraceDispatcher(
            trace_topic=None,
            host_config=ClientConfig(namesrv_addr="127.0.0.1:9876"),
            host_group="g",
            kind="CONSUME",
            sender_factory=cast(Any, None),
            settings=TraceSettings(**settings),
        )
        self.tracer = ConsumeTracer(self.dispatcher, "cg")
        self.clock = _Clock()
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
            self.dispatcher._queue.append,
            vars(self.dispatcher),
            self.dispatcher.stats,
            msgs,
        )

    def after(self, pair: Any, count: int) -> Any:
        return self._after(self.tracer, self.clock, SUCCESS, self.dispatcher.stats, pair, count)

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
            "stats": dataclasses.asdict(self.dispatcher.stats),
            "wake_at": self.dispatcher._wake_at,
            "wakes": self.wakes,
            "clock": self.clock.calls,
            "counter": next(self.counter),
            "plain": plain,
        }


def _both() -> list[tuple[Callable[..., Any], Callable[..., Any]]]:
    """The pure hooks, then the compiled ones when built (on the pure build the scenarios
    run the references alone)."""
    out: list[tuple[Callable[..., Any], Callable[..., Any]]] = [(hook_before_py, hook_after_py)]
    if not native.PURE_REQUESTED:
        out.append((_compiled("trace_hook_before"), _compiled("trace_hook_after")))
    return out


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
    for before, after in _both():
        caplog.clear()
        world = _World(before, after, **settings)
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
    assert _trace_records.hook_before is _compiled("trace_hook_before")
    assert _trace_records.hook_after is _compiled("trace_hook_after")


def test_consume_tracer_binds_the_hooks_to_its_dispatcher_only() -> None:
    world = _World(hook_before_py, hook_after_py)
    hb = world.tracer.hook_before
    assert getattr(hb, "func", None) is _trace_records.hook_before
    assert getattr(hb, "args", None) == (
        world.tracer,
        world.tracer.trace_topic,
        time.time_ns,  # the system clock's
        hb.args[3],  # type: ignore[attr-defined]  # the process's request counter
        DEFAULT_REGION_ID,
        world.dispatcher,
        world.dispatcher._queue,
        world.dispatcher._queue.append,
        vars(world.dispatcher),
        world.dispatcher.stats,
    )
    ha = world.tracer.hook_after
    assert getattr(ha, "func", None) is _trace_records.hook_after
    assert getattr(ha, "args", None) == (
        world.tracer,
        time.time_ns,
        SUCCESS,
        world.dispatcher.stats,
    )

    class Sink(AsyncTraceDispatcher):  # may queue differently: the Python methods
        pass

    other = ConsumeTracer(
        Sink(
            trace_topic=None,
            host_config=ClientConfig(namesrv_addr="127.0.0.1:9876"),
            host_group="g",
            kind="CONSUME",
            sender_factory=cast(Any, None),
        ),
        "cg",
    )
    assert other.hook_before == other.before


def test_usual_deliveries_wake_once_per_round(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        out = []
        for i in range(3):
            msg = _message("T", {UNIQ_KEY: f"ID{i}", MSG_REGION: "R1", KEYS: "k1 k2"}, retries=i)
            pair = w.before([msg])
            out += [pair, w.dispatcher._wake_at, w.wakes]
            out.append(w.after(pair, 1))
        w.dispatcher._wake_at = 4  # the worker lingers: a round's worth wakes it
        out += [w.before([_message("T", {UNIQ_KEY: "ID9"})]), w.dispatcher._wake_at, w.wakes]
        return out

    _scenario(script, caplog)


def test_a_full_queue_and_a_closed_dispatcher_drop_and_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(w: _World) -> list[Any]:
        first = w.before([_message("T", {UNIQ_KEY: "A"})])
        dropped = w.before([_message("T", {UNIQ_KEY: "B"})])  # queue_size 1
        out = [first, dropped, w.after(dropped, 1), w.after(first, 1)]
        w.dispatcher._room = 0  # closed
        out.append(w.before([_message("T", {UNIQ_KEY: "C"})]))
        return out

    _scenario(script, caplog, queue_size=1)


def test_untraced_and_general_path_calls(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        two = [_message("T", {UNIQ_KEY: "M1", KEYS: "a"}), _message("T", {UNIQ_KEY: "M2"}, 2)]
        return [
            w.before([_message("T", {UNIQ_KEY: "X", TRACE_SWITCH: "false"})]),
            w.before([_message("RMQ_SYS_TRACE_TOPIC", {UNIQ_KEY: "Y"})]),
            w.before([_message("T", {})]),  # no UNIQ_KEY: the offset msgId
            w.before(two),
            w.before([]),
        ]

    _scenario(script, caplog)


def test_values_the_compiled_hook_leaves_to_the_general_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(w: _World) -> list[Any]:
        odd = _message("T", {UNIQ_KEY: "M3", MSG_REGION: 7, KEYS: "k"})  # not a str
        pair = w.before([odd])
        return [pair, w.after(pair, 1), w.before([_message("T", {UNIQ_KEY: "M4"})])]

    _scenario(script, caplog, shapes=False)


def test_ends_the_worker_took_first_go_alone(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        a = w.before([_message("T", {UNIQ_KEY: "A", KEYS: "ka"})])
        b = w.before([_message("T", {UNIQ_KEY: "B"})])
        a.append(TAKEN)  # the worker claimed it before the listener returned
        b.append(TAKEN)
        return [w.after(a, 1), w.after(b, 2), a, b]

    _scenario(script, caplog)


def test_several_messages_end_as_a_tuple(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        msgs = [_message("T", {UNIQ_KEY: f"M{i}"}) for i in range(3)]
        pair = w.before(msgs)
        return [w.after(pair, 3), pair]

    _scenario(script, caplog)


def test_failures_are_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        out = []
        w.clock.fail_at = 1  # the clock raises in the SubBefore hook
        out.append(w.before([_message("T", {UNIQ_KEY: "A"})]))
        pair = w.before([_message("T", {UNIQ_KEY: "B"})])
        w.clock.fail_at = 3  # and in the SubAfter hook
        out += [pair, w.after(pair, 1), pair]
        w.notify_error = ValueError("no loop")  # the wake-up fails: queued, counted, logged
        w.dispatcher._wake_at = 1
        out.append(w.before([_message("T", {UNIQ_KEY: "C"})]))
        return out

    _scenario(script, caplog)
    assert "recording a SubBefore trace failed" in caplog.text
    assert "recording a SubAfter trace failed" in caplog.text


def test_a_bad_pair_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    for before, after in _both():
        caplog.clear()
        world = _World(before, after)
        assert world.after(cast(Any, ("not", "a", "list")), 1) is None
        assert [r.getMessage() for r in caplog.records] == ["recording a SubAfter trace failed"]
        assert world.dispatcher.stats.appended == 0


def test_base_exceptions_propagate() -> None:
    for before, _after in _both():
        world = _World(before, _after)
        world.notify_error = cast(Exception, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            world.before([_message("T", {UNIQ_KEY: "A"})])


def test_the_bound_hooks_queue_what_before_and_after_queue() -> None:
    """``ConsumeTracer.hook_before``/``hook_after`` against ``before``/``after``: the same
    queue and counters (the clock's times and request numbers aside)."""
    queues = []
    for hooked in (False, True):
        world = _World(hook_before_py, hook_after_py)
        tracer = world.tracer
        for i in range(5):
            msg = _message("T", {UNIQ_KEY: f"ID{i}", KEYS: f"k{i}"}, retries=i % 2)
            if hooked:
                tracer.hook_after(tracer.hook_before([msg]), 1)
            else:
                tracer.after(tracer.before([msg]), 1, True, SUCCESS)  # type: ignore[arg-type]
        queues.append(
            (
                [(p[1][3:], isinstance(p[2], int), len(p)) for p in world.dispatcher._queue],
                dataclasses.asdict(world.dispatcher.stats),
                world.dispatcher._wake_at,
                world.wakes,
            )
        )
    assert queues[0] == queues[1]
    assert queues[1][1]["appended"] == 10
    assert queues[1][2] == _NEVER


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
    for before, after in _both():
        seen = []
        for stats in (TraceStats(appended=7), Sub(appended=9), Plain()):
            world = _World(before, after)
            pair = world.before([_message("T", {UNIQ_KEY: "A"})])
            after(world.tracer, world.clock, SUCCESS, stats, pair, 1)
            after(world.tracer, world.clock, SUCCESS, stats, [world.tracer, pair[1]], 1)
            seen.append(stats.appended)
        watched = Watched()
        world = _World(before, after)
        after(
            world.tracer,
            world.clock,
            SUCCESS,
            watched,
            [world.tracer, (0, "R", 1, "T", "M", 0, None)],
            1,
        )
        Watched.appended = property(lambda self: 100, lambda self, v, out=seen: out.append(v))  # type: ignore[assignment,method-assign]
        after(
            world.tracer,
            world.clock,
            SUCCESS,
            watched,
            [world.tracer, (0, "R", 1, "T", "M", 0, None)],
            1,
        )
        del Watched.appended
        seen.append(watched.appended)
        counts.append(seen)
    assert counts[0] == [9, 11, 42, 101, 1]  # two ends each (a pair, then a fresh one)
    assert all(c == counts[0] for c in counts[1:])
