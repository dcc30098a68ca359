"""``HAConfig``: the replication settings (RocketMQ's ``ha*`` keys of ``MessageStoreConfig``
and the 5.x in-sync replica keys), as the HA service needs them. The broker builds it from
``broker.conf`` (see :class:`ariane.broker.config.BrokerConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ariane.ha.transfer import ReplicaPolicy

__all__ = ["HAConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HAConfig:
    """Replication settings; times in milliseconds, sizes in bytes.

    Attributes:
        heartbeat_interval_ms: ``haSendHeartbeatInterval``: a slave reports, and a master
            with nothing to send writes an empty frame, at least this often; a slave retries
            a failed connection after this long.
        housekeeping_interval_ms: ``haHousekeepingInterval``: a connection that read nothing
            for this long is closed.
        transfer_batch_size: ``haTransferBatchSize``: most bytes per frame.
        sync_timeout_ms: ``syncFlushTimeout``: how long a SYNC_MASTER send waits for slaves.
        policy: how many slaves a SYNC_MASTER send waits for.
        history_check_bytes: how many bytes before its end a reconnecting slave asks for
            again, to check the master has the same history.
        idle_poll_ms: how often a master looks for new data nobody told it about (writes
            from the delay or transaction services; sends notify at once).
        sync_from_last_file: ``syncFromLastFile`` (5.x): an empty slave gets the master's
            last CommitLog file only (RocketMQ 4.x always did this); off (the default), it
            gets everything the master still has.
    """

    heartbeat_interval_ms: int = 5000
    housekeeping_interval_ms: int = 20_000
    transfer_batch_size: int = 32 * 1024
    sync_timeout_ms: int = 5000
    policy: ReplicaPolicy = field(default_factory=ReplicaPolicy)
    history_check_bytes: int = 4096
    idle_poll_ms: int = 100
    sync_from_last_file: bool = False

    @property
    def max_frame_body(self) -> int:
        """The largest frame body a slave accepts (a master of another batch size may send
        up to a whole CommitLog file's remainder; 64 MiB bounds a broken stream)."""
        return max(64 << 20, self.transfer_batch_size)
