"""``ariane.raft``: a pure, sans-IO Raft core with DLedger's election and replication rules.

Layer 2: no sockets, threads or clock reads. :class:`RaftNode` takes messages, ticks and
"persisted up to" notices with the time, and leaves :mod:`effects <ariane.raft.effects>` for
its shell (:mod:`ariane.dledger` in the broker; a simulated network and disk in the tests).
"""

from ariane.raft.config import RaftConfig
from ariane.raft.effects import (
    AppendEntries,
    Committed,
    Effect,
    ProposalsFailed,
    RoleChanged,
    SaveState,
    Send,
    TruncateLog,
)
from ariane.raft.log import RaftLog
from ariane.raft.messages import (
    NOOP,
    Code,
    HeartBeatRequest,
    HeartBeatResponse,
    Message,
    ParseResult,
    PushRequest,
    PushResponse,
    PushType,
    Role,
    TransferRequest,
    TransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ariane.raft.node import NodeStatus, PeerStatus, RaftNode

__all__ = [
    "NOOP",
    "AppendEntries",
    "Code",
    "Committed",
    "Effect",
    "HeartBeatRequest",
    "HeartBeatResponse",
    "Message",
    "NodeStatus",
    "ParseResult",
    "PeerStatus",
    "ProposalsFailed",
    "PushRequest",
    "PushResponse",
    "PushType",
    "RaftConfig",
    "RaftLog",
    "RaftNode",
    "Role",
    "RoleChanged",
    "SaveState",
    "Send",
    "TransferRequest",
    "TransferResponse",
    "TruncateLog",
    "VoteRequest",
    "VoteResponse",
    "VoteResult",
]
