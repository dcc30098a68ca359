"""A throw-away ``ariane broker`` child process for the benchmarks that start their own."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence

import click

__all__ = ["broker_child", "broker_child_ready"]


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
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    args = [sys.executable, "-m", "ariane", "broker", "-p", "0", "--store-dir", tmp.name,
            "--log-level", "WARNING"]  # fmt: skip
    for item in overrides:
        args += ["-o", item]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        started: dict[str, str] | None = None
        for line in proc.stdout:
            if line.startswith("ready broker="):
                fields = line.split()[1:]
                started = dict(f.split("=", 1) for f in fields if "=" in f)
                break
        if started is None:
            raise click.ClickException("the broker did not start")
        yield started
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
