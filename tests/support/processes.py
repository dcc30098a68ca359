"""Start Ariane servers as real processes on free ports, and stop them by PID.

Every server prints one line ``ready <role>=HOST:PORT ...`` on stdout once it accepts
connections; the helpers here wait for that line, keep the rest of the output for failure
reports, and stop only the processes they started.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ServerProcess", "ariane_command", "free_port", "start_server"]


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PICKS = random.Random()
_NEXT: list[int] = []  # the offset in this worker's slice where the next pick starts


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (for servers whose port 0 means "off", and
    for ports a test must know before the server starts or keep across a restart).

    It is picked below the kernel's ephemeral range: a port from that range, once its
    server stops, may become the local port of any outgoing connection on the machine, and
    a restart on it then fails with "address already in use" for as long as that
    connection lives. Each xdist worker draws from its own slice, so parallel workers do
    not pick the same port between the check here and the server's bind; within a worker
    the picks walk the slice in turn (from a random start), so the ports one test picks
    before any of its servers binds are all different.
    """
    high = min(_ephemeral_low(), 65536)
    low = max(1024, high - 12_000)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    span = max(64, (high - low) // 16)
    start = low + (index % 16) * span
    size = min(span, high - start)
    if not _NEXT:
        _NEXT.append(_PICKS.randrange(size))
    for _ in range(min(size, 400)):
        port = start + _NEXT[0] % size
        _NEXT[0] += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # a crowded machine: any port the kernel gives
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ariane_command(*args: str) -> list[str]:
    """The argv that runs ``ariane <args>`` with the interpreter running the tests."""
    return [sys.executable, "-m", "ariane", *args]


@dataclass
class ServerProcess:
    """A running server process and what it printed."""

    proc: subprocess.Popen[str]
    name: str
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=2000))
    ready: dict[str, str] = field(default_factory=dict)
    _ready_event: threading.Event = field(default_factory=threading.Event)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return "\n".join(self.lines)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            self.lines.append(line)
            if line.startswith("ready ") and not self._ready_event.is_set():
                for part in line.split()[1:]:
                    key, _, value = part.partition("=")
                    self.ready[key] = value
                self._ready_event.set()
        self.proc.stdout.close()  # at EOF: no unclosed pipe left for the GC to warn about
        self._ready_event.set()

    def wait_ready(self, timeout_s: float = 30.0) -> dict[str, str]:
        if not self._ready_event.wait(timeout_s) or not self.ready:
            self.kill()
            raise RuntimeError(f"{self.name} did not become ready:\n{self.output()}")
        return self.ready

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM, wait, then SIGKILL if needed; returns the exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.wait()

    def kill(self) -> None:
        """SIGKILL (a crash)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def start_server(
    args: Sequence[str], *, name: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> ServerProcess:
    """Start ``ariane <args>`` and return once it printed its ready line."""
    full_env = dict(os.environ)
    full_env["PYTHONUNBUFFERED"] = "1"
    if env:
        full_env.update(env)
    proc = subprocess.Popen(
        ariane_command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env=full_env,
        start_new_session=True,
    )
    server = ServerProcess(proc=proc, name=name)
    threading.Thread(target=server._pump, name=f"pump-{name}", daemon=True).start()
    server.wait_ready()
    return server


@contextlib.contextmanager
def running(server: ServerProcess) -> Iterator[ServerProcess]:
    """Stop ``server`` when the block ends, whatever happens."""
    try:
        yield server
    finally:
        server.stop()
