"""Dispatch requests queued as columns (``DispatchBlock``, what ``CommitLog.put_block`` queues
per run): the requests a block stands for, its visible prefix and split, topic removal, the
queue offsets a run takes, and the reput thread taking single requests and blocks in physical
order (a block dispatched as columns, a partly visible one split, a failed one put back)."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np

from ariane.common.sysflag import TRANSACTION_PREPARED_TYPE
from ariane.store.dispatch import ReputService
from ariane.store.dispatch_block import DispatchBlock, Pending, drop_topics
from ariane.store.format import DispatchRequest
from ariane.store.record_block import _queue_offsets


def _req(topic: str, qid: int, phys: int, size: int, qoff: int, flag: int = 0) -> DispatchRequest:
    return DispatchRequest(topic, qid, phys, size, 0, 500, qoff, None, f"u{phys}", flag, None)


def _block(reqs: list[DispatchRequest]) -> DispatchBlock:
    cols = [list(c) for c in zip(*reqs, strict=True)]
    return DispatchBlock(
        cols[0], cols[1], cols[2], cols[3], cols[4], reqs[0].store_timestamp_ms, cols[6],
        cols[7], cols[8], cols[9],
    )  # fmt: skip


_REQS = [
    _req("A", 0, 1000, 100, 5),
    _req("B", 1, 1100, 50, 0),
    _req("A", 0, 1150, 70, 6),
    _req("C", 2, 1220, 30, 0, TRANSACTION_PREPARED_TYPE),
]


def test_a_block_stands_for_its_requests() -> None:
    block = _block(_REQS)
    assert len(block) == 4
    assert (block.commit_log_offset, block.end_offset) == (1000, 1250)
    assert block.requests() == _REQS
    assert block.columns() == tuple(zip(*_REQS, strict=True))


def test_visible_prefix_and_split() -> None:
    block = _block(_REQS)
    assert [block.visible(limit) for limit in (999, 1100, 1149, 1150, 1249, 1250, 9999)] == [
        0, 1, 1, 2, 3, 4, 4,
    ]  # fmt: skip
    first, rest = block.split(1)
    assert first.requests() == _REQS[:1]
    assert rest.requests() == _REQS[1:]
    assert rest.store_timestamp_ms == 500


def test_without_topics_keeps_the_other_records() -> None:
    block = _block(_REQS)
    assert block.without_topics({"Z"}) is block
    rest = block.without_topics({"A"})
    assert rest is not None
    assert rest.requests() == [_REQS[1], _REQS[3]]
    assert block.without_topics({"A", "B", "C"}) is None


def test_drop_topics_in_a_mixed_queue() -> None:
    single = _req("A", 0, 900, 100, 4)
    other = _req("B", 0, 1250, 10, 3)
    pending: deque[Pending] = deque([single, _block(_REQS), other])
    drop_topics(pending, {"Z"})
    assert pending[0] is single
    drop_topics(pending, {"A"})
    assert len(pending) == 2
    assert isinstance(pending[0], DispatchBlock)
    assert pending[0].requests() == [_REQS[1], _REQS[3]]
    assert pending[1] is other


def test_queue_offsets_of_a_run() -> None:
    table = {("A", 0): 7, ("B", 1): 2}
    topics = ("A", "B", "A", "C", "A", "B", "D")
    qids = (0, 1, 0, 0, 0, 1, 3)
    enters = (True, True, True, False, True, True, True)
    out = _queue_offsets(topics, qids, enters, table)
    assert out.tolist() == [7, 2, 8, 0, 9, 3, 0]
    assert table == {("A", 0): 10, ("B", 1): 4, ("D", 3): 1}  # C's prepared record: no entry


def test_queue_offsets_of_one_topic() -> None:
    table = {("T", 2): 100}
    qids = (2, 0, 2, 1, 0, 2)
    out = _queue_offsets(("T",) * 6, qids, (True, True, False, True, True, True), table)
    assert out.tolist() == [100, 0, 0, 0, 1, 101]
    assert table == {("T", 0): 2, ("T", 1): 1, ("T", 2): 102}
    assert out.dtype == np.int64


class _Log:
    """What the reput thread reads of a CommitLog."""

    def __init__(self, items: list[Pending], limit: int) -> None:
        self.pending: deque[Pending] = deque(items)
        self.blocks_queued = sum(1 for i in items if isinstance(i, DispatchBlock))
        self.max_offset = self.flushed_where = limit
        self.put_lock = threading.Lock()


class _Dispatcher:
    def __init__(self, fail: int = 0) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, list[int]]] = []
        self.fail = fail

    def _check(self) -> None:
        if self.fail:
            self.fail -= 1
            raise OSError("disk gone")

    def dispatch(self, batch: list[DispatchRequest]) -> None:
        self._check()
        self.calls.append(("singles", [r.commit_log_offset for r in batch]))

    def dispatch_columns(self, columns: tuple[tuple[Any, ...], ...]) -> None:
        self._check()
        self.calls.append(("columns", list(columns[2])))


def _reput(log: _Log, dispatcher: _Dispatcher, errors: list[str | None]) -> ReputService:
    reput = ReputService(
        log,  # type: ignore[arg-type]
        dispatcher,  # type: ignore[arg-type]
        sync_visibility=True,
        on_error=errors.append,
    )
    return reput


def test_reput_takes_singles_and_blocks_in_order() -> None:
    head = [_req("A", 0, 800, 100, 3), _req("A", 0, 900, 100, 4)]
    tail = _req("A", 0, 1250, 10, 7)
    log = _Log([*head, _block(_REQS), tail], 1260)
    dispatcher = _Dispatcher()
    calls: list[tuple[Any, ...]] = []
    reput = _reput(log, dispatcher, [])
    reput.listener = lambda *args: calls.append(args)
    assert reput.do_reput() == 7
    assert dispatcher.calls == [
        ("singles", [800, 900]),
        ("columns", [1000, 1100, 1150, 1220]),
        ("singles", [1250]),
    ]
    assert reput.reput_from_offset == 1260
    assert not log.pending
    assert calls == [
        ("A", 0, 5, 0, 500, None),
        ("A", 0, 7, 0, 500, None),  # the block: A's last record, queue offset 6
        ("B", 1, 1, 0, 500, None),
        ("A", 0, 8, 0, 500, None),
    ]


def test_a_partly_visible_block_is_split() -> None:
    log = _Log([_block(_REQS)], 1150)  # flushed up to the end of the second record
    dispatcher = _Dispatcher()
    reput = _reput(log, dispatcher, [])
    assert reput.do_reput() == 2
    assert reput.reput_from_offset == 1150
    rest = log.pending[0]
    assert isinstance(rest, DispatchBlock)
    assert rest.requests() == _REQS[2:]
    log.flushed_where = log.max_offset = 1250
    assert reput.do_reput() == 2
    assert dispatcher.calls == [("columns", [1000, 1100]), ("columns", [1150, 1220])]
    assert reput.reput_from_offset == 1250


def test_a_failed_block_is_put_back() -> None:
    block = _block(_REQS)
    log = _Log([block], 1250)
    dispatcher = _Dispatcher(fail=1)
    errors: list[str | None] = []
    reput = _reput(log, dispatcher, errors)
    assert reput.do_reput() == 0
    assert log.pending[0] is block
    assert errors == ["dispatch to ConsumeQueue/index failed: disk gone"]
    assert reput.do_reput() == 4
    assert errors[-1] is None
    assert dispatcher.calls == [("columns", [1000, 1100, 1150, 1220])]
