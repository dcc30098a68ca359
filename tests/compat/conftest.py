"""Environments with third-party RocketMQ clients, built on demand under ``.compat-venvs/``."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".compat-venvs"


def _venv_python(name: str, requirement: str, probe: str) -> Path:
    """A venv with ``requirement`` installed, or a skip if it cannot be built here.

    Built once per machine; a lock file keeps parallel test workers from building it twice.
    """
    venv = VENVS / name
    python = venv / "bin" / "python"
    ok = venv / ".ok"
    VENVS.mkdir(exist_ok=True)
    with open(VENVS / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ok.exists():
            try:
                for command in (
                    [sys.executable, "-m", "venv", "--clear", str(venv)],
                    [str(python), "-m", "pip", "install", "--quiet", requirement],
                    [str(python), "-c", probe],
                ):
                    subprocess.run(command, check=True, capture_output=True, timeout=600)
            except (subprocess.SubprocessError, OSError) as exc:
                pytest.skip(f"cannot build the {requirement} environment: {exc}")
            ok.touch()
    return python


@pytest.fixture(scope="session")
def cpp_client_python() -> Path:
    """Python with PyPI ``rocketmq==0.4.4`` (the C++ client 1.2.4 via ctypes)."""
    return _venv_python("rocketmq-0.4.4", "rocketmq==0.4.4", "import rocketmq.client")
