"""Services that run inside the broker process but live in layers above the broker (the gRPC
proxy of the 5.x protocol).

The broker never imports them: the process entry point (``ariane/cli.py``) registers a factory
here, and ``ariane broker`` asks every factory for a service once the broker has started. A
factory returns ``None`` when its service is not configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ariane.broker.controller import BrokerController

__all__ = ["BrokerService", "ServiceFactory", "factories", "register"]


class BrokerService(Protocol):
    """A service started after the broker and stopped before it."""

    async def start(self) -> int:
        """Start serving; returns the bound port.

        Raises:
            OSError: the port cannot be bound.
        """
        ...

    async def stop(self) -> None:
        """Stop serving."""
        ...

    @property
    def ready_field(self) -> str:
        """``name=host:port`` for the broker's ready line."""
        ...


ServiceFactory = Callable[["BrokerController"], "BrokerService | None"]
_factories: list[ServiceFactory] = []


def register(factory: ServiceFactory) -> None:
    """Add a factory (idempotent)."""
    if factory not in _factories:
        _factories.append(factory)


def factories() -> list[ServiceFactory]:
    """The registered factories, in registration order."""
    return list(_factories)
