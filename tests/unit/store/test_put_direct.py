"""``MessageStore.put_message`` served in C (``_speedups_storeput.h`` via
``store/put_direct.py``) next to the Python method it falls back to: the same results, records,
queues and failure counts; no Python frame for a common ASYNC_FLUSH put; the C path open
exactly while the store would put at once (running, writeable, not a replica, ASYNC_FLUSH).
The agreement and gate tests run in both builds (``ARIANE_PURE=1`` too). ``new_inner``
(``store/put_native.py``) against the class it stands for, in both builds."""

from __future__ import annotations

import gc
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common.clock import ManualClock, SystemClock
from ariane.store.config import FlushDiskType
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.put_direct import method
from ariane.store.put_native import new_inner
from ariane.store.put_run import store_put_run
from ariane.store.results import PutResult, PutStatus
from tests.unit.store.helpers import BORN, HOST, small_config

compiled = pytest.mark.skipif(method is None, reason="pure build")


class _FailingClock(ManualClock):
    """A clock whose reading fails with an OSError while ``failing`` is set."""

    failing = False

    def now_ms(self) -> int:
        if self.failing:
            raise OSError(5, "clock unreadable")
        return super().now_ms()


def _msg(i: int) -> MessageInner:
    props = {"TAGS": f"Tag{i % 2}", "UNIQ_KEY": f"U{i:08d}", "KEYS": f"k{i % 3}"}
    text = "".join(f"{k}\x01{v}\x02" for k, v in props.items()) if i % 4 else None
    size = 20_000 if i % 53 == 52 else 200 + (i * 37) % 900  # now and then over the limit
    topic = f"T{i % 3}" if i < 200 else f"Late{i % 5}"  # new topics midway: cold caches
    return MessageInner(
        topic, i % 4, bytes([i % 251]) * size, i, props, 0, 5, BORN, HOST, 0, 0, text
    )  # fmt: skip


@contextmanager
def _store(
    clock: ManualClock | SystemClock, reference: bool = False, **overrides: Any
) -> Iterator[MessageStore]:
    with tempfile.TemporaryDirectory() as d:
        store = MessageStore(small_config(d, **overrides), clock=clock)
        if reference:  # the Python put_message's own path: _direct stays None
            log = store.commit_log
            log._fast_prepare = log._fast_write = log._fast_put = None
        assert store.load()
        store.start()
        try:
            yield store
        finally:
            store.shutdown()


def _result(r: PutResult) -> tuple[object, ...]:
    return tuple(getattr(r, name) for name in PutResult.__slots__)


def _files(store: MessageStore) -> list[bytes]:
    log = [bytes(mf.mm[: mf.wrote_position]) for mf in store.commit_log.queue.files]
    cqs = sorted(store.all_consume_queues(), key=lambda cq: (cq.topic, cq.queue_id))
    return log + [bytes(mf.mm[: mf.wrote_position]) for cq in cqs for mf in cq.queue.files]


def test_put_message_gives_what_the_reference_gives() -> None:
    """400 puts over several 64 KiB file rolls, refusals (too big), new topics midway, the
    store going unwriteable and back, the clock failing for a while (an OSError: the store
    reports it and refuses puts until writeable again): the same results, failure counts,
    CommitLog and ConsumeQueue bytes as a store on the Python put's path."""
    clocks = _FailingClock(), _FailingClock()
    with _store(clocks[0]) as fast, _store(clocks[1], reference=True) as pure:
        assert pure._direct is None
        # no allocation thread: it clears "space" (set by a failed append) at any of its polls,
        # a race that made one store refuse a put the other took; the writer creates its files
        # itself, and the test says "writeable again" at a fixed put
        for s in (fast, pure):
            assert s.allocator is not None
            s.allocator.stop()
        for i in range(400):
            for clock in clocks:
                clock.advance(1)
                clock.failing = 300 <= i < 305
            if i == 306:  # what the allocation thread's next poll would say
                for s in (fast, pure):
                    s._set_unwriteable("space", None)
            # a kind of its own: "space" is the allocation thread's
            if i in (120, 310):
                for s in (fast, pure):
                    s._set_unwriteable("test", None if i == 310 else "full for a while")
            if i == 130:
                for s in (fast, pure):
                    s._set_unwriteable("test", None)
            assert _result(fast.put_message(_msg(i))) == _result(pure.put_message(_msg(i))), i
        assert fast.put_failed_times == pure.put_failed_times > 10
        for s in (fast, pure):
            assert s.wait_dispatched(10)
        assert _files(fast) == _files(pure)
        assert fast.commit_log.topic_queue_table == pure.commit_log.topic_queue_table


def test_the_c_path_is_open_exactly_while_the_store_puts_at_once() -> None:
    """``_direct`` (what the compiled put reads) is set while running, writeable, not a
    replica; cleared by each of those changing; never under SYNC_FLUSH; refusals meanwhile
    are the Python method's (counted)."""
    with _store(ManualClock()) as store:
        assert (store._direct is not None) == (method is not None)
        store.set_replica_mode(True)
        assert store._direct is None
        refused = store.put_message(_msg(1))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "slave" in str(refused.remark)
        store.set_replica_mode(False)
        assert (store._direct is not None) == (method is not None)
        store._set_unwriteable("disk", "disk is full")
        assert store._direct is None
        assert store.put_message(_msg(2)).remark == "disk is full"
        store._set_unwriteable("disk", None)
        assert store.put_message(_msg(3)).status is PutStatus.PUT_OK
        assert store.put_failed_times == 2
    assert store._direct is None  # shut down
    assert store.put_message(_msg(4)).status is PutStatus.SERVICE_NOT_AVAILABLE
    with _store(ManualClock(), flush_disk_type=FlushDiskType.SYNC_FLUSH) as sync:
        assert sync._direct is None
        assert sync.put_message(_msg(5)).status is PutStatus.PUT_OK


@compiled
def test_a_common_put_runs_no_python_frame() -> None:
    """A put of a cached topic into a file with room: no Python function is called but the
    reput's wake-up (the Python method and CommitLog.put_message used to be two frames), and
    the bound method (``put = store.put_message``) takes the same path."""
    with _store(SystemClock()) as store:
        assert store.put_message(_msg(1)).status is PutStatus.PUT_OK  # caches topic and tag
        msgs = _msg(7), _msg(13)  # the same topic and tag
        called: list[str] = []

        def profile(frame: FrameType, event: str, arg: object) -> None:
            if event == "call":
                called.append(frame.f_code.co_filename.rsplit("/", 1)[-1])

        put = store.put_message
        sys.setprofile(profile)
        try:
            first = store.put_message(msgs[0])
            second = put(msgs[1])
        finally:
            sys.setprofile(None)
        assert first.status is second.status is PutStatus.PUT_OK
        assert second.wrote_offset == first.wrote_offset + first.wrote_bytes
        assert set(called) <= {"service.py", "threading.py"}  # the wake-up, if any


_FIELD = st.one_of(
    st.none(), st.integers(), st.text(max_size=8), st.binary(max_size=8),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
)  # fmt: skip


@given(st.lists(_FIELD, min_size=12, max_size=12))
def test_new_inner_is_the_class_of_its_twelve_fields(fields: list[Any]) -> None:
    """Any twelve objects (the dataclass checks no type): the same fields, each the object
    given (not a copy), an object the collector tracks, equal to the class's."""
    made, ref = new_inner(*fields), MessageInner(*fields)
    assert type(made) is MessageInner
    assert gc.is_tracked(made)
    assert made == ref
    names = MessageInner.__slots__
    assert all(getattr(made, n) is f for n, f in zip(names, fields, strict=True))


def test_new_inner_takes_the_other_calls_as_the_class_does() -> None:
    """Fewer fields (the defaults), keywords, too many: what ``MessageInner`` answers."""
    assert new_inner("T", 1, b"b") == MessageInner("T", 1, b"b")
    assert new_inner("T", 1, b"b", flag=3) == MessageInner("T", 1, b"b", flag=3)
    for call in (new_inner, MessageInner):
        with pytest.raises(TypeError):
            call(*range(13))


@pytest.mark.parametrize("reference", [False, True])
def test_a_put_wakes_the_reput_only_when_idle_and_unclaimed(reference: bool) -> None:
    """``put_message`` (the compiled path and the Python one) and ``store_put_run`` wake the
    reput thread only when it is idle and the event loop has not claimed its next round
    (``ReputService.claimed``: the loop dispatches those puts itself, broker/loop_round.py)."""
    with _store(ManualClock(), reference=reference) as store:
        assert (store._direct is None) == (reference or method is None)
        reput = store.reput
        reput.stop()  # no thread flips ``idle`` meanwhile
        woken: list[int] = []
        reput.wakeup = lambda: woken.append(1)  # type: ignore[method-assign]
        seen = []
        for idle, claimed in ((True, False), (True, True), (False, False), (False, True)):
            reput.idle, reput.claimed = idle, claimed
            before = len(woken)
            assert store.put_message(_msg(1)).status is PutStatus.PUT_OK
            assert store_put_run(store, [_msg(2), _msg(3)])[-1].status is PutStatus.PUT_OK
            seen.append(len(woken) - before)
        assert seen == [2, 0, 0, 0]
        reput.claimed = False
