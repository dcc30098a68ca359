"""Fixtures of the dashboard tests: one cluster and one dashboard per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.dashboard.support import DashClient, start_dashboard
from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A NameServer and broker-a."""
    c = Cluster(tmp_path_factory.mktemp("dash-cluster"))
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def dashboard(cluster: Cluster) -> Iterator[ServerProcess]:
    """``ariane dashboard`` for that cluster."""
    proc = start_dashboard(cluster.namesrv_addr)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def client(dashboard: ServerProcess) -> Iterator[DashClient]:
    """An HTTP client of the dashboard."""
    c = DashClient(dashboard.ready["dashboard"])
    try:
        yield c
    finally:
        c.close()
