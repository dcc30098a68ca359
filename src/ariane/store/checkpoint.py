"""The ``checkpoint`` file (RocketMQ ``StoreCheckpoint``): how far each structure is durable.

How it works: three store timestamps live in memory and are written (4096-byte file, first 40
bytes used, big-endian) and synced only by ``flush``, which the ConsumeQueue flush thread
calls after the data they describe is on disk, and at shutdown. It is replaced atomically
(temp file, sync, rename, directory sync), so a crash leaves the old or the new one. Abnormal
recovery starts at the newest CommitLog file whose first record is older than
``min_timestamp`` (3 s margin). A checkpoint that is not what this module writes (another
size, negative values, bytes after the fields) is damage: loading refuses it.
"""

from __future__ import annotations

from ariane.errors import CorruptionError
from ariane.store.disk import OS_DISK, Disk, write_atomically
from ariane.store.format import CHECKPOINT, CHECKPOINT_FILE_SIZE

__all__ = ["StoreCheckpoint", "checkpoint_problem"]

_SAFETY_MARGIN_MS = 3000


class StoreCheckpoint:
    """Checkpoint timestamps, persisted in ``path``.

    Args:
        path: the checkpoint file (a missing file reads as all zeros).
        disk: the file system.

    Raises:
        CorruptionError: the file exists but is damaged (see the module docs).
    """

    def __init__(self, path: str, disk: Disk = OS_DISK) -> None:
        self.path = path
        self.disk = disk
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        try:
            data = disk.read_file(path)
        except FileNotFoundError:
            return
        values = _parse(path, data)
        (
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ) = values

    @property
    def min_timestamp(self) -> int:
        """``getMinTimestamp``: min(physic, logics) minus a 3 s margin, never below 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - _SAFETY_MARGIN_MS)

    @property
    def min_timestamp_index(self) -> int:
        """``getMinTimestampIndex``: also bounded by the index timestamp."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    def encode(self) -> bytes:
        """The file content."""
        return CHECKPOINT.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ).ljust(CHECKPOINT_FILE_SIZE, b"\0")

    def flush(self) -> None:
        """Write the file and force it to disk (write to a temp file, then rename)."""
        write_atomically(self.disk, self.path, self.encode())


def _parse(path: str, data: bytes) -> tuple[int, int, int, int, int]:
    if len(data) != CHECKPOINT_FILE_SIZE:
        raise CorruptionError(
            f"checkpoint of {len(data)} bytes, not {CHECKPOINT_FILE_SIZE}", path=path
        )
    values: tuple[int, int, int, int, int] = CHECKPOINT.unpack_from(data)
    if (
        any(v < 0 for v in values)
        or data[CHECKPOINT.size :].count(0) != len(data) - CHECKPOINT.size
    ):
        raise CorruptionError("checkpoint holds values this store never writes", path=path)
    return values


def checkpoint_problem(path: str, disk: Disk = OS_DISK) -> str | None:
    """Why the checkpoint at ``path`` is damaged, or None (missing is not damage)."""
    try:
        _parse(path, disk.read_file(path))
    except FileNotFoundError:
        return None
    except CorruptionError as exc:
        return str(exc)
    return None
