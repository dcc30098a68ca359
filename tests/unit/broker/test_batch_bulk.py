"""The bulk SEND_BATCH path (``ariane.broker.processors.batch_bulk``) stores and answers
exactly what the per-message loop does (no sockets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from ariane.broker.processors import send_batch as send_module
from ariane.broker.processors.batch_bulk import bulk_items
from ariane.common.batch import decode_batch, encode_batch
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    DELAY,
    MSG_REGION,
    TRACE_SWITCH,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    encode_properties,
)
from ariane.common.record import decode_records
from ariane.dledger.dedup import MasterWindow
from ariane.remoting.protocol.codes import RequestCode
from ariane.store import message_store as message_store_module
from ariane.store.dedup import DedupEntry, DedupWindow
from tests.unit.broker.harness import Broker, run
from tests.unit.broker.test_dedup_send import _request

_STAMP = {CLUSTER: "C", MSG_REGION: "R", TRACE_SWITCH: "true"}
_STAMP_TEXT = encode_properties(_STAMP)


def _entries(props: list[dict[str, str] | str]) -> list[Any]:
    return decode_batch(encode_batch((f"b{i}".encode(), i, p) for i, p in enumerate(props)))


def test_the_common_shape_is_stamped_in_bulk() -> None:
    entries = _entries([{UNIQ_KEY: "U0", DEDUP: "D0"}, {"TAGS": "t", UNIQ_KEY: "U1"}])
    got = bulk_items(entries, dict(_STAMP), _STAMP_TEXT)
    assert got is not None
    items, ids = got
    assert ids == ["D0", None]
    assert [(i.body, i.flag) for i in items] == [(b"b0", 0), (b"b1", 1)]
    assert items[0].properties == {UNIQ_KEY: "U0", DEDUP: "D0", **_STAMP}
    assert list(items[1].properties) == ["TAGS", UNIQ_KEY, CLUSTER, MSG_REGION, TRACE_SWITCH]
    assert items[0].properties_string == f"{UNIQ_KEY}\x01U0\x02{DEDUP}\x01D0\x02{_STAMP_TEXT}"


@pytest.mark.parametrize(
    "odd",
    [
        {UNIQ_KEY: "U", TRANSACTION_PREPARED: "true"},
        {UNIQ_KEY: "U", DELAY: "0"},
        {UNIQ_KEY: "U", CLUSTER: "other"},
        {UNIQ_KEY: "U", MSG_REGION: "r"},
        {UNIQ_KEY: "U", TRACE_SWITCH: "false"},
        {"TAGS": "no-uniq-key"},
        f"{UNIQ_KEY}\x01U",  # no separator at the end
    ],
)
def test_other_shapes_take_the_per_message_loop(odd: dict[str, str] | str) -> None:
    entries = _entries([{UNIQ_KEY: "U0"}, odd])
    assert bulk_items(entries, dict(_STAMP), _STAMP_TEXT) is None


#: batches sent one after the other to two brokers, one with the bulk path switched off
_BATCHES: list[list[tuple[bytes, dict[str, str] | str]]] = [
    [(b"a", {UNIQ_KEY: "U1", DEDUP: "A"}), (b"b", {UNIQ_KEY: "U2", DEDUP: "B"})],
    [(b"c", {UNIQ_KEY: "U3", DEDUP: "C"}), (b"a", {UNIQ_KEY: "U1", DEDUP: "A"})],  # a repeat
    [(b"d", {UNIQ_KEY: "U4", DEDUP: "D"}), (b"d", {UNIQ_KEY: "U4", DEDUP: "D"})],  # in-batch
    [(b"e", {UNIQ_KEY: "U5", DEDUP: "E"}), (b"f", {UNIQ_KEY: "U6"})],  # one without an id
    [(b"g", {UNIQ_KEY: "U7", "TAGS": "t", "KEYS": "k"}), (b"h", {UNIQ_KEY: "U8"})],
    [(b"i", {UNIQ_KEY: "U9", DEDUP: ""}), (b"j", {UNIQ_KEY: "U10", DEDUP: "J"})],
    [(b"k", {"TAGS": "x"}), (b"l", {UNIQ_KEY: "U11", CLUSTER: "mine", DEDUP: "L"})],
    [(b"m", {UNIQ_KEY: "U12", DEDUP: "M"}), (b"n", f"{UNIQ_KEY}\x01U13\x02{DEDUP}\x01N")],
    [(b"o", {UNIQ_KEY: "U14", DEDUP: "C"}), (b"p", {UNIQ_KEY: "U15", DEDUP: "P"})],  # C again
    [(b"q", {UNIQ_KEY: f"Q{i}", DEDUP: f"Q{i}"}) for i in range(60)],
    [(b"r", {UNIQ_KEY: f"Q{i}", DEDUP: f"Q{i}"}) for i in range(59, 70)],
]


async def _run_batches(b: Broker, topic: str) -> tuple[list[Any], list[Any]]:
    answers = []
    for batch in _BATCHES:
        header = b.send_header(topic, 0, batch=True).to_v2()
        body = encode_batch((data, 0, p) for data, p in batch)
        r = await _request(b, RequestCode.SEND_BATCH_MESSAGE, header, body)
        answers.append((r.code, r.remark, dict(r.ext_fields)))
    stored = []
    while True:
        got = b.c.store.get_message("G", topic, 0, len(stored), 100)
        if not got.messages:
            break
        for record in got.messages:
            m = decode_records(record)[0]
            if len(m.properties[UNIQ_KEY]) == 32:  # made by the broker: differs per run
                m.properties[UNIQ_KEY] = "<broker's>"
            stored.append((m.body, m.queue_offset, m.commit_log_offset, m.flag, m.properties))
    window = b.c.store.dedup
    return answers, [stored, window.duplicates, window.items()]


@pytest.mark.parametrize("window", [200_000, 4, 0])
def test_the_bulk_path_stores_and_answers_as_the_loop(
    tmp_path: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three brokers: batches put from their bodies (``store.batch_put``) where they can,
    else in bulk; in bulk only; by the loop only."""
    put = mock.Mock(wraps=message_store_module.put_scanned)

    async def main() -> list[Any]:
        runs = []
        for name in ("scanned", "bulk", "loop"):
            if name == "scanned":
                monkeypatch.setattr(message_store_module, "put_scanned", put)
            if name == "bulk":
                monkeypatch.setattr(send_module, "scan_batch", lambda *_: None)
            if name == "loop":
                monkeypatch.setattr(send_module, "bulk_items", lambda *_: None)
            b = await Broker(tmp_path / name, store={"dedup_window_size": window}).start()
            runs.append(await _run_batches(b, "T"))
            await b.stop()
        return runs

    runs = run(main())
    # the batches of the common shape whose ids are new (all of them without a window; with
    # a window of 4, "C" was forgotten when it comes again)
    assert put.call_count == {200_000: 2, 4: 3, 0: 7}[window]
    (answers, state), *others = runs
    # store timestamps differ between the runs: compare the window's entries without them
    for _, run_state in runs:
        run_state[2] = [(key, entry[:4]) for key, entry in run_state[2]]
    for other_answers, other_state in others:
        assert other_answers == answers
        assert other_state == state
    assert all(a[0] == 0 for a in answers)
    assert len(state[0]) > 60


def test_any_seen_counts_nothing_and_expires() -> None:
    window = DedupWindow(100, 1_000)
    window.remember("T", "a", DedupEntry(0, 0, 0, 1, 5_000))
    assert window.any_seen("T", ["z", "a"], 5_500)
    assert not window.any_seen("U", ["a"], 5_500)
    assert not window.any_seen("T", ["z"], 5_500)
    assert window.duplicates == 0
    assert not window.any_seen("T", ["a"], 6_001)  # expired
    assert len(window) == 0
    master = [False]
    follower = MasterWindow(lambda: master[0], 100, 1_000)
    follower.remember("T", "a", DedupEntry(0, 0, 0, 1, 5_000))
    assert not follower.any_seen("T", ["a"], 5_500)
    master[0] = True
    assert follower.any_seen("T", ["a"], 5_500)
