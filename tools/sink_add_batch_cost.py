"""µs per row of the Spark sink's bulk encoder (``RowSender.add_batch``) without Spark.

Usage: ``PYTHONPATH=src python tools/sink_add_batch_cost.py [ROUNDS] [ROWS] [SIZE] [tags]``:
builds ROWS-row Arrow batches of SIZE-byte bodies (a body column only, as
``tools/spark_write_cpu.py`` writes; with ``tags`` also tags and keys columns; idempotent ids)
and times
``add_batch`` + ``finish`` against a producer that only records the batch bodies; prints the
best and median µs per row over ROUNDS rounds (load it on a quiet machine, compare trees in
alternation).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import pyarrow as pa

from ariane.client._send import SendSettings
from ariane.common import native
from ariane.spark._sender import RowSender
from ariane.spark.ids import MessageIdSequence
from ariane.spark.options import SinkOptions


class _Inner:
    def __init__(self) -> None:
        self.settings = SendSettings("g")
        self.bytes = 0

    def send_encoded_batch_async(self, topic: str, body: bytes, ids: list[str]) -> Any:
        self.bytes += len(body)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class _Producer:
    def __init__(self) -> None:
        self.producer = _Inner()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    columns = {"body": pa.array([(b"%08d" % i) * (size // 8) for i in range(rows)], pa.binary())}
    if sys.argv[4:] == ["tags"]:
        columns["tags"] = pa.array([f"t{i % 7}" for i in range(rows)])
        columns["keys"] = pa.array([f"k{i}" for i in range(rows)])
    batch = pa.record_batch(columns)
    opts = SinkOptions.parse({"nameserver": "127.0.0.1:1", "topic": "Bench"})
    times = []
    for r in range(rounds):
        sender = RowSender(opts, _Producer())  # type: ignore[arg-type]
        ids = MessageIdSequence("ns", 0, r)
        start = time.perf_counter()
        assert sender.add_batch(batch, ids)
        sender.finish()
        times.append((time.perf_counter() - start) / rows * 1e6)
    print(
        f"{native.build_name()}: add_batch+finish {rows} rows of {size} B {list(columns)}: "
        f"best {min(times):.3f} µs/row, median {statistics.median(times):.3f}"
    )


if __name__ == "__main__":
    main()
