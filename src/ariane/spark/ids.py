"""Deterministic message ids for rows written by Spark (no Spark, no I/O).

How it works: a row's id is the BLAKE2b-128 digest of (namespace, batch id, partition, row
index) as 32 upper-case hex characters, the shape of a RocketMQ client message id. The sink
sets it as the message's ``UNIQ_KEY``, so it is what consumers see as ``msgId``. In a
streaming write the namespace is the query id (kept in the checkpoint) and the batch id is
the micro-batch; Spark replays a failed micro-batch with the same id and the same input, so
every replayed message carries the id of its first attempt and an idempotent consumer can
drop it. In a batch write the namespace is the ``idNamespace`` option or a fresh UUID per
write job, shared by the retries of its tasks.
"""

from __future__ import annotations

import hashlib

__all__ = ["MessageIdSequence", "message_id"]


class MessageIdSequence:
    """Ids of the rows of one task: ``next()`` gives row 0, 1, 2...

    Args:
        namespace: query id (streaming) or write-job id (batch).
        batch_id: micro-batch id (0 for batch writes).
        partition: the Spark partition id of the task.
    """

    __slots__ = ("_base", "row")

    def __init__(self, namespace: str, batch_id: int, partition: int) -> None:
        self._base = hashlib.blake2b(
            f"{namespace}\x00{batch_id}\x00{partition}\x00".encode(), digest_size=16
        )
        self.row = 0

    def id_of(self, row: int) -> str:
        """The id of row ``row`` of this task."""
        h = self._base.copy()
        h.update(str(row).encode())
        return h.hexdigest().upper()

    def ids(self, first: int, n: int) -> list[str]:
        """The ids of rows ``first .. first + n`` (``id_of`` of each, in one loop)."""
        copy = self._base.copy
        out = []
        for row in range(first, first + n):
            h = copy()
            h.update(b"%d" % row)
            out.append(h.hexdigest().upper())
        return out

    def next(self) -> str:
        """The id of the next row."""
        value = self.id_of(self.row)
        self.row += 1
        return value


def message_id(namespace: str, batch_id: int, partition: int, row: int) -> str:
    """The id of one row (see the module docstring)."""
    return MessageIdSequence(namespace, batch_id, partition).id_of(row)
