"""Store maintenance the broker and the admin tools ask for: deleting topics' ConsumeQueues,
dropping ConsumeQueues the CommitLog no longer backs, and running the cleanup by hand.
Mirrors ``DefaultMessageStore.deleteTopics``, ``cleanExpiredConsumerQueue`` and
``executeDeleteFilesManually``; mixed into :class:`~ariane.store.message_store.MessageStore`.
"""

from __future__ import annotations

import os
import threading

from ariane.errors import StoreClosedError
from ariane.store.cleanup import CleanService
from ariane.store.commit_log import CommitLog
from ariane.store.config import StoreConfig
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.disk import Disk
from ariane.store.dispatch import Dispatcher

__all__ = ["StoreMaintenance"]


class StoreMaintenance:
    """Maintenance operations, mixed into the message store."""

    config: StoreConfig
    commit_log: CommitLog
    disk: Disk
    dispatcher: Dispatcher
    consume_queue_table: dict[str, dict[int, ConsumeQueue]]
    cleaner: CleanService | None
    _cq_lock: threading.RLock

    def delete_topics(self, topics: set[str] | list[str]) -> int:
        """Delete the ConsumeQueues of ``topics`` (the CommitLog keeps the records until they
        expire; records not yet dispatched are dropped from dispatch). Returns the number of
        queues deleted."""
        deleted = 0
        doomed = set(topics)
        with self.dispatcher.lock, self._cq_lock, self.commit_log.put_lock:
            self.commit_log.drop_pending_topics(doomed)
            for topic in doomed:
                queues = self.consume_queue_table.pop(topic, None)
                self.dispatcher.forget(topic)
                for key in [k for k in self.commit_log.topic_queue_table if k[0] == topic]:
                    del self.commit_log.topic_queue_table[key]
                if not queues:
                    continue
                for cq in queues.values():
                    cq.destroy()
                    deleted += 1
                try:
                    self.disk.rmdir(os.path.join(self.config.consume_queue_dir, topic))
                    self.disk.sync_dir(self.config.consume_queue_dir)
                except OSError:
                    pass
        return deleted

    def clean_expired_consume_queue(self) -> int:
        """Destroy ConsumeQueues whose last entry points below the CommitLog minimum."""
        min_offset = self.commit_log.min_offset
        removed = 0
        with self._cq_lock:
            for topic, queues in list(self.consume_queue_table.items()):
                for qid, cq in list(queues.items()):
                    if 0 <= cq.max_physic_offset < min_offset:
                        cq.destroy()
                        del queues[qid]
                        self.dispatcher.forget(topic)
                        removed += 1
                if not queues:
                    del self.consume_queue_table[topic]
        return removed

    def execute_delete_files_manually(self) -> None:
        """Make the next 20 cleanup passes delete expired files regardless of hour and space."""
        if self.cleaner is not None:
            self.cleaner.request_manual_delete()

    def clean_files_once(self) -> tuple[int, int]:
        """Run one cleanup pass now (CommitLog files, ConsumeQueue/index files deleted)."""
        if self.cleaner is None:
            raise StoreClosedError("store not started")
        return self.cleaner.clean_once()
