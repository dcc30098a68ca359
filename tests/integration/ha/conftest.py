"""Fixtures of the replication tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import HACluster


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[HACluster]:
    """An unstarted cluster the test configures and starts; stopped by PID at the end."""
    c = HACluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop()
