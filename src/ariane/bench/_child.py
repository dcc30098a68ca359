"""A throw-away ``ariane broker`` child process for the benchmarks that start their own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence

import click

__all__ = [
    "ariane_child",
    "broker_child",
    "broker_child_ready",
    "proc_cpu_seconds",
    "stop_child",
]


@contextlib.contextmanager
def broker_child(addr: str | None, prefix: str, overrides: Sequence[str] = ()) -> Iterator[str]:
    """Yield ``addr`` when given; else start ``ariane broker`` on a free port with a fresh
    store in a temporary directory (``overrides`` are ``key=value`` broker properties), yield
    its address, and stop it and remove its files on exit.

    Raises:
        click.ClickException: the child broker did not start.
    """
    if addr is not None:
        yield addr
        return
    with broker_child_ready(prefix, overrides) as ready:
        yield ready["broker"]


@contextlib.contextmanager
def broker_child_ready(prefix: str, overrides: Sequence[str] = ()) -> Iterator[dict[str, str]]:
    """``broker_child`` yielding the whole ready line as a dict (``broker``, ``grpc``...).

    Raises:
        click.ClickException: the child broker did not start.
    """
    args = ["broker", "-p", "0"]
    for item in overrides:
        args += ["-o", item]
    with ariane_child(args, "--store-dir", prefix, "broker", "the broker") as (ready, _):
        yield ready


@contextlib.contextmanager
def ariane_child(
    args: Sequence[str], dir_flag: str, prefix: str, needed: str, what: str
) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
    """Start ``ariane ARGS DIR_FLAG <temporary directory>``, wait for its ``ready k=v ...``
    line and yield its fields (which must include ``needed``) and the process; on exit stop
    it and remove its files.

    Raises:
        click.ClickException: ``what`` did not start.
    """
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    argv = [sys.executable, "-m", "ariane", *args, dir_flag, tmp.name, "--log-level", "WARNING"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready: dict[str, str] = {}
        for line in proc.stdout:
            if line.startswith("ready "):
                ready = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
                break
        if needed not in ready:
            raise click.ClickException(f"{what} did not start")
        yield ready, proc
    finally:
        stop_child(proc)
        tmp.cleanup()


def stop_child(proc: subprocess.Popen[str]) -> None:
    """SIGTERM ``proc``, SIGKILL it after 60 s, and close its output pipe."""
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux ``/proc/PID/stat``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
