"""The ``checkpoint`` file (RocketMQ ``StoreCheckpoint``): how far each structure is durable.

How it works: three store timestamps live in memory and are written (4096-byte file, first 40
bytes used, big-endian) and fsync()ed only by ``flush``, which the ConsumeQueue flush thread
calls after the data they describe is on disk, and at shutdown. Abnormal recovery starts at the
newest CommitLog file whose first record is older than ``min_timestamp`` (3 s margin).
"""

from __future__ import annotations

import os

from ariane.store.format import CHECKPOINT, CHECKPOINT_FILE_SIZE

__all__ = ["StoreCheckpoint"]

_SAFETY_MARGIN_MS = 3000


class StoreCheckpoint:
    """Checkpoint timestamps, persisted in ``path``.

    Args:
        path: the checkpoint file (created if missing).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        try:
            with open(path, "rb") as f:
                data = f.read(CHECKPOINT.size)
        except FileNotFoundError:
            data = b""
        if len(data) == CHECKPOINT.size:
            (
                self.physic_msg_timestamp,
                self.logics_msg_timestamp,
                self.index_msg_timestamp,
                self.master_flushed_offset,
                self.confirm_phy_offset,
            ) = CHECKPOINT.unpack(data)

    @property
    def min_timestamp(self) -> int:
        """``getMinTimestamp``: min(physic, logics) minus a 3 s margin, never below 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - _SAFETY_MARGIN_MS)

    @property
    def min_timestamp_index(self) -> int:
        """``getMinTimestampIndex``: also bounded by the index timestamp."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        """Write the file and force it to disk (write to a temp file, then rename)."""
        data = CHECKPOINT.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ).ljust(CHECKPOINT_FILE_SIZE, b"\0")
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
