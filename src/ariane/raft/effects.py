"""What the core asks its shell to do, in order.

The shell runs the effects of one call in the order given. Two rules make Raft safe:

* :class:`SaveState` must be durable (written and synced) before any later :class:`Send`
  leaves: a node never answers a vote, or asks for one, in a term it could forget.
* Entries of :class:`AppendEntries` may be acknowledged only after the shell reports them
  with ``RaftNode.persisted``; the core waits for that notice itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ariane.raft.messages import Code, Message, Role

__all__ = [
    "AppendEntries",
    "Committed",
    "Effect",
    "ProposalsFailed",
    "RoleChanged",
    "SaveState",
    "Send",
    "TruncateLog",
]


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``msg`` to ``msg.remote_id``. An APPEND push from a leader has ``payloads=()``:
    the shell fills in the payloads of entries ``msg.index .. msg.last_index`` from its log."""

    msg: Message


@dataclass(frozen=True, slots=True)
class SaveState:
    """Persist the term and the vote (``currterm``) before sending anything else."""

    term: int
    voted_for: str | None


class AppendEntries(NamedTuple):
    """Write entries ``first_index ..`` with their terms and payloads after the current end
    of the log, then report them with ``persisted`` once durable. (A tuple, not a frozen
    dataclass: a leader makes one per burst of proposals, and a frozen dataclass takes about
    six times as long to build.)"""

    first_index: int
    terms: tuple[int, ...]
    payloads: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Drop every entry after ``after_index``. With ``wipe`` drop them all and restart the log
    at ``after_index + 1``, following an entry of ``base_term``. Keep a copy of what is cut."""

    after_index: int
    wipe: bool = False
    base_term: int = -1


@dataclass(frozen=True, slots=True)
class Committed:
    """Entries up to ``index`` are committed: apply them, answer their proposers."""

    index: int


@dataclass(frozen=True, slots=True)
class ProposalsFailed:
    """Proposals ``first .. last`` (this node's, as leader) will not be answered with success:
    TERM_CHANGED or WAIT_QUORUM_ACK_TIMEOUT. They may still commit later."""

    first: int
    last: int
    code: Code


@dataclass(frozen=True, slots=True)
class RoleChanged:
    """The node is now ``role`` in ``term``; ``leader_id`` is the known leader, if any."""

    term: int
    role: Role
    leader_id: str | None


Effect = Send | SaveState | AppendEntries | TruncateLog | Committed | ProposalsFailed | RoleChanged
