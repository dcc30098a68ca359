"""What the standalone-cluster drivers (``cluster_job.py``, ``ship_job.py``) and their tests
share: the Spark settings, the 40 rows of the batch write and the check of what was read
back. It imports pyspark only, never ``ariane``: ``ship_job.py``'s driver may lack the package.
The drivers run as scripts and import it as ``cluster_common`` (their own folder is on
``sys.path``); the tests import ``tests.spark.cluster_common``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Row
from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType

CONF = {
    "spark.ui.enabled": "false",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "2",
    "spark.cores.max": "2",
    "spark.driver.memory": "512m",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # a Python worker on a busy machine may take longer than the 15 s default to connect back
    "spark.python.authenticate.socketTimeout": "120s",
}
WRITE_SCHEMA = StructType(
    [
        StructField("body", BinaryType()),
        StructField("keys", StringType()),
        StructField("tags", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)
ROWS = 40


def rows_to_write(prefix: str) -> list[Row]:
    """The batch write's rows: body ``{prefix}{i}``, keys ``k{i}``, tag ``T`` on odd rows,
    properties ``{"i": i}``."""
    return [
        Row(body=f"{prefix}{i}".encode(), keys=f"k{i}", tags="T" if i % 2 else None,
            properties={"i": str(i)})
        for i in range(ROWS)
    ]  # fmt: skip


def check_written_rows(rows: list[list[Any]], prefix: str) -> None:
    """Every row of ``rows_to_write(prefix)`` read back once (rows as [queueId, queueOffset,
    body, keys, tags, properties]), with its keys, tags and properties; offsets dense per
    queue."""
    by_body = {r[2]: r for r in rows}
    assert len(rows) == ROWS
    assert sorted(by_body) == sorted(f"{prefix}{i}" for i in range(ROWS))
    for i in range(ROWS):
        _, _, _, keys, tags, props = by_body[f"{prefix}{i}"]
        assert (keys, tags, props) == (f"k{i}", "T" if i % 2 else None, {"i": str(i)})
    per_queue: dict[int, list[int]] = {}
    for queue_id, offset, *_ in rows:
        per_queue.setdefault(queue_id, []).append(offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_queue.values())
