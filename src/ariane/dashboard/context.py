"""What the pages need from the dashboard (a protocol, so the page modules and the app that
wires them import no circle): settings, the admin client, cached lists, the chart sampler,
the accounts, the templates and the dashboard's producer."""

from __future__ import annotations

from typing import Protocol

from jinja2 import Environment

from ariane.client import Admin, Producer
from ariane.dashboard.collector import Collector
from ariane.dashboard.config import DashboardConfig
from ariane.dashboard.data import ClusterData
from ariane.dashboard.security import SessionSigner, UserStore

__all__ = ["Dashboard"]


class Dashboard(Protocol):
    """The shared state of one dashboard (``ariane.dashboard.app.DashboardApp``)."""

    config: DashboardConfig
    admin: Admin
    data: ClusterData
    collector: Collector
    users: UserStore | None
    signer: SessionSigner
    env: Environment

    def nav(self) -> list[tuple[str, str]]:
        """The navigation bar: (path, label)."""
        ...

    async def producer(self) -> Producer:
        """The dashboard's producer, started on first use."""
        ...
