"""The messages Raft peers exchange, and the codes in them (DLedger's ``DLedgerProtocol``).

Every message names its group, its sender (``local_id``), its receiver (``remote_id``) and the
sender's term; a request carries a ``seq`` that its response echoes, so a node can tell the
answer to its current vote or heartbeat round from a late one. Entries travel in APPEND pushes
as a run of consecutive indexes: ``terms`` holds the term of each entry and ``payloads`` the
entries themselves (``None`` is a NOOP entry). The core never reads payloads; a leader's core
emits an APPEND with ``payloads=()`` and the shell fills them from its log when it sends the
push (see :mod:`ariane.raft.node`).

Numeric codes and names are DLedger's (``DLedgerResponseCode``, ``VoteResponse.RESULT``,
``PushEntryRequest.Type``), so logs and tools read the same.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "NOOP",
    "Code",
    "HeartBeatRequest",
    "HeartBeatResponse",
    "Message",
    "ParseResult",
    "PushRequest",
    "PushResponse",
    "PushType",
    "Role",
    "TransferRequest",
    "TransferResponse",
    "VoteRequest",
    "VoteResponse",
    "VoteResult",
]

#: The payload of a NOOP entry (appended by a new leader so it can commit its term).
NOOP: Final = None


class Role(enum.Enum):
    """``MemberState.Role``."""

    CANDIDATE = "CANDIDATE"
    FOLLOWER = "FOLLOWER"
    LEADER = "LEADER"


class Code(enum.IntEnum):
    """``DLedgerResponseCode``."""

    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506

    @classmethod
    def of(cls, value: int) -> Code:
        """The code for ``value`` (``UNKNOWN`` for a number DLedger does not define)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class VoteResult(enum.IntEnum):
    """``VoteResponse.RESULT`` (the book's ``REJECT_ALREADY__HAS_LEADER`` is spelled with one
    underscore upstream today)."""

    UNKNOWN = 0
    ACCEPT = 1
    REJECT_UNKNOWN_LEADER = 2
    REJECT_UNEXPECTED_LEADER = 3
    REJECT_EXPIRED_VOTE_TERM = 4
    REJECT_ALREADY_VOTED = 5
    REJECT_ALREADY_HAS_LEADER = 6
    REJECT_TERM_NOT_READY = 7
    REJECT_TERM_SMALL_THAN_LEDGER = 8
    REJECT_EXPIRED_LEDGER_TERM = 9
    REJECT_SMALL_LEDGER_END_INDEX = 10
    REJECT_TAKING_LEADERSHIP = 11

    @classmethod
    def of(cls, value: int) -> VoteResult:
        """The result for ``value`` (``UNKNOWN`` when out of range)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ParseResult(enum.Enum):
    """``VoteResponse.ParseResult``: what a candidate does after a vote round."""

    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"
    PASSED = "PASSED"
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"


class PushType(enum.IntEnum):
    """``PushEntryRequest.Type``."""

    APPEND = 0
    COMMIT = 1
    COMPARE = 2
    TRUNCATE = 3


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate (``leader_id``) asks for a vote in ``term``."""

    group: str
    local_id: str
    remote_id: str
    term: int
    leader_id: str
    ledger_end_index: int
    ledger_end_term: int
    seq: int


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """The answer to a :class:`VoteRequest`; ``term`` is the voter's (or its ledger end term
    for ``REJECT_TERM_SMALL_THAN_LEDGER``)."""

    group: str
    local_id: str
    remote_id: str
    term: int
    seq: int
    result: VoteResult


@dataclass(frozen=True, slots=True)
class HeartBeatRequest:
    """The leader of ``term`` says it is alive."""

    group: str
    local_id: str
    remote_id: str
    term: int
    leader_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class HeartBeatResponse:
    """SUCCESS, EXPIRED_TERM (with the follower's term), INCONSISTENT_LEADER or
    TERM_NOT_READY."""

    group: str
    local_id: str
    remote_id: str
    term: int
    seq: int
    code: Code


@dataclass(frozen=True, slots=True)
class PushRequest:
    """One push of the leader's ``EntryDispatcher``.

    ``index`` is the first entry (APPEND), the entry compared (COMPARE) or the entry the
    follower's log must end at (TRUNCATE). ``check_term`` is the leader's term of entry
    ``index - 1`` for APPEND and of entry ``index`` for COMPARE/TRUNCATE. A TRUNCATE with
    ``wipe`` empties the follower's log and restarts it at ``index`` (the logs do not
    overlap); then ``check_term`` is the leader's term of entry ``index - 1``.
    """

    group: str
    local_id: str
    remote_id: str
    term: int
    leader_id: str
    kind: PushType
    index: int
    check_term: int
    commit_index: int
    seq: int
    terms: tuple[int, ...] = ()
    payloads: tuple[object, ...] = ()
    wipe: bool = False

    @property
    def last_index(self) -> int:
        """The last entry of an APPEND (``index - 1`` when it carries none)."""
        return self.index + len(self.terms) - 1


@dataclass(frozen=True, slots=True)
class PushResponse:
    """The follower's answer: for APPEND ``index`` is the last entry now stored; for
    COMPARE a mismatch carries ``conflict_term``, the follower's term at ``index``, and
    ``conflict_index``, the first index of that term run (the leader skips what cannot
    match)."""

    group: str
    local_id: str
    remote_id: str
    term: int
    seq: int
    kind: PushType
    code: Code
    index: int
    begin_index: int
    end_index: int
    conflict_index: int = -1
    conflict_term: int = -1


@dataclass(frozen=True, slots=True)
class TransferRequest:
    """``LeadershipTransferRequest`` as the leader sends it to the transferee: take over once
    your log reaches ``take_leadership_ledger_index``."""

    group: str
    local_id: str
    remote_id: str
    term: int
    leader_id: str
    transfer_id: str
    transferee_id: str
    take_leadership_ledger_index: int
    seq: int


@dataclass(frozen=True, slots=True)
class TransferResponse:
    """How the transferee's attempt ended."""

    group: str
    local_id: str
    remote_id: str
    term: int
    seq: int
    code: Code


Message = (
    VoteRequest
    | VoteResponse
    | HeartBeatRequest
    | HeartBeatResponse
    | PushRequest
    | PushResponse
    | TransferRequest
    | TransferResponse
)
