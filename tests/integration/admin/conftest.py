"""Fixtures for the admin CLI tests: one live cluster per module, and CLI runners."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner

from ariane.admin.cli import admin
from tests.support.cluster import Cluster

T = TypeVar("T")


@dataclass
class Result:
    """What one CLI invocation gave."""

    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.exit_code == 0, self.stderr
        return json.loads(self.stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One NameServer and one broker (broker-a) shared by a module's tests."""
    c = Cluster(tmp_path_factory.mktemp("admin-cluster"))
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cli(cluster: Cluster) -> Callable[..., Result]:
    """Run ``mqadmin <args> -n <namesrv>`` in-process (click's CliRunner)."""
    runner = CliRunner()

    def run(*args: str, namesrv: bool = True) -> Result:
        argv = [*args, "-n", cluster.namesrv_addr] if namesrv else list(args)
        r = runner.invoke(admin, argv, prog_name="mqadmin", catch_exceptions=False)
        return Result(r.exit_code, r.stdout, r.stderr)

    return run


def mqadmin_process(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run the ``mqadmin`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("mqadmin")
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=60, env=full_env
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
