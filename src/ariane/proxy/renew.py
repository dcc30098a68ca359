"""Auto-renewed receipt handles of push consumers (RocketMQ proxy's
``DefaultReceiptHandleManager`` and ``RenewStrategyPolicy``).

How it works: a receive with ``auto_renew`` (what push consumers send) leases its messages for
the default invisible time and leaves their invisibility to the proxy. Each handed-out handle
is remembered per client under the handle the client holds; a sweep renews every lease that
ends within ``ahead_ms`` with a longer invisible time (1 min, 3, 5, 10, 30 min, then hours), so
a slow listener does not see its message again. Ack, change and forward look the client's
handle up and use the newest one. After ``max_ms`` from the receive the lease is no longer
renewed (the message comes back when it ends, as a nack). Pure bookkeeping; the proxy does the
broker calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from ariane.common.pop import ReceiptHandle

__all__ = ["RENEW_STEPS_MS", "Lease", "LeaseTable"]

#: Invisible times of successive renewals (the last one repeats).
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)


@dataclass(slots=True)
class Lease:
    """One auto-renewed message."""

    group: str
    topic: str
    handle: ReceiptHandle
    received_ms: int
    renewals: int = 0

    def next_invisible_ms(self) -> int:
        """The invisible time of the next renewal."""
        return RENEW_STEPS_MS[min(self.renewals, len(RENEW_STEPS_MS) - 1)]


class LeaseTable:
    """The auto-renewed messages of one client, by the handle the client holds.

    Args:
        ahead_ms: renew leases ending within this time (10 s upstream).
        max_ms: stop renewing this long after the receive (3 h upstream).
    """

    def __init__(self, ahead_ms: int = 10_000, max_ms: int = 3 * 3_600_000) -> None:
        self.ahead_ms = ahead_ms
        self.max_ms = max_ms
        self.leases: dict[str, Lease] = {}

    def add(self, client_handle: str, lease: Lease) -> None:
        """Remember a handed-out message."""
        self.leases[client_handle] = lease

    def latest(self, client_handle: str) -> str:
        """The newest handle of the message the client knows by ``client_handle``."""
        lease = self.leases.get(client_handle)
        return client_handle if lease is None else lease.handle.encode()

    def settle(self, client_handle: str) -> None:
        """The client acked, changed or forwarded it: no more renewals."""
        self.leases.pop(client_handle, None)

    def due(self, now_ms: int) -> list[tuple[str, Lease]]:
        """Leases to renew now; leases past ``max_ms`` are forgotten (they run out)."""
        out = []
        for key, lease in list(self.leases.items()):
            if now_ms - lease.received_ms >= self.max_ms:
                del self.leases[key]
            elif lease.handle.next_visible_time - now_ms <= self.ahead_ms:
                out.append((key, lease))
        return out

    def renewed(self, client_handle: str, handle: ReceiptHandle) -> None:
        """Record the handle a renewal returned."""
        lease = self.leases.get(client_handle)
        if lease is not None:
            lease.handle = handle
            lease.renewals += 1
