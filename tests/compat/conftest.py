"""Fixtures for compatibility tests with real third-party RocketMQ clients.

Each client lives in its own virtual environment under ``.compat-venvs/`` (built on first use,
kept between runs), so it never mixes with Ariane's packages; in particular PyPI's
``rocketmq`` package (the C++ client's binding) must stay apart from anything else named
``rocketmq``. Scripts run in that environment and print JSON lines that the tests assert on.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
VENVS = REPO / ".compat-venvs"
CPP_SCRIPTS = Path(__file__).parent / "cpp_scripts"


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


@pytest.fixture(scope="session")
def rmq5_python() -> Path:
    """Python with PyPI ``rocketmq-python-client==5.1.2`` (the 5.x gRPC client, issue 16)."""
    return _venv_python(
        "rocketmq-python-client-5.1.2",
        "rocketmq-python-client==5.1.2",
        "from rocketmq import Producer, SimpleConsumer, PushConsumer",
    )


@dataclass
class ScriptRun:
    """A client script running in the background; its JSON lines are collected."""

    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    eof: threading.Event = field(default_factory=threading.Event)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line.rstrip("\n"))
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()
            if event.get("event") == "started":
                self.started.set()
        self.proc.stdout.close()  # at EOF: no unclosed pipe left for the GC to warn about
        self.eof.set()
        with self.cond:
            self.cond.notify_all()

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.cond:
            return [e for e in self.events if e.get("event") == kind]

    def wait(self, timeout_s: float = 180.0) -> list[dict[str, Any]]:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("client script timed out:\n" + self.tail()) from None
        self.eof.wait(10)  # the process exited: let the reader take its last lines
        return self.events

    def wait_for(self, kind: str, count: int, timeout_s: float = 60.0) -> bool:
        with self.cond:
            return (
                self.cond.wait_for(
                    lambda: (
                        len([e for e in self.events if e.get("event") == kind]) >= count
                        or self.proc.poll() is not None
                    ),
                    timeout_s,
                )
                and len([e for e in self.events if e.get("event") == kind]) >= count
            )

    def tail(self) -> str:
        return "\n".join(self.raw[-40:])

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()


class ScriptClient:
    """Runs scripts of a client in its own environment (a venv's Python, Node.js...)."""

    def __init__(
        self, argv: Sequence[str], scripts: Path, home: Path, env: dict[str, str] | None = None
    ) -> None:
        self.argv = list(argv)
        self.scripts = scripts
        self.home = home
        self.env = dict(env or {})

    def spawn(self, script: str, args: Sequence[str]) -> ScriptRun:
        env = dict(os.environ)
        env.update(self.env)
        env["HOME"] = str(self.home)
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("PYTHONPATH", None)
        proc = subprocess.Popen(
            [*self.argv, str(self.scripts / script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=self.home,
            start_new_session=True,
        )
        run = ScriptRun(proc)
        threading.Thread(target=run.pump, daemon=True).start()
        return run

    def run(self, script: str, args: Sequence[str], timeout_s: float = 180.0) -> ScriptRun:
        run = self.spawn(script, args)
        run.wait(timeout_s)
        assert run.proc.returncode == 0, f"{script} exited {run.proc.returncode}:\n{run.tail()}"
        return run


class CppClient(ScriptClient):
    """The C++ client's scripts in its own environment, HOME in a temp dir (the C++ client
    writes its logs under $HOME/logs)."""

    def __init__(self, python: Path, home: Path) -> None:
        super().__init__([str(python)], CPP_SCRIPTS, home)


@pytest.fixture
def rmq5(rmq5_python: Path, tmp_path: Path) -> ScriptClient:
    """The 5.x Python client's scripts (``tests/compat/rmq5_scripts``)."""
    home = tmp_path / "rmq5-home"
    home.mkdir()
    return ScriptClient([str(rmq5_python)], Path(__file__).parent / "rmq5_scripts", home)


NODE_CLIENT = "rocketmq-client-nodejs@1.0.8"


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """``node_modules`` with npm ``rocketmq-client-nodejs`` 1.0.8, for the machine's Node.js
    (built once per machine under ``.compat-venvs``; skipped if npm cannot install it)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are needed for the rocketmq-client-nodejs tests")
    folder = VENVS / "node-rocketmq-client-nodejs-1.0.8"
    ok = folder / ".ok"
    VENVS.mkdir(exist_ok=True)
    with open(VENVS / "node-rocketmq-client-nodejs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ok.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            (folder / "package.json").write_text('{"private": true}\n')
            try:
                for command in (
                    [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", NODE_CLIENT],
                    [node, "-e", "require('rocketmq-client-nodejs')"],
                ):
                    subprocess.run(
                        command, check=True, capture_output=True, timeout=600, cwd=folder
                    )
            except (subprocess.SubprocessError, OSError) as exc:
                pytest.skip(f"cannot install {NODE_CLIENT} from npm: {exc}")
            ok.touch()
    return folder / "node_modules"


@pytest.fixture
def nodejs(node_modules: Path, tmp_path: Path) -> ScriptClient:
    """The Node.js client's scripts (``tests/compat/node_scripts``)."""
    home = tmp_path / "node-home"
    home.mkdir()
    node = shutil.which("node")
    assert node is not None
    scripts = Path(__file__).parent / "node_scripts"
    return ScriptClient([node], scripts, home, {"NODE_PATH": str(node_modules)})


@pytest.fixture
def cpp(cpp_client_python: Path, tmp_path: Path) -> CppClient:
    home = tmp_path / "cpp-home"
    home.mkdir()
    return CppClient(cpp_client_python, home)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster")
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def grpc_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer and a broker serving gRPC on a free port (``ready["grpc"]``), with quick
    transaction checks and short long polls."""
    c = Cluster(tmp_path / "cluster")
    try:
        yield c.start(
            grpcServerPort=0,
            transactionTimeOut=500,
            transactionCheckInterval=500,
            # push consumers wait for their long polls when they shut down
            grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        )
    finally:
        c.stop()
