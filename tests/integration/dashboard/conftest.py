"""Fixtures of the dashboard tests: one cluster and one dashboard per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.dashboard.support import DashClient, start_dashboard
from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess

_CQ_FILE_BYTES = 20 * 1024  # 1,024 entries


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A NameServer and broker-a (small consume queue files: the scale test makes 4,000
    queues, and a broker with default-sized ones takes seconds to stop)."""
    c = Cluster(tmp_path_factory.mktemp("dash-cluster"))
    try:
        yield c.start(mappedFileSizeConsumeQueue=_CQ_FILE_BYTES)
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
