"""``ariane.dledger``: the shell around the Raft core for a broker (layer 4).

DLedger storage (:mod:`~ariane.dledger.files`, formats in :mod:`~ariane.dledger.format`),
the replica binding the core to its files (:mod:`~ariane.dledger.replica`), the CommitLog kept
in DLedger entries (:mod:`~ariane.dledger.commitlog`) and its message store
(:mod:`~ariane.dledger.message_store`), the Raft port's frames (:mod:`~ariane.dledger.wire`)
and its asyncio transport (:mod:`~ariane.dledger.transport`). Upgrading a master/slave store:
:mod:`~ariane.dledger.upgrade`.
"""

from ariane.dledger.config import DLedgerConfig
from ariane.dledger.message_store import DLedgerMessageStore
from ariane.dledger.transport import RaftTransport

__all__ = ["DLedgerConfig", "DLedgerMessageStore", "RaftTransport"]
