"""Whole trace messages from the consume hooks' entry buffer (``pack``: ``_speedups_tracepack.h``
and ``EntryBufferPy.pack``): what ``_trace_dispatch.pack`` makes of ``take``'s items, encoded as
the dispatcher's ``_send`` encodes it, byte for byte, on both buffers; ``None`` (nothing taken)
exactly when an entry's keys could pass a message's KEYS budget; the dispatcher's round uses it
when nothing else is queued and keeps the old path otherwise."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable
from typing import Any, cast

import pytest

from ariane.client import _trace_dispatch, _trace_hooks
from ariane.client._trace_dispatch import AsyncTraceDispatcher, pack
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client._trace_records import EntryBufferPy
from ariane.common import native
from ariane.common.clock import ManualClock
from ariane.common.message import MessageExt
from ariane.common.properties import KEYS, UNIQ_KEY
from ariane.common.trace import MAX_TRACE_KEY_CHARS, MAX_TRACE_MESSAGE_CHARS
from tests.support.native import compiled
from tests.support.trace import consume_dispatcher
from tests.unit.client.fakes import consumed_message


def _buffers() -> list[Callable[[], Any]]:
    out: list[Callable[[], Any]] = [EntryBufferPy]
    if not native.PURE_REQUESTED:
        out.append(compiled("trace_entries"))
    return out


def _fill(buf: Any, rng: random.Random, n: int, start: int = 0) -> list[int]:
    """n random entries (half of them ended); their handles."""
    handles = []
    for i in range(start, start + n):
        keys = rng.choice([None, "", "k", f"key{i % 7}", f"ord-{i}", "k\u00e9 x", "\U0001f600"])
        msg_id = rng.choice([f"M{i:030X}", f"M{i % 5}", "\u00e9t\u00e9"])  # repeats, non-ASCII
        h = buf.add(
            1_765_000_000_000_000_000 + i * 7_000_003,
            rng.choice(["R", "R\u00e9"]),
            i,
            "T",
            msg_id,
            i % 3,
            keys,
        )
        handles.append(h)
        if rng.random() < 0.5:
            buf.end(h, 1_765_000_000_000_000_000 + i * 7_000_003 + rng.randrange(10**8), 1, True, 0)
    return handles


def _packed_reference(buf: Any, args: tuple[int, int, int, int]) -> list[Any]:
    chars, key_chars, max_chars, max_key_chars = args
    items = buf.take("cg", "PFX", chars, key_chars)
    return [(p.data.encode(), p.records, p.keys) for p in pack(items, max_chars, max_key_chars)]


_LIMITS = [
    (MAX_TRACE_MESSAGE_CHARS // 4, MAX_TRACE_KEY_CHARS // 8, MAX_TRACE_MESSAGE_CHARS, MAX_TRACE_KEY_CHARS),
    (300, 40, 1000, 200),  # several messages, closed by size and by keys
    (50, 1000, 120, 1 << 20),  # an item per entry, messages by size
    (1 << 20, 30, 1 << 20, 95),  # messages closed by keys only
    (0, 0, 1, 60),  # an item per entry, a message per item
    (-5, -5, -1, 64),
]  # fmt: skip


@pytest.mark.parametrize("args", _LIMITS)
def test_pack_writes_what_pack_makes_of_take(args: tuple[int, int, int, int]) -> None:
    for new in _buffers():
        seen = []
        for how in ("pack", "take"):
            buf = new()
            rng = random.Random(11)
            handles = _fill(buf, rng, 400)
            out = buf.pack("cg", "PFX", *args) if how == "pack" else _packed_reference(buf, args)
            # the running entries stay, their SubBefore written: their ends go in a later round
            late = [buf.end(h, 1_765_000_100_000_000_000, 2, False, 3) for h in handles]
            later = buf.pack("cg", "PFX", *args) if how == "pack" else _packed_reference(buf, args)
            seen.append((out, late, len(buf), later))
        assert seen[0] == seen[1]
        assert seen[0][0]  # not None: every entry's keys fit
        assert sum(records for _body, records, _keys in seen[0][0]) > 400


def test_the_twins_agree_on_many_rounds() -> None:
    runs = []
    for new in _buffers():
        rng = random.Random(5)
        buf = new()
        out: list[Any] = []
        for step in range(60):
            handles = _fill(buf, rng, rng.randrange(0, 40), start=step * 100)
            for h in handles:
                if rng.random() < 0.3:
                    out.append(buf.end(h, 1_765_000_200_000_000_000, 1, True, 0))
            args = rng.choice(_LIMITS)
            out.append(buf.pack("cg", "P", *args) if step % 3 else buf.take("cg", "P", *args[:2]))
            out.append(len(buf))
        runs.append(out)
    assert all(r == runs[0] for r in runs[1:])


def test_pack_answers_none_when_an_entrys_keys_could_pass_the_budget() -> None:
    """An entry of 21 key characters ("M" + its separator, 18 characters of KEYS and theirs):
    None when max_key_chars - max(item_key_chars, 0) is below that, nothing taken."""
    for new in _buffers():
        for item_key_chars, max_key_chars, whole in [
            (10, 30, False),
            (10, 31, True),
            (-3, 20, False),
            (-3, 21, True),
            (1 << 62, -(1 << 62), False),
        ]:
            buf = new()
            buf.add(1, "R", 1, "T", "M", 0, "k" * 18)
            h = buf.add(2, "R", 2, "T", "N", 0, None)
            buf.end(h, 3, 1, True, 0)
            out = buf.pack("cg", "P", 100, item_key_chars, 100, max_key_chars)
            assert (out is not None) is whole
            assert len(buf) == (0 if whole else 2)
        buf = new()
        assert buf.pack("cg", "P", 1, 1, 1, -(1 << 63)) == []  # nothing pending


def test_pack_refuses_what_take_refuses() -> None:
    for new in _buffers():
        buf = new()
        buf.add(1, "R", 1, "T", "M", 0, None)
        for args, error in [
            (("cg", "P" * 17, 10, 10, 10, 10), ValueError),
            ((1, "P", 10, 10, 10, 10), TypeError),
            (("cg", "P", 10, 10, 1.0, 10), TypeError),
            (("cg", "P", 10, 10, 10, 1 << 63), TypeError),
            (("cg", "P" * 17, 10, 10, 10, "x"), TypeError),  # the types first
        ]:
            with pytest.raises(error):
                buf.pack(*args)
        with pytest.raises(TypeError):
            buf.pack("cg", "P", 10, 10, 10)
        assert len(buf) == 1


def _dispatcher(**settings: Any) -> AsyncTraceDispatcher:
    dispatcher = consume_dispatcher(**settings)
    dispatcher._notify = lambda: None  # type: ignore[method-assign]
    return dispatcher


def _deliver(tracer: ConsumeTracer, n: int, keys: str | None = "order-1") -> None:
    for i in range(n):
        props = {UNIQ_KEY: f"7F0000010001{i:020X}"}
        if keys is not None:
            props[KEYS] = keys
        before = tracer.hook_before([consumed_message("T", props)])
        if i % 4:
            tracer.hook_after(cast(Any, before), 1)


def _counted(calls: list[str], pack_whole: Callable[..., Any], *args: Any) -> Any:
    calls.append("pack")
    return pack_whole(*args)


@pytest.mark.parametrize("queued", [False, True])
def test_the_rounds_messages_are_the_old_ones(
    queued: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round of entries alone is packed whole by the buffer; with a queued item (a call of
    two messages: an open pair) the old way. Either way the bodies, records and KEYS are the
    old round's: ``pack`` of the items and the entries' ``take``, encoded."""
    seen = []
    for whole in (True, False):
        dispatcher = _dispatcher(max_message_chars=20_000)
        monkeypatch.setattr(_trace_hooks, "_request_counter", itertools.count(7))
        tracer = ConsumeTracer(dispatcher, "cg", ManualClock(1_765_000_000_000))
        assert dispatcher._pack_entries is not None
        if not whole:
            dispatcher._pack_entries = None
        calls: list[str] = []
        pack_whole = dispatcher._pack_entries
        if pack_whole is not None:
            dispatcher._pack_entries = functools.partial(_counted, calls, pack_whole)
        _deliver(tracer, 700)
        if queued:
            tracer.before([consumed_message("T", {UNIQ_KEY: "A"}), consumed_message("T", {})])
        items = _trace_dispatch._take(dispatcher._queue, len(dispatcher._queue))
        packed = dispatcher._packed(items)
        assert calls == ([] if queued or not whole else ["pack"])
        assert len(dispatcher._entries or ()) == 0
        seen.append(
            [
                (p.data if isinstance(p.data, bytes) else p.data.encode(), p.records, p.keys)
                for p in packed
            ]
        )
    assert seen[0] == seen[1]
    assert len(seen[0]) > 3


def test_a_failing_pack_loses_the_round_and_counts_it() -> None:
    dispatcher = _dispatcher()
    tracer = ConsumeTracer(dispatcher, "cg")
    _deliver(tracer, 10)
    pending = len(dispatcher._entries or ())

    def broken(max_chars: int, max_key_chars: int) -> None:
        raise RuntimeError("a bug")

    dispatcher._pack_entries = broken
    assert dispatcher._packed([]) == []
    assert dispatcher.stats.lost_records == pending == 10
    assert len(dispatcher._entries or ()) == 0


def test_consume_tracer_binds_pack() -> None:
    dispatcher = _dispatcher()
    tracer = ConsumeTracer(dispatcher, "cg")
    bound = dispatcher._pack_entries
    assert isinstance(bound, functools.partial)
    assert bound.func == tracer.entries.pack  # type: ignore[union-attr]
    assert bound.args[0] == "cg"
    assert bound.args[2:] == (MAX_TRACE_MESSAGE_CHARS // 4, MAX_TRACE_KEY_CHARS // 8)


def _binds() -> list[Callable[..., Any]]:
    out: list[Callable[..., Any]] = [functools.partial]
    if not native.PURE_REQUESTED:
        out.append(compiled("trace_bind"))
    return out


def test_trace_bind_calls_as_partial_calls() -> None:
    def f(*args: Any, **kw: Any) -> Any:
        if args and args[-1] == "raise":
            raise KeyError(len(args))
        return args, kw

    for bind in _binds():
        one = bind(f, 1, "two")
        assert (one.func, one.args) == (f, (1, "two"))  # type: ignore[attr-defined]
        assert one() == ((1, "two"), {})
        assert one(3, x=4) == ((1, "two", 3), {"x": 4})
        many = bind(f, *range(20))
        assert many(*range(20, 30), y=1) == (tuple(range(30)), {"y": 1})  # past the C stack
        assert bind(f)(*range(30)) == (tuple(range(30)), {})
        with pytest.raises(KeyError, match="3"):
            one("raise")
        assert bind(max, 3)(7, 5) == 7
        assert bind(ConsumeTracer.__name__.__add__)("!") == "ConsumeTracer!"
    with pytest.raises(TypeError):
        _binds()[-1](1)  # not callable


def test_consume_tracer_binds_its_hooks_with_bind() -> None:
    from ariane.client import _trace_records

    tracer = ConsumeTracer(_dispatcher(), "cg")
    expected = functools.partial if native.PURE_REQUESTED else compiled("trace_bind")
    assert _trace_records.bind is expected
    assert type(tracer.hook_before) is type(expected(max))
    assert type(tracer.hook_after) is type(expected(max))


def test_the_hooks_read_messages_as_getattr_reads_them(caplog: pytest.LogCaptureFixture) -> None:
    """The compiled hooks read a message's slots where their descriptors say, while its type is
    unchanged (``_speedups_slotread.h``): subclasses that override the attributes, a class changed
    after the first reads, an unset slot: what getattr answers, as the pure hooks read it."""
    from tests.unit.client.test_trace_hook import _scenario, _World

    class Renamed(MessageExt):
        __slots__ = ()
        topic = property(lambda self: "Renamed", lambda self, value: None)  # type: ignore[assignment]

    class Loud(MessageExt):
        __slots__ = ()

        def __getattribute__(self, name: str) -> Any:
            if name == "reconsume_times":
                return 9
            return super().__getattribute__(name)

    class Later(MessageExt):
        __slots__ = ()

    def msg(cls: type[MessageExt], uniq: str) -> MessageExt:
        return cls("T", b"", properties={UNIQ_KEY: uniq, KEYS: "k"}, reconsume_times=1)

    def script(w: _World) -> list[Any]:
        out = []
        for cls in (MessageExt, Renamed, Loud, Later, MessageExt, Later):
            for i in range(2):
                one = w.before([msg(cls, f"{cls.__name__}{i}")])
                out += [one, w.after(one, 1)]
        Later.reconsume_times = property(lambda self: 5, lambda self, value: None)  # type: ignore[assignment,method-assign]
        try:
            one = w.before([msg(Later, "changed")])
            out += [one, w.after(one, 1)]
        finally:
            del Later.reconsume_times
        one = w.before([msg(Later, "restored")])
        out += [one, w.after(one, 1)]
        unset = msg(MessageExt, "unset")
        del unset.properties
        out.append(w.before([unset]))  # AttributeError: logged, None
        return out

    _scenario(script, caplog)


def _counters() -> list[Callable[[int], Any]]:
    out: list[Callable[[int], Any]] = [itertools.count]
    if not native.PURE_REQUESTED:
        out.append(compiled("trace_counter"))
    return out


def test_trace_counter_counts_as_itertools_count() -> None:
    runs = []
    for new in _counters():
        c = new(7)
        top = new((1 << 64) - 2)  # past 2**64 - 1 it goes on as a Python int
        runs.append((iter(c) is c, [next(c) for _ in range(3)], list(itertools.islice(top, 4))))
    assert all(r == runs[0] for r in runs[1:])
    assert runs[0][2] == [(1 << 64) - 2, (1 << 64) - 1, 1 << 64, (1 << 64) + 1]
    if not native.PURE_REQUESTED:
        for bad in (-1, 1 << 64, 1.0):
            with pytest.raises(TypeError):
                compiled("trace_counter")(bad)


def test_the_hooks_take_numbers_from_either_counter(caplog: pytest.LogCaptureFixture) -> None:
    """The compiled hook advances a ``trace_counter`` itself: the same numbers, records and
    answers as with ``itertools.count``, up to and past 2**64 (numbers beyond 64 bits are
    refused: logged, no entry)."""
    from tests.unit.client.test_trace_hook import _scenario, _World

    for new in _counters():

        def script(w: _World, new: Callable[[int], Any] = new) -> list[Any]:
            w.counter = new((1 << 64) - 3)
            out = []
            for i in range(4):
                one = w.before([consumed_message("T", {UNIQ_KEY: f"N{i}"})])
                out += [one, w.after(one, 1) if one is not None else None]
            return out

        _scenario(script, caplog)
