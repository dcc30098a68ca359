"""The SubBefore and SubAfter records of many listener calls at once (the dispatcher worker's
side of ``ConsumeTracer``; RocketMQ ``TraceDataEncoder.encoderFromContextBean`` for
``SubBefore``/``SubAfter``).

How it works: ``sub_records`` takes the listener calls of a round, each as the values its
``before`` hook read and, once the call ended, what its ``after`` hook read, and writes the
records byte for byte as ``ariane.common.trace.sub_before_record`` / ``sub_after_record``
write them (the values come from stored messages' properties, which were split on the record
separators, so they are not re-checked). Records are cut into items of about a quarter of a
trace message (``item_chars`` characters or ``item_key_chars`` characters of index keys, checked
after each call), each with its index keys (msgId, then KEYS when set, per message).

``sub_pairs`` does the same for the open pairs the dispatcher's worker takes (claiming
them), so the worker builds no call tuples. ``sub_records_py`` and ``sub_pairs_py`` are the
references; ``sub_records`` and ``sub_pairs`` are the compiled twins (``ariane._speedups``,
``_speedups_trace.h``) when built, falling back to the reference for any input they do not
handle (they answer ``None``).

``hook_before`` and ``hook_after`` are the consume service's calls (``ConsumeTracer.hook_before``
/ ``hook_after`` bind their first arguments): what ``sub_before`` reads, added as one compact
entry to the tracer's entry buffer (``EntryBufferPy``, or the compiled ``TraceEntries``) with
the dispatcher's accounting, and the usual end recorded in it; the dispatcher's worker has the
buffer write the records of a round in one call: whole trace messages (``pack``: each body's
UTF-8 and its KEYS, what ``_trace_dispatch.pack`` makes of ``take``'s items, without the items,
their joins and the second encoding), or the items (``take``) when other records are queued.
``bind`` (``functools.partial``) and ``new_counter`` (``itertools.count``) are compiled too when
built: the bound hooks' arguments on the C stack, the request numbers without an int each. Compiled
(``_speedups_tracehook.h``) so that no Python frame and no per-delivery container (an open pair
and its 7-tuple before) is made per delivery; ``hook_before_py`` / ``hook_after_py`` /
``EntryBufferPy`` the references.

``sub_before`` is the hook side (``ConsumeTracer.before`` of a one-message call: the open pair
of its SubBefore); it is the compiled function itself when built (no Python frame per
delivery), else ``sub_before_py``; both answer ``NotImplemented`` for what the caller's general
path handles.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from types import NotImplementedType
from typing import Any, Protocol

from ariane.client._trace_dispatch import _NEVER, pack
from ariane.common import native
from ariane.common.message import MessageExt
from ariane.common.properties import KEYS, MSG_REGION, TRACE_SWITCH, UNIQ_KEY
from ariane.common.trace import JAVA_NULL, ConsumeReturnType

__all__ = [
    "AfterData",
    "BeforeData",
    "Call",
    "EntryBuffer",
    "EntryBufferPy",
    "OneData",
    "Packed",
    "bind",
    "call_data",
    "hook_after",
    "hook_after_py",
    "hook_before",
    "hook_before_py",
    "new_counter",
    "new_entries",
    "sub_after",
    "sub_after_py",
    "sub_before",
    "sub_before_py",
    "sub_pairs",
    "sub_pairs_py",
    "sub_records",
    "sub_records_py",
]

#: ``(msgId, retry times, KEYS or None)`` per traced message of a call.
Entries = tuple[tuple[str, int, str | None], ...]
#: What ``before`` read: (start ns, region, request number, topic, entries).
BeforeData = tuple[int, str, int, str, Entries]
#: What ``after`` read: (end ns, messages, success, result code); the cost per message is
#: (end - start) in ms divided by the messages. The usual end (one message, success,
#: ``SUCCESS``) is its end ns alone, an ``int``: one object fewer per delivery for the
#: garbage collector.
AfterData = tuple[int, int, bool, ConsumeReturnType] | int
#: The before data of a call with one traced message, flat (fewer objects per delivery: the
#: garbage collector runs per allocated container): (start ns, region, request number, topic,
#: msgId, retry times, KEYS or None).
OneData = tuple[int, str, int, str, str, int, str | None]
#: One listener call: its before data and its after data (None: still running).
Call = tuple[BeforeData, AfterData | None]
#: (traced topic, records, how many, index keys): ``_trace_dispatch.EncodedTrace``.
Item = tuple[str, str, int, tuple[str, ...]]
#: A whole trace message: (its body's UTF-8, records, KEYS).
Packed = tuple[bytes, int, str]

_HEX2 = [f"{i:02X}" for i in range(256)]
_SUCCESS = ConsumeReturnType.SUCCESS


def sub_records_py(
    calls: list[Call],
    group: str,
    request_prefix: str,
    sub_before: bool,
    item_chars: int,
    item_key_chars: int,
) -> list[Item]:
    """The records of ``calls`` (their SubBefore records unless ``sub_before`` is false,
    their SubAfter records when the call ended); the request id of a call is
    ``request_prefix`` + its number as 16 upper-case hex digits."""
    out: list[Item] = []
    texts: list[str] = []
    index: list[str] = []
    size = key_size = 0
    topic = ""
    # the parts shared by neighbouring calls (same millisecond, region, outcome) are
    # formatted once: formatting numbers is most of a record's cost
    head = tail = end = base = region_of = ""
    block = head_ms = cost_of = end_ms = -1
    ok_of: bool | None = None
    code_of: ConsumeReturnType | None = None
    for (began_ns, region, number, topic, entries), after in calls:
        if number >> 8 != block:
            block = number >> 8
            base = f"{request_prefix}{block:014X}"
        rid = base + _HEX2[number & 0xFF]
        began = began_ns // 1_000_000
        if sub_before and (began != head_ms or region != region_of):
            head_ms, region_of = began, region
            head = f"SubBefore\x01{began}\x01{region}\x01{group}\x01"
        if after is not None:
            if isinstance(after, int):
                now_ns, count, success, outcome = after, 1, True, _SUCCESS
            else:
                now_ns, count, success, outcome = after
            now = now_ns // 1_000_000
            cost = (now - began) // (count if count > 0 else 1)
            if cost < 0:
                cost = 0
            if cost != cost_of or success is not ok_of:
                cost_of, ok_of = cost, success
                tail = f"\x01{cost}\x01{'true' if success else 'false'}\x01"
            if now != end_ms or outcome is not code_of:
                end_ms, code_of = now, outcome
                end = f"\x01{int(outcome)}\x01{now}\x01{group}\x02"
        for msg_id, retries, text in entries:
            keys = text or JAVA_NULL
            if sub_before:
                record = f"{head}{rid}\x01{msg_id}\x01{retries}\x01{keys}\x02"
                texts.append(record)
                size += len(record)
            if after is not None:
                record = f"SubAfter\x01{rid}\x01{msg_id}{tail}{keys}{end}"
                texts.append(record)
                size += len(record)
            index.append(msg_id)
            key_size += len(msg_id) + 1
            if text:
                index.append(text)
                key_size += len(text) + 1
        if key_size >= item_key_chars or size >= item_chars:
            out.append((topic, "".join(texts), len(texts), tuple(index)))
            texts, index, size, key_size = [], [], 0, 0
    if texts:
        out.append((topic, "".join(texts), len(texts), tuple(index)))
    return out


def call_data(data: BeforeData | OneData) -> BeforeData:
    """``data`` as ``BeforeData`` (a ``OneData`` has one entry)."""
    if len(data) == 7:
        began_ns, region, number, topic, msg_id, retries, keys = data
        return (began_ns, region, number, topic, ((msg_id, retries, keys),))
    return data


def sub_pairs_py(
    pairs: list[list[Any]],
    group: str,
    request_prefix: str,
    taken: object,
    item_chars: int,
    item_key_chars: int,
) -> list[Item]:
    """The records of open pairs (``_trace_dispatch.OpenTrace``: ``[owner, BeforeData or
    OneData]`` then what ``attach`` appended), SubBefore and, when the call ended, SubAfter:
    each pair is claimed (``taken`` appended: its after data is what was appended first,
    unless that is ``taken``), then written as ``sub_records_py`` writes calls."""
    calls: list[Call] = []
    for pair in pairs:
        pair.append(taken)
        after = pair[2]
        calls.append((call_data(pair[1]), None if after is taken else after))
    return sub_records_py(calls, group, request_prefix, True, item_chars, item_key_chars)


_compiled: Callable[..., list[Item] | None] | None = getattr(
    native.speedups, "sub_records", None
)  # absent: the pure build, or a stale compiled one
_compiled_pairs: Callable[..., list[Item] | None] | None = getattr(
    native.speedups, "sub_pairs", None
)


def sub_records(
    calls: list[Call],
    group: str,
    request_prefix: str,
    sub_before: bool,
    item_chars: int,
    item_key_chars: int,
) -> list[Item]:
    """``sub_records_py``, compiled when built."""
    if _compiled is not None:
        out: Any = _compiled(calls, group, request_prefix, sub_before, item_chars, item_key_chars)
        if out is not None:
            return out  # type: ignore[no-any-return]
    return sub_records_py(calls, group, request_prefix, sub_before, item_chars, item_key_chars)


def sub_pairs(
    pairs: list[list[Any]],
    group: str,
    request_prefix: str,
    taken: object,
    item_chars: int,
    item_key_chars: int,
) -> list[Item]:
    """``sub_pairs_py``, compiled when built (a pair claimed twice keeps its first claim, so
    the reference may redo a round the compiled twin gave up on)."""
    if _compiled_pairs is not None:
        out: Any = _compiled_pairs(pairs, group, request_prefix, taken, item_chars, item_key_chars)
        if out is not None:
            return out  # type: ignore[no-any-return]
    return sub_pairs_py(pairs, group, request_prefix, taken, item_chars, item_key_chars)


def sub_before_py(
    owner: object,
    msgs: Sequence[MessageExt],
    trace_topic: str,
    now_ns: Callable[[], int],
    counter: Iterator[int],
    default_region: str,
) -> list[Any] | NotImplementedType | None:
    """The open pair ``[owner, OneData]`` of a listener call of one message (its time from
    ``now_ns()``, its request number from ``counter``); ``None`` when that message is not
    traced (the storing broker's ``TRACE_ON=false``, or a topic starting with
    ``trace_topic``); ``NotImplemented`` when ``msgs`` is not one message (the caller's
    general path)."""
    if len(msgs) != 1:
        return NotImplemented  # type: ignore[no-any-return]  # typeshed: a subclass of Any
    msg = msgs[0]
    p = msg.properties
    topic = msg.topic
    if p.get(TRACE_SWITCH) == "false" or topic.startswith(trace_topic):
        return None
    return [
        owner,
        (
            now_ns(),
            p.get(MSG_REGION) or default_region,
            next(counter),
            topic,
            p.get(UNIQ_KEY) or msg.offset_msg_id,
            msg.reconsume_times,
            p.get(KEYS),
        ),
    ]  # flat (OneData): two containers per delivery for the garbage collector


def sub_after_py(
    pair: list[Any],
    count: int,
    success: bool,
    outcome: object,
    now_ns: Callable[[], int],
    usual: object,
) -> Any:
    """Append the end of the listener call ``pair`` opened: ``now_ns()`` alone for the usual
    end (one message, success, ``outcome is usual``), else ``(now, count, success,
    outcome)``. ``None`` when it is the pair's first append (the worker writes both
    records); else that end (the worker took the pair first: the caller ships the SubAfter)."""
    now = now_ns()
    done = now if count == 1 and success and outcome is usual else (now, count, success, outcome)
    pair.append(done)
    return None if pair[2] is done else done


#: ``sub_after_py``, or its compiled twin
sub_after: Callable[[list[Any], int, bool, object, Callable[[], int], object], Any] = (
    getattr(native.speedups, "sub_after", None) or sub_after_py
)

#: ``sub_before_py``, or its compiled twin (which also answers ``NotImplemented`` for values
#: that are not exact ``str``/``dict``, before calling ``now_ns`` or ``counter``)
sub_before: Callable[
    [object, Sequence[MessageExt], str, Callable[[], int], Iterator[int], str],
    list[Any] | NotImplementedType | None,
] = getattr(native.speedups, "sub_before", None) or sub_before_py


_U64 = 1 << 64
_I64 = 1 << 63
#: entry states (``EntryBufferPy``): running, running with its SubBefore written, ended, ended
#: with its SubBefore written
_CAPTURED, _OPEN, _SENT, _ENDED, _ENDED_SENT = -1, 0, 1, 2, 3


def _ns(x: Any) -> int:
    """``x`` when it is an exact int in [0, 2**63) (a time in ns), else ``TypeError``."""
    if x.__class__ is not int or not 0 <= x < _I64:
        raise TypeError("not a time in ns")
    return x


def _u64(x: Any) -> int:
    if x.__class__ is not int or not 0 <= x < _U64:
        raise TypeError("not an int in [0, 2**64)")
    return x


def _i64(x: Any) -> int:
    if x.__class__ is not int or not -_I64 <= x < _I64:
        raise TypeError("not a 64-bit int")
    return x


def _text_ok(s: Any) -> bool:
    """An exact str with a UTF-8 form (no lone surrogates)."""
    if s.__class__ is not str:
        return False
    if s.isascii():
        return True
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


class EntryBufferPy:
    """The consume hooks' entries (twin of the compiled ``TraceEntries``,
    ``_speedups_tracehook.h``): per listener call of one traced message, what ``before`` read
    (start ns, region, request number, topic, msgId, retry times, KEYS or None) and, once the
    call ended, (end ns, messages, success, result code); no open pair per delivery. ``add``
    answers the entry's handle (its sequence number), which the end hook passes to ``end``;
    the dispatcher's worker has ``take`` write the records of every pending entry in one call
    (SubBefore, and SubAfter when the call ended, as ``sub_records_py`` writes them, cut into
    items as it cuts them); an entry whose call still runs stays with its SubBefore written,
    and its SubAfter goes in a later round. ``capture`` records what a SubBefore reads of a
    message not delivered yet (the pull answer's list, read in one loop): a captured entry has
    no records to write (``take`` leaves it) until ``end`` gives its start and end at once
    (answer 2), or ``cancel`` drops it (never delivered). ``len``: the entries with records to
    write; ``captured()``: the captured ones. Any thread (a lock here; the GIL in the compiled
    twin)."""

    __slots__ = ("_by_seq", "_captured", "_entries", "_lock", "_next", "_pending")

    def __init__(self) -> None:
        #: [seq, state, began ns, region, number, topic, msgId, retries, keys, end ns, count,
        #: success, code] in handle order
        self._entries: list[list[Any]] = []
        self._by_seq: dict[int, list[Any]] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._pending = 0
        self._captured = 0

    def __len__(self) -> int:
        return self._pending

    def captured(self) -> int:
        """The captured entries not started yet."""
        return self._captured

    def add(
        self,
        began_ns: int,
        region: str,
        number: int,
        topic: str,
        msg_id: str,
        retries: int,
        keys: str | None,
    ) -> int:
        """Record a listener call's SubBefore values; its handle."""
        _ns(began_ns)
        return self._push(_OPEN, began_ns, region, number, topic, msg_id, retries, keys)

    def capture(
        self, region: str, number: int, topic: str, msg_id: str, retries: int, keys: str | None
    ) -> int:
        """Record what a SubBefore of a message not delivered yet reads; its handle (the entry
        has no start time and nothing to write until ``end`` gives it one)."""
        return self._push(_CAPTURED, 0, region, number, topic, msg_id, retries, keys)

    def _push(
        self,
        state: int,
        began_ns: int,
        region: str,
        number: int,
        topic: str,
        msg_id: str,
        retries: int,
        keys: str | None,
    ) -> int:
        """Check the values (as ``add`` and ``capture`` promise) and add the entry."""
        _u64(number)
        _i64(retries)
        if not all(map(_text_ok, (region, topic, msg_id))) or not (keys is None or _text_ok(keys)):
            raise TypeError("not a str with a UTF-8 form")
        with self._lock:
            seq = self._next
            self._next += 1
            entry = [
                seq,
                state,
                began_ns,
                region,
                number,
                topic,
                msg_id,
                retries,
                keys,
                0,
                0,
                False,
                0,
            ]
            self._entries.append(entry)
            self._by_seq[seq] = entry
            if state == _CAPTURED:
                self._captured += 1
            else:
                self._pending += 1
        return seq

    def cancel(self, handle: int) -> bool:
        """Drop the captured entry ``handle`` (its message was never delivered); ``False``
        when there is none (unknown, or started)."""
        _u64(handle)
        with self._lock:
            entry = self._by_seq.get(handle)
            if entry is None or entry[1] != _CAPTURED:
                return False
            del self._by_seq[handle]
            self._entries.remove(entry)
            self._captured -= 1
            return True

    def end(
        self,
        handle: int,
        now_ns: int,
        count: int,
        success: bool,
        code: int,
        began_ns: int | None = None,
    ) -> int:
        """The end of the call ``handle``: 0 (recorded), 1 (its SubBefore was already written:
        pending again), 2 (a captured entry, started at ``began_ns``: both records pending),
        -1 (unknown handle, already ended, or ``began_ns`` given for an entry not captured or
        not given for a captured one)."""
        _u64(handle)
        _ns(now_ns)
        _i64(count)
        ok = bool(success)
        _i64(code)
        began = -1 if began_ns is None else _ns(began_ns)
        with self._lock:
            entry = self._by_seq.get(handle)
            if entry is None or entry[1] >= _ENDED or (entry[1] == _CAPTURED) != (began >= 0):
                return -1
            entry[9:13] = [now_ns, count, ok, code]
            if entry[1] == _CAPTURED:
                entry[1] = _ENDED
                entry[2] = began
                self._captured -= 1
                self._pending += 1
                return 2
            if entry[1] == _SENT:
                entry[1] = _ENDED_SENT
                self._pending += 1
                return 1
            entry[1] = _ENDED
            return 0

    def clear(self) -> int:
        """Drop every entry; how many had records to write."""
        with self._lock:
            pending, self._pending, self._captured = self._pending, 0, 0
            self._entries, self._by_seq = [], {}
        return pending

    def take(
        self, group: str, request_prefix: str, item_chars: int, item_key_chars: int
    ) -> list[Item]:
        """The records of the pending entries (see the class)."""
        _take_args(group, request_prefix, item_chars, item_key_chars)
        _prefix_ok(request_prefix)
        with self._lock:
            written = self._move()
        return _write(written, group, request_prefix, item_chars, item_key_chars)

    def pack(
        self,
        group: str,
        request_prefix: str,
        item_chars: int,
        item_key_chars: int,
        max_chars: int,
        max_key_chars: int,
    ) -> list[Packed] | None:
        """The trace messages of the pending entries: ``take``'s items packed as
        ``_trace_dispatch.pack(items, max_chars, max_key_chars)`` packs them, each as (its
        body's UTF-8, records, KEYS); ``None`` (nothing taken) when a pending entry's keys
        (msgId and KEYS, each with its separator) pass ``max_key_chars - max(item_key_chars,
        0)``: an item could then pass ``max_key_chars``, which ``pack`` cuts differently."""
        _take_args(group, request_prefix, item_chars, item_key_chars)
        _i64(max_chars)
        _i64(max_key_chars)
        _prefix_ok(request_prefix)
        limit = max_key_chars - max(item_key_chars, 0)
        with self._lock:
            for entry in self._entries:
                keys = entry[8]
                chars = len(entry[6]) + 1 + (len(keys) + 1 if keys else 0)
                if entry[1] not in (_SENT, _CAPTURED) and chars > limit:
                    return None
            written = self._move()
        items = _write(written, group, request_prefix, item_chars, item_key_chars)
        return [(_utf8(p.data), p.records, p.keys) for p in pack(items, max_chars, max_key_chars)]

    def _move(self) -> list[list[Any]]:
        """Move the pending entries out (copies; the running ones stay, their SubBefore
        taken; the captured ones stay as they are); under the lock."""
        kept: list[list[Any]] = []
        written: list[list[Any]] = []
        for entry in self._entries:
            state = entry[1]
            if state in (_SENT, _CAPTURED):
                kept.append(entry)
                continue
            written.append(entry[:])
            if state == _OPEN:
                entry[1] = _SENT
                kept.append(entry)
            else:
                del self._by_seq[entry[0]]
        self._entries = kept
        self._pending = 0
        return written


def _utf8(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


def _take_args(group: Any, request_prefix: Any, item_chars: Any, item_key_chars: Any) -> None:
    if group.__class__ is not str or request_prefix.__class__ is not str:
        raise TypeError("not a str")
    _i64(item_chars)
    _i64(item_key_chars)


def _prefix_ok(request_prefix: str) -> None:
    if len(request_prefix) > 16 or not request_prefix.isascii():
        raise ValueError("request_prefix: at most 16 ASCII characters")


def _write(
    written: list[list[Any]], group: str, request_prefix: str, item_chars: int, item_key_chars: int
) -> list[Item]:
    """The records of the entries ``EntryBufferPy`` moved out, cut into items."""
    out: list[Item] = []
    texts: list[str] = []
    index: list[str] = []
    size = key_size = 0
    topic = ""
    for (_seq, state, began_ns, region, number, topic, msg_id, retries, text, end_ns,
         count, success, code) in written:  # fmt: skip
        rid = f"{request_prefix}{number:016X}"
        began = began_ns // 1_000_000
        keys = text or JAVA_NULL
        if state in (_OPEN, _ENDED):
            record = (
                f"SubBefore\x01{began}\x01{region}\x01{group}\x01{rid}\x01{msg_id}\x01"
                f"{retries}\x01{keys}\x02"
            )
            texts.append(record)
            size += len(record)
        if state >= _ENDED:
            now = end_ns // 1_000_000
            cost = max((now - began) // (count if count > 0 else 1), 0)
            record = (
                f"SubAfter\x01{rid}\x01{msg_id}\x01{cost}\x01{'true' if success else 'false'}"
                f"\x01{keys}\x01{code}\x01{now}\x01{group}\x02"
            )
            texts.append(record)
            size += len(record)
        index.append(msg_id)
        key_size += len(msg_id) + 1
        if text:
            index.append(text)
            key_size += len(text) + 1
        if key_size >= item_key_chars or size >= item_chars:
            out.append((topic, "".join(texts), len(texts), tuple(index)))
            texts, index, size, key_size = [], [], 0, 0
    if texts:
        out.append((topic, "".join(texts), len(texts), tuple(index)))
    return out


class EntryBuffer(Protocol):
    """``EntryBufferPy`` or the compiled ``TraceEntries``."""

    def __len__(self) -> int: ...

    def add(
        self,
        began_ns: int,
        region: str,
        number: int,
        topic: str,
        msg_id: str,
        retries: int,
        keys: str | None,
    ) -> int: ...

    def capture(
        self, region: str, number: int, topic: str, msg_id: str, retries: int, keys: str | None
    ) -> int: ...

    def end(
        self,
        handle: int,
        now_ns: int,
        count: int,
        success: bool,
        code: int,
        began_ns: int | None = None,
    ) -> int: ...

    def cancel(self, handle: int) -> bool: ...

    def captured(self) -> int: ...

    def clear(self) -> int: ...

    def take(
        self, group: str, request_prefix: str, item_chars: int, item_key_chars: int
    ) -> list[Item]: ...

    def pack(
        self,
        group: str,
        request_prefix: str,
        item_chars: int,
        item_key_chars: int,
        max_chars: int,
        max_key_chars: int,
    ) -> list[Packed] | None: ...


_new_entries_c: Callable[[], EntryBuffer] | None = getattr(native.speedups, "trace_entries", None)


def new_entries() -> EntryBuffer:
    """A new entry buffer: the compiled ``TraceEntries`` when built, else ``EntryBufferPy``."""
    return _new_entries_c() if _new_entries_c is not None else EntryBufferPy()


def hook_before_py(
    owner: Any,
    trace_topic: str,
    now_ns: Callable[[], int],
    counter: Iterator[int],
    default_region: str,
    dispatcher: Any,
    queue: Any,
    entries: EntryBuffer,
    attrs: dict[str, Any],
    stats: Any,
    msgs: Sequence[MessageExt],
) -> int | list[Any] | None:
    """``ConsumeTracer.before(msgs)`` for the usual call, into ``entries``: what
    ``sub_before_py`` reads, then the clock and the counter; when the queued items and pending
    entries reach ``attrs["_room"]`` (``vars(dispatcher)``) ``dispatcher._drop(None)`` and
    ``None``, else the entry is added (its handle answered), counted in ``stats.appended``, and
    the worker woken as ``_enqueue`` wakes it (``_wake_at``). ``owner.before(msgs)`` for what
    the buffer does not hold (not one message, values that are not exact ``str``/``dict``/``int``
    or a str without a UTF-8 form); ``None`` for untraced messages; an ``Exception`` goes to
    ``owner.hook_failed`` (logged, ``None``)."""
    try:
        if (
            msgs.__class__ is not list
            or len(msgs) != 1
            or trace_topic.__class__ is not str
            or default_region.__class__ is not str
        ):
            return owner.before(msgs)  # type: ignore[no-any-return]
        read = _read_usual(trace_topic, default_region, msgs[0])
        if read is None:
            return None
        if read is NotImplemented:
            return owner.before(msgs)  # type: ignore[no-any-return]
        region, topic, msg_id, retries, keys = read
        began = _ns(now_ns())
        number = _u64(next(counter))
        if len(queue) + len(entries) >= attrs["_room"]:  # full, or closed
            dispatcher._drop(None)
            return None
        handle = entries.add(began, region, number, topic, msg_id, retries, keys)
        stats.appended += 1
        if len(queue) + len(entries) >= attrs["_wake_at"]:
            attrs["_wake_at"] = _NEVER
            dispatcher._notify()
        return handle
    except Exception as exc:
        return owner.hook_failed("SubBefore", exc)  # type: ignore[no-any-return]


def hook_after_py(
    owner: Any,
    now_ns: Callable[[], int],
    usual: object,
    stats: Any,
    entries: EntryBuffer,
    before: int | list[Any],
    count: int,
) -> None:
    """``ConsumeTracer.after(before, count, True, usual)``. An entry's handle: its end recorded
    in ``entries`` (``end``) and counted in ``stats``; ``owner.entry_late(answer)`` when the
    entry's SubBefore was already written (1) or it is unknown (-1). An open pair (the general
    path's): its end appended (``sub_after_py``) and counted; when the worker took the pair
    first, ``owner.after_late`` ships the SubAfter. An ``Exception`` goes to
    ``owner.hook_failed``."""
    try:
        if before.__class__ is int:
            handle = _u64(before)
            _i64(count)
            answer = entries.end(handle, _ns(now_ns()), count, True, 0)
            if answer == 0:
                stats.appended += 1
            else:
                owner.entry_late(answer)
            return
        done = sub_after_py(before, count, True, usual, now_ns, usual)  # type: ignore[arg-type]
        if done is None:
            stats.appended += 1
        else:
            owner.after_late(before, done)
    except Exception as exc:
        owner.hook_failed("SubAfter", exc)


def hook_capture_py(
    owner: Any,
    trace_topic: str,
    counter: Iterator[int],
    default_region: str,
    entries: EntryBuffer,
    chunks: list[list[MessageExt]],
) -> list[int | NotImplementedType | None]:
    """The SubBefore reading of ``hook_before_py`` for every chunk of a pulled list in one
    loop, before any is delivered: per chunk the handle of a captured entry (``entries.capture``:
    read and numbered, no start time, nothing to write until ``hook_end_py`` ends it or
    ``entries.cancel`` drops it), ``None`` (not traced) or ``NotImplemented`` (``hook_before``
    at the delivery: not one message, unusual values, or a failure, which ``owner.hook_failed``
    logs once)."""
    out: list[int | NotImplementedType | None] = []
    usual = trace_topic.__class__ is str and default_region.__class__ is str
    for chunk in chunks:
        if not usual or chunk.__class__ is not list or len(chunk) != 1:
            out.append(NotImplemented)
            continue
        try:
            out.append(_capture_one(trace_topic, counter, default_region, entries, chunk[0]))
        except Exception as exc:
            owner.hook_failed("SubBefore", exc)
            out.extend([NotImplemented] * (len(chunks) - len(out)))
            break
    return out


def _capture_one(
    trace_topic: str,
    counter: Iterator[int],
    default_region: str,
    entries: EntryBuffer,
    msg: MessageExt,
) -> int | NotImplementedType | None:
    read = _read_usual(trace_topic, default_region, msg)
    if read is None or read is NotImplemented:
        return read
    region, topic, msg_id, retries, keys = read
    return entries.capture(region, _u64(next(counter)), topic, msg_id, retries, keys)


def _read_usual(
    trace_topic: str, default_region: str, msg: MessageExt
) -> tuple[str, str, str, int, str | None] | NotImplementedType | None:
    """What a SubBefore entry holds of ``msg`` (region, topic, msgId, retries, keys), ``None``
    for a message not traced (``TRACE_ON=false``, the trace topic itself), ``NotImplemented``
    for what the entry buffer does not hold (values that are not exact ``str``/``dict``/``int``,
    a str without a UTF-8 form, retries past 64 bits)."""
    p = msg.properties
    topic = msg.topic
    if p.__class__ is not dict or topic.__class__ is not str:
        return NotImplemented  # type: ignore[no-any-return]  # typeshed: a subclass of Any
    switch, region, uniq, keys = (
        p.get(TRACE_SWITCH), p.get(MSG_REGION), p.get(UNIQ_KEY), p.get(KEYS)
    )  # fmt: skip
    if any(v is not None and v.__class__ is not str for v in (switch, region, uniq, keys)):
        return NotImplemented  # type: ignore[no-any-return]  # typeshed: a subclass of Any
    if switch == "false" or topic.startswith(trace_topic):
        return None
    region = region or default_region
    msg_id = uniq or msg.offset_msg_id
    retries = msg.reconsume_times
    if (
        retries.__class__ is not int
        or not all(map(_text_ok, (region, topic, msg_id)))
        or (keys is not None and not _text_ok(keys))
        or not -_I64 <= retries < _I64
    ):
        return NotImplemented  # type: ignore[no-any-return]  # typeshed: a subclass of Any
    return region, topic, msg_id, retries, keys


def hook_end_py(
    owner: Any,
    now_ns: Callable[[], int],
    stats: Any,
    entries: EntryBuffer,
    dispatcher: Any,
    queue: Any,
    attrs: dict[str, Any],
    handle: int,
    count: int,
    began_ns: int,
) -> None:
    """The usual end (success) of the captured entry ``handle``, whose call started at
    ``began_ns``: what ``hook_before_py`` and ``hook_after_py`` did for its records, at once.
    When the queued items and pending entries reach ``attrs["_room"]`` the entry is dropped and
    ``dispatcher._drop(None)``; else both records are pending (``entries.end``), counted
    (``stats.appended += 2``) and the worker woken as ``_enqueue`` wakes it. An unknown handle
    (the buffer was cleared): ``owner.entry_late(-1)``. An ``Exception`` goes to
    ``owner.hook_failed`` (the entry dropped)."""
    try:
        handle = _u64(handle)
    except Exception as exc:
        owner.hook_failed("SubAfter", exc)
        return
    try:
        _i64(count)
        began = _ns(began_ns)
        now = _ns(now_ns())
        if len(queue) + len(entries) >= attrs["_room"]:  # full, or closed
            if entries.cancel(handle):
                dispatcher._drop(None)
            else:
                owner.entry_late(-1)
            return
        if entries.end(handle, now, count, True, 0, began) != 2:
            owner.entry_late(-1)
            return
        stats.appended += 2
        if len(queue) + len(entries) >= attrs["_wake_at"]:
            attrs["_wake_at"] = _NEVER
            dispatcher._notify()
    except Exception as exc:
        entries.cancel(handle)  # no record of a call whose end failed
        owner.hook_failed("SubAfter", exc)


#: the compiled hooks of this version (they take an entry buffer): a stale build's hooks of the
#: same names took the queue's append, so they are used only next to ``trace_entries``
_hooks = native.speedups if _new_entries_c is not None else None
#: ``hook_before_py``, or its compiled twin
hook_before: Callable[..., int | list[Any] | None] = (
    getattr(_hooks, "trace_hook_before", None) or hook_before_py
)
#: ``hook_after_py``, or its compiled twin
hook_after: Callable[..., None] = getattr(_hooks, "trace_hook_after", None) or hook_after_py
#: ``hook_capture_py``, or its compiled twin
hook_capture: Callable[..., list[int | NotImplementedType | None]] = (
    getattr(_hooks, "trace_hook_capture", None) or hook_capture_py
)
#: ``hook_end_py``, or its compiled twin
hook_end: Callable[..., None] = getattr(_hooks, "trace_hook_end", None) or hook_end_py
#: ``functools.partial``, or its compiled twin (``trace_bind``: the hooks' bound arguments laid
#: out on the C stack, where a partial allocates a stack per call of more than five arguments)
bind: Callable[..., Callable[..., Any]] = getattr(_hooks, "trace_bind", None) or functools.partial
#: ``itertools.count(start)``, or its compiled twin (``trace_counter``: the compiled hook takes
#: its numbers without an int each)
new_counter: Callable[[int], Iterator[int]] = (
    getattr(_hooks, "trace_counter", None) or itertools.count
)
