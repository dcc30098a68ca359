"""The idempotence window (ariane.store.dedup): bounds, and its rebuild from the CommitLog."""

from __future__ import annotations

import gc
from collections import OrderedDict
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.clock import ManualClock
from ariane.common.properties import DEDUP, REAL_TOPIC, TRANSACTION_PREPARED
from ariane.store.dedup import DedupEntry, DedupWindow, dedup_topic
from ariane.store.message_store import MessageStore
from ariane.store.results import PutResult, PutStatus
from tests.unit.store.helpers import msg, open_store, small_config


def _entry(ts: int, offset: int = 0) -> DedupEntry:
    return DedupEntry(0, offset, offset * 100, 100, ts)


def test_seen_counts_hits_and_keeps_the_first_copy() -> None:
    w = DedupWindow(10, 1000)
    assert w.seen("T", "a", 0) is None
    w.remember("T", "a", _entry(0, 1))
    w.remember("T", "a", _entry(5, 2))  # a second remember keeps the first copy
    assert w.seen("T", "a", 10) == _entry(0, 1)
    assert w.seen("U", "a", 10) is None  # ids are per topic
    assert (w.duplicates, len(w)) == (1, 1)


def test_a_full_window_costs_the_garbage_collector_nothing() -> None:
    """Runs are plain tuples of str, ints and tuples of those, which collections stop
    tracking (a young one's inner tuples first, the run at the next), so a 200,000-id window is not walked again by every later collection."""
    window = DedupWindow(max_entries=1000)
    for i in range(1000):
        window.remember("T", f"id-{i}", DedupEntry(0, i, i * 100, 100, 1_000 + i))
    gc.collect()  # a run's inner tuples are untracked by this pass, the run by the next
    gc.collect()
    tracked = [run for run in window._runs if gc.is_tracked(run)]
    assert tracked == []
    assert window.seen("T", "id-7", 2_000) == DedupEntry(0, 7, 700, 100, 1_007)


def test_size_bound_drops_the_oldest() -> None:
    w = DedupWindow(2, 10_000)
    for i, key in enumerate("abc"):
        w.remember("T", key, _entry(i, i))
    assert w.seen("T", "a", 3) is None
    assert w.seen("T", "b", 3) == _entry(1, 1)
    assert w.seen("T", "c", 3) == _entry(2, 2)
    assert len(w) == 2


def test_age_bound_forgets_old_ids() -> None:
    w = DedupWindow(10, 100)
    w.remember("T", "a", _entry(1000))
    w.remember("T", "b", _entry(1050))
    assert w.seen("T", "a", 1100) == _entry(1000)  # exactly max_age old: still in
    assert w.seen("T", "a", 1101) is None
    assert w.seen("T", "b", 1101) == _entry(1050)
    assert len(w) == 1


def test_size_zero_turns_it_off() -> None:
    w = DedupWindow(0, 100)
    assert not w.enabled
    w.remember("T", "a", _entry(0))
    assert w.seen("T", "a", 0) is None
    assert len(w) == 0


def test_retry_and_dlq_topics_are_not_deduplicated() -> None:
    assert dedup_topic("Orders")
    assert not dedup_topic("%RETRY%G")
    assert not dedup_topic("%DLQ%G")


@settings(max_examples=300, deadline=None)
@given(
    max_entries=st.integers(1, 6),
    max_age=st.integers(1, 50),
    sends=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 20)), max_size=80),
)
def test_each_id_is_stored_once_within_the_window(
    max_entries: int, max_age: int, sends: list[tuple[int, int]]
) -> None:
    """Any sequence of sends with repeats (id, time step): an id is stored again only after
    its copy left the window (more than ``max_entries`` newer ids, or older than ``max_age``),
    and a repeat inside the window is answered with its first copy."""
    w = DedupWindow(max_entries, max_age)
    now = 0
    stored: list[tuple[str, int]] = []  # (id, store time) in store order
    for ident, step in sends:
        now += step
        key = f"id{ident}"
        first = w.seen("T", key, now)
        if first is not None:
            index = first.queue_offset
            assert stored[index][0] == key
            assert now - stored[index][1] <= max_age
            continue
        for index in range(len(stored) - 1, -1, -1):
            if stored[index][0] == key:
                newer = len(stored) - 1 - index
                assert newer >= max_entries or now - stored[index][1] > max_age
                break
        w.remember("T", key, DedupEntry(0, len(stored), 0, 1, now))
        stored.append((key, now))
        assert len(w) <= max_entries


def test_rebuild_from_the_commit_log_after_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    with open_store(tmp_path, clock) as store:
        assert len(store.dedup) == 0
        store.put_message(msg(body=b"plain"))
        first = store.put_message(msg(body=b"a", **{DEDUP: "id-a"}))
        clock.advance(5_000)
        second = store.put_message(msg("Other", 1, b"b", **{DEDUP: "id-b"}))
        store.put_message(msg("%RETRY%G", body=b"r", **{DEDUP: "id-r"}))
        half = {DEDUP: "id-t", TRANSACTION_PREPARED: "true"}
        store.put_message(msg(body=b"t", **half))
        store.put_message(msg("SCHEDULE_TOPIC_XXXX", 2, b"d", **{DEDUP: "id-d", REAL_TOPIC: "T"}))
    clock.advance(1000)
    store = MessageStore(small_config(tmp_path, dedup_window_ms=5_500), clock=clock)
    assert store.load()
    try:
        w = store.dedup
        assert len(w) == 2  # id-a is older than 5.5 s, retry and transactional ids skipped
        now = clock.now_ms()
        assert w.seen("TopicA", "id-a", now) is None
        assert w.seen("Other", "id-b", now) == DedupEntry(
            1, 0, second.wrote_offset, second.wrote_bytes, second.store_timestamp_ms
        )
        assert w.seen("T", "id-d", now) is not None  # a delayed message: its real topic
        assert first.wrote_offset >= 0
    finally:
        store.shutdown()


def test_rebuild_respects_the_size_bound_and_skips_plain_logs(tmp_path: Path) -> None:
    clock = ManualClock()
    with open_store(tmp_path, clock) as store:
        for i in range(300):  # several 64 KiB files
            store.put_message(msg(body=b"x" * 500, **({DEDUP: f"id{i}"} if i >= 200 else {})))
    store = MessageStore(small_config(tmp_path, dedup_window_size=30), clock=clock)
    assert store.load()
    try:
        w = store.dedup
        assert len(w) == 30
        now = clock.now_ms()
        assert w.seen("TopicA", "id269", now) is None
        got = w.seen("TopicA", "id270", now)
        assert got is not None
        assert got.queue_offset == 270
        assert w.seen("TopicA", "id299", now) is not None
    finally:
        store.shutdown()


def test_a_replica_taking_writes_rebuilds_the_window(tmp_path: Path) -> None:
    """A slave's window is not fed by sends: it is rebuilt when the store leaves replica mode
    (the records it holds were replicated from the master)."""
    with open_store(tmp_path) as store:
        store.put_message(msg(body=b"a", **{DEDUP: "id-a"}))
        store.dedup.clear()  # as on a slave, which never saw the send
        store.set_replica_mode(True)
        assert len(store.dedup) == 0
        store.set_replica_mode(False)
        assert store.dedup.seen("TopicA", "id-a", store.clock.now_ms()) is not None


class _Reference:
    """The window as one ordered dict of (topic, id) -> entry fields, id by id (what
    ``DedupWindow`` kept before it kept runs)."""

    def __init__(self, max_entries: int, max_age: int) -> None:
        self.entries: OrderedDict[tuple[str, str], tuple[int, int, int, int, int]]
        self.entries = OrderedDict()
        self.max_entries, self.max_age = max_entries, max_age

    def expire(self, now: int) -> None:
        while self.entries and next(iter(self.entries.values()))[4] < now - self.max_age:
            self.entries.popitem(last=False)

    def remember(self, key: tuple[str, str], fields: tuple[int, int, int, int, int]) -> None:
        if key not in self.entries:
            self.entries[key] = fields
            while len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)


_puts = st.lists(
    st.tuples(
        st.sampled_from(["T", "U"]),
        st.lists(st.one_of(st.none(), st.sampled_from([f"i{k}" for k in range(12)])), max_size=6),
        st.integers(0, 30),  # time step
        st.booleans(),  # a batch checked fresh by its caller (when its ids are)
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(max_entries=st.integers(1, 8), max_age=st.integers(1, 60), puts=_puts)
def test_runs_keep_what_an_id_by_id_window_keeps(
    max_entries: int, max_age: int, puts: list[tuple[str, list[str | None], int, bool]]
) -> None:
    """Puts of one to six messages (ids repeated, known, missing), remembered as the broker
    does (``any_seen`` then ``remember_put``, ``fresh`` when the ids are new and distinct),
    with size and age bounds: the window holds the same entries in the same order as the
    reference, and ``seen`` answers each id with the same first copy."""
    w, ref = DedupWindow(max_entries, max_age), _Reference(max_entries, max_age)
    now, phys, qoff = 0, 0, 0
    for topic, ids, step, check in puts:
        now += step
        ref.expire(now)
        w.expire(now)  # the broker checks ids (which expires) before it stores
        n = len(ids)
        offsets = tuple(phys + 10 * i + i * i for i in range(n))
        end = phys + 10 * n + n * n
        real = [i for i in ids if i is not None]
        fresh = (
            check and None not in ids and len(set(real)) == n and not w.any_seen(topic, real, now)
        )
        result = PutResult(PutStatus.PUT_OK, phys, end - phys, now, qoff, n, b"", 0, offsets)
        w.remember_put(topic, ids, 3, result, fresh)
        for i, dedup_id in enumerate(ids):
            if dedup_id is not None:
                size = (offsets[i + 1] if i + 1 < n else end) - offsets[i]
                ref.remember((topic, dedup_id), (3, qoff + i, offsets[i], size, now))
        phys, qoff = end, qoff + n
        assert w.items() == list(ref.entries.items())
        assert len(w) == len(ref.entries) <= max_entries
    for (topic, dedup_id), fields in list(ref.entries.items()):
        assert w.seen(topic, dedup_id, now) == DedupEntry._make(fields)


def test_a_put_wrongly_called_fresh_never_breaks_the_window() -> None:
    """A caller that says ``fresh`` for an id already in the window (a broken promise): the
    window stays usable as both runs age out (no KeyError on the send path), it stays within
    its bound, and a fresh id after them is remembered and found."""
    w = DedupWindow(3, 1_000)
    for n, ids in enumerate((["a", "b"], ["b", "c"], ["d"], ["e", "f", "g"])):
        result = PutResult(PutStatus.PUT_OK, 100 * n, 10 * len(ids), 0, 5 * n, len(ids), b"", 0,
                           tuple(100 * n + 10 * i for i in range(len(ids))))  # fmt: skip
        w.remember_put("T", list(ids), 0, result, fresh=True)
        assert len(w) <= 3
    w.expire(5_000)
    assert len(w) == 0
    w.remember("T", "h", DedupEntry(0, 9, 900, 10, 5_000))
    assert w.seen("T", "h", 5_000) == DedupEntry(0, 9, 900, 10, 5_000)
