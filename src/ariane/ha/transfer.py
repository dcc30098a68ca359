"""Waiting for slaves (RocketMQ ``GroupTransferService`` and ``CommitLog.handleHA``), as pure
state: no threads, no clock of its own.

How it works: a SYNC_MASTER that stored a message registers the end offset of the message
(``wroteOffset + wroteBytes``) with how many slaves must hold it and a deadline. Each slave
acknowledges by reporting its CommitLog offset; a request needing ``k`` slaves is done once
the ``k``-th largest acknowledged offset reaches its end offset. Requests are kept in one heap
per ``k`` ordered by end offset, so an acknowledgement completes every covered request at
once, however many producers were waiting (concurrent puts share the wait: that is the
"group" in group transfer). Requests past their deadline time out. The owner (the asyncio
shell in :mod:`ariane.ha.master`) calls :meth:`on_acks` when an acknowledgement arrives and
:meth:`expire` at :meth:`next_deadline`, and completes what they return.

:func:`needed_slave_acks` decides, from the settings and the slaves' positions at put time,
whether to wait and for how many slaves (4.x: any one slave; 5.x: ``inSyncReplicas``,
``minInSyncReplicas``, ``enableAutoInSyncReplicas``, ``allAckInSyncStateSet``).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["GroupTransfer", "ReplicaPolicy", "needed_slave_acks"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReplicaPolicy:
    """The settings that decide how many slaves a SYNC_MASTER waits for.

    Attributes:
        in_sync_replicas: copies wanted, the master's included (``inSyncReplicas``).
        min_in_sync_replicas: fewest copies with ``auto_in_sync_replicas``.
        auto_in_sync_replicas: ``enableAutoInSyncReplicas``.
        all_ack_in_sync: ``allAckInSyncStateSet``: every slave in sync must acknowledge.
        slave_fallbehind_max: ``haSlaveFallbehindMax``: a slave further behind cannot help.
        max_gap_not_in_sync: ``haMaxGapNotInSync``: a slave further behind is not in sync.
    """

    in_sync_replicas: int = 2
    min_in_sync_replicas: int = 1
    auto_in_sync_replicas: bool = False
    all_ack_in_sync: bool = False
    slave_fallbehind_max: int = 256 * 1024 * 1024
    max_gap_not_in_sync: int = 256 * 1024 * 1024


def needed_slave_acks(policy: ReplicaPolicy, end_offset: int, slaves: list[int]) -> int:
    """How many slave acknowledgements a message ending at ``end_offset`` needs.

    Args:
        policy: the settings.
        end_offset: the end of the message in the CommitLog.
        slaves: the acknowledged offset of each connected slave (-1: no report yet).

    Returns:
        0: answer at once (nothing to wait for); ``k > 0``: wait for ``k`` slaves; -1: not
        enough slaves can acknowledge in time (SLAVE_NOT_AVAILABLE).
    """
    reported = [ack for ack in slaves if ack >= 0]
    in_sync = sum(1 for ack in reported if end_offset - ack < policy.max_gap_not_in_sync)
    if policy.all_ack_in_sync:
        need = in_sync
        if need == 0:
            return 0  # the master alone is in sync (RocketMQ: a SyncStateSet of one is OK)
    else:
        copies = policy.in_sync_replicas
        if policy.auto_in_sync_replicas:
            copies = max(min(copies, 1 + in_sync), policy.min_in_sync_replicas)
        need = copies - 1
        if need <= 0:
            return 0
    able = sum(1 for ack in reported if end_offset - ack < policy.slave_fallbehind_max)
    return need if able >= need else -1


class _Request(Generic[T]):
    __slots__ = ("deadline", "done", "end_offset", "need", "token")

    def __init__(self, end_offset: int, need: int, deadline: float, token: T) -> None:
        self.end_offset = end_offset
        self.need = need
        self.deadline = deadline
        self.token = token
        self.done = False


class GroupTransfer(Generic[T]):
    """Requests waiting for slave acknowledgements; ``T`` is whatever the owner completes
    (a future).

    The common case, one slave needed and requests arriving in offset and deadline order
    (sends on one event loop), goes to a plain queue: an acknowledgement pops from its front,
    so a request costs O(1). Anything else goes to the heaps.
    """

    def __init__(self) -> None:
        self._ones: deque[tuple[int, float, T]] = deque()
        self._by_need: dict[int, list[tuple[int, int, _Request[T]]]] = {}
        self._deadlines: list[tuple[float, int, _Request[T]]] = []
        self._seq = itertools.count()
        self._waiting = 0

    def __len__(self) -> int:
        return self._waiting + len(self._ones)

    def add(self, end_offset: int, need: int, deadline: float, token: T) -> None:
        """Wait until ``need`` (>= 1) slaves acknowledged ``end_offset``, or ``deadline``."""
        ones = self._ones
        if need == 1 and (not ones or (ones[-1][0] <= end_offset and ones[-1][1] <= deadline)):
            ones.append((end_offset, deadline, token))
            return
        req = _Request(end_offset, need, deadline, token)
        seq = next(self._seq)
        heapq.heappush(self._by_need.setdefault(need, []), (end_offset, seq, req))
        heapq.heappush(self._deadlines, (deadline, seq, req))
        self._waiting += 1

    def on_acks(self, acks: list[int]) -> list[T]:
        """The requests now covered, given every connected slave's acknowledged offset."""
        done: list[T] = []
        ones = self._ones
        if ones and acks:
            best = max(acks)
            while ones and ones[0][0] <= best:
                done.append(ones.popleft()[2])
        if not self._waiting:
            return done
        ranked = sorted(acks, reverse=True)
        for need, heap in self._by_need.items():
            if need > len(ranked):
                continue
            covered = ranked[need - 1]
            while heap and heap[0][0] <= covered:
                req = heapq.heappop(heap)[2]
                if not req.done:
                    req.done = True
                    self._waiting -= 1
                    done.append(req.token)
        return done

    def expire(self, now: float) -> list[T]:
        """The requests whose deadline passed (they are removed)."""
        done: list[T] = []
        ones = self._ones
        while ones and ones[0][1] <= now:
            done.append(ones.popleft()[2])
        heap = self._deadlines
        while heap and (heap[0][2].done or heap[0][0] <= now):
            req = heapq.heappop(heap)[2]
            if not req.done:
                req.done = True
                self._waiting -= 1
                done.append(req.token)
        self._compact()
        return done

    def next_deadline(self) -> float | None:
        """The earliest deadline still waiting, None when nothing waits."""
        heap = self._deadlines
        while heap and heap[0][2].done:
            heapq.heappop(heap)
        first = heap[0][0] if heap else None
        if self._ones and (first is None or self._ones[0][1] < first):
            first = self._ones[0][1]
        return first

    def drain(self) -> list[T]:
        """Remove and return everything still waiting (shutdown, role change)."""
        done = [token for _, _, token in self._ones]
        self._ones.clear()
        done += [req.token for _, _, req in self._deadlines if not req.done]
        for _, _, req in self._deadlines:
            req.done = True
        self._deadlines.clear()
        self._by_need.clear()
        self._waiting = 0
        return done

    def _compact(self) -> None:
        """Drop finished requests from the per-need heaps once they dominate."""
        for need, heap in list(self._by_need.items()):
            if not heap:
                del self._by_need[need]
            elif len(heap) > 64 and len(heap) > 2 * self._waiting:
                live = [item for item in heap if not item[2].done]
                heapq.heapify(live)
                self._by_need[need] = live
