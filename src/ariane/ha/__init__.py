"""Master/slave replication (RocketMQ 4.x ``store.ha``: ``HAService``, ``HAConnection``,
``HAClient``, ``GroupTransferService``), for the broker.

* :mod:`ariane.ha.wire`: the byte format (slave reports, master frames), pure.
* :mod:`ariane.ha.transfer`: SYNC_MASTER waits (group transfer, in-sync replica rules), pure.
* :mod:`ariane.ha.master`: the master's HA port and one connection per slave (asyncio).
* :mod:`ariane.ha.slave`: the slave's client, with the history check (asyncio).

The store is reached through its public API only: ``get_commit_log_data`` on the master,
``append_replica`` / ``confirm_replica`` / ``replica`` on the slave.
"""

from ariane.ha.config import HAConfig
from ariane.ha.master import HAMaster, ReplicaWait, SlaveLag
from ariane.ha.slave import HAClient, SlaveState
from ariane.ha.transfer import ReplicaPolicy

__all__ = [
    "HAClient",
    "HAConfig",
    "HAMaster",
    "ReplicaPolicy",
    "ReplicaWait",
    "SlaveLag",
    "SlaveState",
]
