"""The sink's idempotent sends: each row carries its id in ``__ARIANE_DEDUP`` and a batch goes
to the queue its first id hashes to (no Spark, no broker)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from ariane.client.sync import SyncProducer
from ariane.common import properties as props
from ariane.errors import InvalidArgumentError
from ariane.spark._arrow import SinkRow
from ariane.spark._sender import RowSender
from ariane.spark.options import SinkOptions


def _sender(**options: str) -> RowSender:
    opts = SinkOptions.parse({"nameserver": "h:1", "topic": "T", **options})
    return RowSender(opts, producer=cast(SyncProducer, object()))


def _row(body: bytes = b"x", **kw: Any) -> SinkRow:
    values: dict[str, Any] = {"topic": None, "tags": None, "keys": None, "properties": None}
    values.update(delay_level=0, sharding_key=None)
    values.update(kw)
    return SinkRow(body=body, **values)


def test_rows_carry_their_id_as_the_dedup_property_by_default() -> None:
    sender = _sender()
    assert sender.opts.idempotent
    msg = sender.message(_row(properties={"a": "1"}), "ID1")
    assert msg.properties[props.UNIQ_KEY] == "ID1"
    assert msg.properties[props.DEDUP] == "ID1"
    assert msg.properties["a"] == "1"
    assert sender._pin(msg) == "ID1"  # the batch's queue follows its first id


def test_idempotent_false_sends_plain_messages() -> None:
    sender = _sender(idempotent="false")
    msg = sender.message(_row(), "ID1")
    assert props.DEDUP not in msg.properties
    assert msg.properties[props.UNIQ_KEY] == "ID1"
    assert sender._pin(msg) is None
    with pytest.raises(InvalidArgumentError, match="idempotent"):
        _sender(idempotent="maybe")


def test_idempotence_key_names_the_id_namespace() -> None:
    assert _sender(idempotenceKey="job-7").opts.id_namespace == "job-7"
    assert _sender(idNamespace="job-8").opts.id_namespace == "job-8"
    assert _sender().opts.id_namespace is None


@pytest.mark.parametrize("idempotent", ["true", "false"])
def test_bulk_path_stamps_the_dedup_property_as_the_row_path_does(idempotent: str) -> None:
    from ariane.common.batch import encode_batch
    from ariane.spark._arrow import batch_to_rows
    from ariane.spark.ids import MessageIdSequence
    from tests.unit.spark.test_bulk_write import ROWS, _Producer

    opts = SinkOptions.parse({"nameserver": "h:1", "topic": "T", "idempotent": idempotent})
    producer = _Producer()
    bulk = RowSender(opts, producer)  # type: ignore[arg-type]
    batch = ROWS.select(["body", "tags", "keys"])
    assert bulk.add_batch(batch, MessageIdSequence("ns", 1, 0))
    bulk.finish()
    ((_, body, _),) = producer.producer.sent[:1]
    row = RowSender(opts, cast(SyncProducer, object()))
    ids = MessageIdSequence("ns", 1, 0)
    msgs = [row.message(r, ids.next()) for r in batch_to_rows(batch)]
    expected = encode_batch([(m.body, m.flag, m.properties) for m in msgs[: len(msgs)]])
    assert expected.startswith(body)
    assert (props.DEDUP.encode() in body) is (idempotent == "true")
