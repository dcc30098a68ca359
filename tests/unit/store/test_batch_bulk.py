"""A batch prepared and written in bulk (``ariane.store.batch_bulk``) is the batch the
per-record loops of ``CommitLog.prepare_batch``/``_write_batch`` store: same results, record
bytes and dispatch requests."""

from __future__ import annotations

import contextlib
import tempfile
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common.message import HostPort
from ariane.common.properties import encode_properties
from ariane.store import commit_log as commit_log_module
from ariane.store.inner import BatchItem, MessageBatchInner
from ariane.store.results import PutStatus
from tests.unit.store.test_put_paths import _log, batches, vars_of

_HOST = HostPort(b"\x0a\x00\x00\x05", 10911)


def _store(
    batches: list[MessageBatchInner], bulk: bool
) -> tuple[list[object], list[object], bytes]:
    with tempfile.TemporaryDirectory() as root:
        log = _log(root)
        try:
            with contextlib.ExitStack() as stack:
                if not bulk:  # the per-record loops only
                    for name in ("prepare_records", "write_records"):
                        stack.enter_context(mock.patch.object(commit_log_module, name, _none))
                results = [vars_of(log.put_messages(b)) for b in batches]
            return results, list(log.pending), log.get_message(0, log.max_offset) or b""
        finally:
            log.shutdown()


def _none(*_: object) -> None:
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches(), min_size=1, max_size=3))
def test_bulk_and_loop_store_the_same(drawn: list[MessageBatchInner]) -> None:
    assert _store(drawn, bulk=True) == _store(drawn, bulk=False)


def test_the_common_shape_takes_the_bulk_path() -> None:
    items = [
        BatchItem(b"body%d" % i, i, p, encode_properties(p))
        for i, p in enumerate([{"UNIQ_KEY": "U0"}, {"TAGS": "TagA", "KEYS": "k1 k2"}, {}])
    ]
    batch = MessageBatchInner("T", 1, items, 0, 5, _HOST, _HOST, 0)
    with mock.patch.object(
        commit_log_module, "write_records", wraps=commit_log_module.write_records
    ) as w:
        bulk = _store([batch, batch], bulk=True)
    assert w.call_count == 2
    assert all(PutStatus.PUT_OK in r for r in bulk[0])  # type: ignore[operator]
    assert bulk == _store([batch, batch], bulk=False)
    assert len(bulk[1]) == 6
