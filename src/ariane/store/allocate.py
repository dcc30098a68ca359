"""Keeps CommitLog files ready ahead of the writer (RocketMQ ``AllocateMappedFileService``).

How it works: a background thread polls the writer's position every few milliseconds and
calls :meth:`~ariane.store.mapped_file_queue.MappedFileQueue.prepare_ahead` until nothing is
left to do: it creates (``posix_fallocate``) the next CommitLog file once the writer is past
half of the current one, and reads the next ``window`` bytes ahead of the writer into the page
cache, a few MiB at a time with the GIL released. The writer then finds its file ready and
its pages present; if it ever gets ahead, it creates the file itself and takes the faults.
"""

from __future__ import annotations

from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.service import ServiceThread

__all__ = ["AllocateMappedFileService"]

#: How far ahead of the writer pages are kept in the page cache.
WARM_WINDOW_BYTES = 64 << 20
#: Bytes read per step (one ``preadv``).
WARM_CHUNK_BYTES = 8 << 20
#: Idle poll interval.
POLL_S = 0.02


class AllocateMappedFileService(ServiceThread):
    """Creates and warms CommitLog files ahead of the writer.

    Args:
        queue: the CommitLog's file queue.
        window_bytes: how far ahead of the write position to warm.
    """

    def __init__(self, queue: MappedFileQueue, *, window_bytes: int = WARM_WINDOW_BYTES) -> None:
        super().__init__("AllocateMappedFileService")
        self.queue = queue
        self.window = min(window_bytes, queue.mapped_file_size)
        self._buf = bytearray(WARM_CHUNK_BYTES)

    def run_once(self) -> None:
        if not self.queue.prepare_ahead(self.queue.max_offset, self.window, self._buf):
            self.wait(POLL_S)
