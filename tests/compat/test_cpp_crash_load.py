"""The broker crash-under-load test with the C++ client (rocketmq-client-cpp 1.2.4 via PyPI
``rocketmq==0.4.4``) producing next to our SDK: every message either producer had
acknowledged is consumed after the kills (tests/integration/client/test_broker_crash_load.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.conftest import CppClient
from tests.integration.client.test_broker_crash_load import crash_under_load
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.integration]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_cpp_and_sdk_producers_through_broker_kills(
    cluster: Cluster, cpp_client_python: Path, tmp_path: Path, mode: str
) -> None:
    home = tmp_path / "cpp-home"
    home.mkdir()
    crash_under_load(cluster, mode, CppClient(cpp_client_python, home))
