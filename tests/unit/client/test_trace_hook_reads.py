"""The compiled trace hooks' shortcuts against their pure twins ``hook_before_py`` /
``hook_after_py`` / ``EntryBufferPy``: the dispatcher's ``_room`` / ``_wake_at`` kept while its
``vars`` dict keeps its version (``_speedups_tracehook.h``'s ``th_limits``), the count's successor
made directly (``th_count``), the bound hooks called as C (``_speedups_tracepack.h``'s
``trace_bind``) and the records' short copies (``te_copy``): the same answers, state, records and
logs where each shortcut applies and where it leaves the work to the general code. Also the
message's properties as the hooks read them (dicts of every shape a lookup must handle)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, cast

import pytest

from ariane.client._trace_dispatch import AsyncTraceDispatcher
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client._trace_records import sub_records_py
from ariane.common import native
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from tests.support.native import compiled
from tests.support.trace import consume_dispatcher
from tests.unit.client.fakes import consumed_message
from tests.unit.client.test_trace_hook import Twin, _both, _buffers, _scenario, _World


class _Key(str):
    """A key of a str subclass (equal to the name it spells)."""

    __slots__ = ()


class _Alias(str):
    """A key whose characters are not ``KEYS`` but which a lookup of ``KEYS`` finds."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(KEYS)

    def __eq__(self, other: object) -> bool:
        return other == KEYS or str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other


def _twin_of(w: _World) -> Twin:
    (twin,) = [t for t in _both() if t[0] is w._before]
    return twin


def _filler(n: int) -> dict[str, str]:
    return {f"P{i:02}": f"v{i}" for i in range(n)}


def test_the_properties_as_the_lookups_find_them(caplog: pytest.LogCaptureFixture) -> None:
    props: list[dict[Any, Any]] = [
        {UNIQ_KEY: "A", KEYS: "ka", MSG_REGION: "RA"},
        _filler(12) | {MSG_REGION: "R16", KEYS: "k16", UNIQ_KEY: "B16", TRACE_SWITCH: "true"},
        _filler(13) | {MSG_REGION: "R17", KEYS: "k17", UNIQ_KEY: "B17", TRACE_SWITCH: "x"},
        _filler(30) | {UNIQ_KEY: "BIG", KEYS: "kb", MSG_REGION: "RB"},
        {"TRACE_OX": "false", "UNIQ_KEZ": "no", "KEYZ": "no", "MSG_REGIOM": "no", UNIQ_KEY: "C"},
        {"K\u00c9YS": "no", "\u00e9" * 8: "no", UNIQ_KEY: "D", KEYS: "k\u00e9"},  # not ASCII
        {_Key(UNIQ_KEY): "SUB", _Key(KEYS): "ks"},
        {_Alias("XXXX"): "alias-keys", UNIQ_KEY: "E"},  # a lookup of KEYS finds the alias
        {TRACE_SWITCH: "false", UNIQ_KEY: "OFF"},  # untraced
        _filler(15) | {TRACE_SWITCH: "false"},  # untraced, its last item
        {KEYS: "only keys"},  # no UNIQ_KEY: the offset msgId
        {},
    ]

    def script(w: _World) -> list[Any]:
        out = []
        for i, p in enumerate(props):
            handle = w.before([consumed_message("T", dict(p), retries=i)])
            out += [handle, w.after(handle, 1) if handle is not None else None]
        return out

    _scenario(script, caplog)


def test_a_property_that_is_not_a_str(caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        out = []
        for p in (
            {MSG_REGION: 5, UNIQ_KEY: "F"},
            {TRACE_SWITCH: 0, UNIQ_KEY: "G"},
            {TRACE_SWITCH: b"false"},
        ):
            handle = w.before([consumed_message("T", dict(p))])  # the general path
            out += [handle, w.after(handle, 1)]
        return out

    _scenario(script, caplog, shapes=False)


def _set_room(dispatcher: AsyncTraceDispatcher, room: int) -> None:
    dispatcher._room = room  # specialized after a few calls (STORE_ATTR_WITH_HINT)


def _set_wake_at(dispatcher: AsyncTraceDispatcher, wake_at: int) -> None:
    dispatcher._wake_at = wake_at


def test_the_limits_follow_every_change_of_the_dispatcher(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(w: _World) -> list[Any]:
        out = []
        d = w.dispatcher
        for i in range(24):
            _set_room(d, 0 if i % 3 == 1 else 10_000)
            _set_wake_at(d, 1 if i % 4 == 0 else 1 << 62)
            handle = w.before([consumed_message("T", {UNIQ_KEY: f"L{i}"})])
            out += [handle, w.wakes, d._wake_at, len(w.entries), d.stats.discarded]
        vars(d)["_room"] = len(w.entries)  # a store into the dict itself: full
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "M"})]))
        vars(d).update(_room=10_000, _wake_at=len(w.entries) + 1)  # room, and a round's worth
        out += [w.before([consumed_message("T", {UNIQ_KEY: "N"})]), w.wakes, d._wake_at]
        del d._room  # gone: a failure, logged
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "O"})]))
        d._room = 10_000
        out.append(w.before([consumed_message("T", {UNIQ_KEY: "P"})]))
        other = _World(*_twin_of(w))  # another dispatcher's limits: its own
        other.dispatcher.group = d.group  # (as the scenario's log shows it)
        _set_room(other.dispatcher, 0)
        out += [other.before([consumed_message("T", {UNIQ_KEY: "Q"})]), len(other.entries)]
        out += [w.before([consumed_message("T", {UNIQ_KEY: "R"})]), len(w.entries)]
        return out

    _scenario(script, caplog)


@pytest.mark.parametrize(
    "start", [(1 << 63) - 3, True, -2, 1 << 64, 7, 0, (1 << 30) - 2, (1 << 30) - 1, 1 << 30]
)
def test_the_count_goes_on_past_63_bits(start: int, caplog: pytest.LogCaptureFixture) -> None:
    def script(w: _World) -> list[Any]:
        w.dispatcher.stats.appended = start
        out = []
        for i in range(3):
            handle = w.before([consumed_message("T", {UNIQ_KEY: f"C{i}"})])
            out += [w.after(handle, 1), w.dispatcher.stats.appended]
        return out

    _scenario(script, caplog)
    for twin in _both():
        world = _World(*twin)
        world.dispatcher.stats.appended = start
        handle = world.before([consumed_message("T", {UNIQ_KEY: "C"})])
        world.after(handle, 1)
        assert world.dispatcher.stats.appended == start + 2
        assert type(world.dispatcher.stats.appended) is int


def test_the_records_of_every_short_length() -> None:
    """Pieces of 0 to 40 bytes (the copies change strategy at 4, 8, 16 and 32), ASCII and not."""
    for n in range(41):
        for ch in ("a", "\u00e9", "\U0001f600"):
            text, p = ch * n, 10 ** (n % 19)
            calls = [
                (
                    (1_765_000_000_123_456_789 + n, text or "R", n, "T", text, p, text or None),
                    (1_765_000_000_123_456_789 + p, n, bool(n % 2), n),
                ),
                ((p, "r" * n or "R", 1 << 40, "T", "m" * n, -(n + 1), "k" * n), None),
            ]
            group = ("g" + text)[: max(n, 1)]
            reference = sub_records_py(
                [((b[0], b[1], b[2], b[3], ((b[4], b[5], b[6]),)), e) for b, e in calls],
                group,
                "PFX",
                True,
                1 << 20,
                1 << 20,
            )
            for new in _buffers():
                buf = new()
                for begun, end in calls:
                    handle = buf.add(*begun)
                    if end is not None:
                        buf.end(handle, *end)
                assert buf.take(group, "PFX", 1 << 20, 1 << 20) == reference, (n, ch, new)


@pytest.mark.skipif(native.PURE_REQUESTED, reason="the compiled bind and hooks")
def test_a_bound_hook_answers_as_its_partial() -> None:
    """``trace_bind`` calls the hooks as C (no builtin call around them): the same answers and
    errors as ``functools.partial`` of the builtins, keywords and wrong counts included."""
    seen = []
    for bind in (functools.partial, compiled("trace_bind")):
        out = []
        for name in ("trace_hook_before", "trace_hook_after"):
            hook = compiled(name)
            for call in (lambda h: h(3), lambda h: h(3, x=4), lambda h: h(*range(12))):
                try:
                    out.append(("ok", call(bind(hook, 1, 2))))
                except TypeError as exc:
                    out.append(("TypeError", str(exc)))
        dispatcher = consume_dispatcher()
        tracer = ConsumeTracer(dispatcher, "cg")
        before = bind(compiled("trace_hook_before"), *cast(Any, tracer.hook_before).args)
        after = bind(compiled("trace_hook_after"), *cast(Any, tracer.hook_after).args)
        handle = before([consumed_message("T", {UNIQ_KEY: "B"})])
        out += [
            handle,
            after(handle, 1),
            dataclasses.asdict(dispatcher.stats),
            len(tracer.entries or ()),
        ]
        seen.append(out)
    assert seen[0] == seen[1]
    assert seen[0][:2] == [
        (
            "TypeError",
            "trace_hook_before() takes 11 arguments (entries: TraceEntries, attrs: a dict)",
        ),
        ("TypeError", "ariane._speedups.trace_hook_before() takes no keyword arguments"),
    ]
