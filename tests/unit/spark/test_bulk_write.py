"""The sink's bulk encoder (``RowSender.add_batch``) against its row-by-row path: the same
batch entries byte for byte, the same ids, and a hand-over of every row it does not take."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pyarrow")

import pyarrow as pa

from ariane.client._send import SendSettings
from ariane.common.batch import encode_batch
from ariane.spark._arrow import batch_to_rows
from ariane.spark._sender import RowSender
from ariane.spark.ids import MessageIdSequence
from ariane.spark.options import SinkOptions


class _Inner:
    """Stands for the SDK producer: records what would be sent."""

    def __init__(self) -> None:
        self.settings = SendSettings("g")
        self.sent: list[tuple[str, bytes, list[str]]] = []

    def send_encoded_batch_async(
        self, topic: str, body: bytes, msg_ids: list[str]
    ) -> asyncio.Future[Any]:
        self.sent.append((topic, body, list(msg_ids)))
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class _Producer:
    def __init__(self) -> None:
        self.producer = _Inner()


def _sender(batch_rows: int = 3) -> tuple[RowSender, _Inner]:
    opts = SinkOptions.parse(
        {"nameserver": "127.0.0.1:1", "topic": "Default", "batchRows": str(batch_rows)}
    )
    producer = _Producer()
    return RowSender(opts, producer), producer.producer  # type: ignore[arg-type]


def _plain(batch: pa.RecordBatch, ids: MessageIdSequence) -> dict[str, tuple[bytes, list[str]]]:
    """Per topic, the entries and ids the row-by-row path makes of ``batch``."""
    sender, _ = _sender()
    out: dict[str, tuple[bytes, list[str]]] = {}
    for row in batch_to_rows(batch):
        msg = sender.message(row, ids.next())
        body, msg_ids = out.get(msg.topic, (b"", []))
        entry = encode_batch([(bytes(msg.body), msg.flag, msg.properties)])
        out[msg.topic] = (body + entry, [*msg_ids, msg.properties["UNIQ_KEY"]])
    return out


def _bulk(batch: pa.RecordBatch, ids: MessageIdSequence) -> dict[str, tuple[bytes, list[str]]]:
    sender, inner = _sender()
    assert sender.add_batch(batch, ids)
    sender.finish()
    out: dict[str, tuple[bytes, list[str]]] = {}
    for topic, body, msg_ids in inner.sent:
        assert len(msg_ids) <= 3  # batchRows
        old_body, old_ids = out.get(topic, (b"", []))
        out[topic] = (old_body + body, old_ids + msg_ids)
    return out


ROWS = pa.record_batch(
    {
        "body": pa.array([b"a", "h\u00e9llo".encode(), b"\x00\xff", b"x" * 3000, b"e", b"f", b"g"]),
        "topic": pa.array(["T1", None, "T1", "", "T_2", "T1", None]),
        "tags": pa.array(["tag", None, "", "t\u00e4g", "a b", None, "z"]),
        "keys": pa.array(["k1 k2", None, "  spaced  keys ", "", "\u00fc", "k", None]),
        "properties": pa.nulls(7, pa.map_(pa.string(), pa.string())),
        "delayLevel": pa.nulls(7, pa.int32()),
        "shardingKey": pa.nulls(7, pa.string()),
    }
)


@pytest.mark.parametrize(
    "columns",
    [
        ["body"],
        ["body", "topic"],
        ["body", "topic", "tags", "keys"],
        ["body", "tags", "keys", "properties", "delayLevel", "shardingKey"],
    ],
)
def test_bulk_entries_are_the_row_path_entries(columns: list[str]) -> None:
    batch = ROWS.select(columns)
    bulk_ids = MessageIdSequence("ns", 4, 2)
    bulk = _bulk(batch, bulk_ids)
    plain_ids = MessageIdSequence("ns", 4, 2)
    assert bulk == _plain(batch, plain_ids)
    assert bulk_ids.row == plain_ids.row == 7


def test_string_bodies_and_list_keys() -> None:
    batch = pa.record_batch(
        {
            "body": pa.array(["one", "tw\u00f6"]),
            "keys": pa.array([["a", "", "b"], []], pa.list_(pa.string())),
        }
    )
    assert _bulk(batch, MessageIdSequence("n", 0, 0)) == _plain(batch, MessageIdSequence("n", 0, 0))


def test_chunks_follow_batch_rows_across_input_batches() -> None:
    sender, inner = _sender(batch_rows=3)
    ids = MessageIdSequence("n", 0, 0)
    for _ in range(2):
        assert sender.add_batch(pa.record_batch({"body": [b"a", b"b"]}), ids)
    assert sender.finish() == 4
    assert [len(m) for _, _, m in inner.sent] == [3, 1]
    assert [m for _, _, ms in inner.sent for m in ms] == [ids.id_of(i) for i in range(4)]


@pytest.mark.parametrize(
    "odd",
    [
        {"body": pa.array([b"a", b""])},  # an empty body: the row path names it
        {"body": pa.array([b"a", None])},
        {"body": pa.array([b"a", b"b"]), "delayLevel": pa.array([None, 2])},
        {"body": pa.array([b"a", b"b"]), "shardingKey": pa.array(["k", None])},
        {
            "body": pa.array([b"a", b"b"]),
            "properties": pa.array([None, [("u", "v")]], pa.map_(pa.string(), pa.string())),
        },
        {"body": pa.array([b"a", b"b"]), "topic": pa.array(["ok", "%RETRY%g"])},
        {"body": pa.array([b"a", b"b"]), "topic": pa.array(["ok", "bad topic!"])},
        {"body": pa.array([1, 2])},
    ],
    ids=["empty", "null", "delay", "sharding", "properties", "retry", "bad-topic", "int-body"],
)
def test_rows_the_bulk_path_hands_over(odd: dict[str, pa.Array]) -> None:
    sender, inner = _sender()
    ids = MessageIdSequence("n", 0, 0)
    assert not sender.add_batch(pa.record_batch(odd), ids)
    assert ids.row == 0
    assert sender.finish() == 0
    assert inner.sent == []


def test_chunks_end_at_a_mebibyte_as_row_by_row() -> None:
    """A batch is sent once its rows count 1 MiB (body + 64 bytes each) or ``batchRows``,
    across input batches: the chunk sizes of the row-by-row rule."""
    sizes = [300_000, 400_000, 200_000, 150_000, 10, 500_000, 600_000, 90_000, 1_048_000, 5]
    sender, inner = _sender(batch_rows=4)
    ids = MessageIdSequence("n", 0, 0)
    for part in (sizes[:3], sizes[3:8], sizes[8:]):
        assert sender.add_batch(pa.record_batch({"body": [b"b" * s for s in part]}), ids)
    assert sender.finish() == len(sizes)
    expected: list[int] = []
    rows = size = 0
    for s in sizes:  # the row-by-row rule
        rows, size = rows + 1, size + s + 64
        if rows >= 4 or size >= 1024 * 1024:
            expected.append(rows)
            rows = size = 0
    expected += [rows] if rows else []
    assert [len(m) for _, _, m in inner.sent] == expected == [4, 3, 2, 1]
    assert [m for _, _, ms in inner.sent for m in ms] == [ids.id_of(i) for i in range(len(sizes))]
