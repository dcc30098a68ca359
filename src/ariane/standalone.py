"""``ariane standalone``: a NameServer and one broker as child processes, for development.

How it works: the NameServer starts first (``ariane namesrv``); once it printed its ready line
the broker starts (``ariane broker``) pointed at it. When both are ready this prints
``ready namesrv=HOST:PORT broker=HOST:PORT grpc=HOST:PORT`` (plus ``metrics=HOST:PORT`` with
``--metrics-port``; ``grpc`` is the 5.x gRPC port, ``--proxy-port``). The children log to ``<data-dir>/logs/namesrv.log`` and ``broker.log``
(rotated by size); what they print (ready lines, crashes) goes to ``namesrv.out`` and
``broker.out`` next to them. With ``--dashboard-port`` the web dashboard (``ariane
dashboard``) starts last, logging to ``dashboard.out``, and the ready line names it too
(``dashboard=HOST:PORT``). Their data goes to ``<data-dir>/namesrv`` and
``<data-dir>/broker/store`` (unless ``--broker-conf`` names a storePathRootDir), with
development-sized store files (:data:`DEV_STORE_SIZES`: about 70 MB reserved instead of
RocketMQ's 1.5 GB; a ``--broker-conf`` value wins). The children
run in their own sessions and are asked to die with this process, so Ctrl-C (SIGINT) or
SIGTERM here stops the broker first (it unregisters and flushes), then the NameServer. If a
child dies on its own, the other is stopped and the exit status is 1.

Everything runs on the main thread: the children's stdout pipes are read with a selector, so
no thread exists when a child is forked.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import click

from ariane.common.javaprops import parse_properties
from ariane.common.process import (
    log_backup_count_option,
    log_level_option,
    log_max_bytes_option,
)

__all__ = ["standalone"]

_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child when this process dies."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    prctl = libc.prctl

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook


class _Child:
    """One child server: its process, console capture file and ready line."""

    def __init__(self, name: str, args: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.logger_path = log_path.with_suffix(".log")
        self.log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ariane", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
            preexec_fn=_die_with_parent_hook(),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.ready: dict[str, str] = {}
        self._partial = b""
        self.eof = False
        self.tail: deque[str] = deque(maxlen=10)

    def pump(self) -> None:
        """Read what the child printed; copy it to the log and look for the ready line."""
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        if not data:
            self.eof = True
            return
        self.log.write(data)
        self.log.flush()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            line = raw.decode("utf-8", "replace").strip()
            self.tail.append(line)
            if line.startswith("ready ") and not self.ready:
                for part in line.split()[1:]:
                    key, _, value = part.partition("=")
                    self.ready[key] = value

    def stop(self, timeout_s: float) -> int:
        """SIGTERM, wait, SIGKILL if it does not go; returns the exit status."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            except ProcessLookupError:
                pass
        return self.proc.wait()

    def close(self) -> None:
        """Copy what is left in the pipe to the log (the child has exited), then close both."""
        if not self.eof:
            os.set_blocking(self.fd, True)
            while not self.eof:
                self.pump()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


class _Supervisor:
    """Pumps the children's output on the main thread and watches for signals."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.children: list[_Child] = []
        self.stop_requested = False

    def add(self, child: _Child) -> None:
        self.children.append(child)
        self.selector.register(child.fd, selectors.EVENT_READ, child)

    def pump(self, timeout_s: float) -> None:
        for key, _ in self.selector.select(timeout_s):
            child: _Child = key.data
            child.pump()
            if child.eof:
                self.selector.unregister(child.fd)

    def dead(self) -> _Child | None:
        return next((c for c in self.children if c.proc.poll() is not None), None)

    def wait_ready(self, child: _Child, timeout_s: float) -> str | None:
        """None once ``child`` is ready, else why not."""
        deadline = time.monotonic() + timeout_s
        while not child.ready:
            if self.stop_requested:
                return "interrupted"
            gone = self.dead()
            if gone is not None:
                self.pump(0)
                return f"{gone.name} exited with status {gone.proc.returncode}"
            if time.monotonic() > deadline:
                return f"{child.name} not ready after {timeout_s:.0f} s"
            self.pump(0.1)
        return None


def _stop_on_signals(sup: _Supervisor) -> None:
    """SIGTERM and SIGINT ask the supervisor to stop its children."""

    def on_signal(signum: int, frame: Any) -> None:
        sup.stop_requested = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _child_log_args(
    logs: Path, level: str, max_bytes: int, backup_count: int
) -> Callable[[str], list[str]]:
    """The logging flags of a child server named ``name``: ``<logs>/<name>.log``, rotated,
    nothing on stderr."""

    def log_args(name: str) -> list[str]:
        return [
            "--log-level", level, "--no-log-stderr", "--log-file", str(logs / f"{name}.log"),
            "--log-max-bytes", str(max_bytes), "--log-backup-count", str(backup_count),
        ]  # fmt: skip

    return log_args


def _read_conf(path: str | None, prog: str = "ariane standalone") -> dict[str, str]:
    """The properties of ``--broker-conf``, every value checked (even those a flag overrides)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except (OSError, UnicodeDecodeError) as exc:
        click.echo(f"{prog}: bad config value: {path}: cannot read: {exc}", err=True)
        sys.exit(2)
    from ariane.broker.config import load_properties
    from ariane.errors import ConfigError

    try:
        load_properties(props)
    except ConfigError as exc:
        click.echo(f"{prog}: bad config value: {path}: {exc}", err=True)
        sys.exit(2)
    return props


def _make_dirs(dirs: tuple[Path, ...], prog: str = "ariane standalone") -> None:
    """Create the data directories, or exit with one line naming the one that failed."""
    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            click.echo(
                f"{prog}: cannot create data directory {d}: {reason}"
                " (choose a writable --data-dir)",
                err=True,
            )
            sys.exit(2)


#: What the development broker reserves on disk (durability issue 12): every store file has its
#: blocks reserved when it is created, so RocketMQ's sizes (1 GiB CommitLog files, 6 MB per
#: ConsumeQueue file, a 420 MB index) would take 1.5 GB before the first message. A broker.conf
#: that sets any of these keeps its own value.
DEV_STORE_SIZES = {
    "mappedFileSizeCommitLog": 64 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 30_000 * 20,
    "maxHashSlotNum": 50_000,
    "maxIndexNum": 200_000,
}


DEFAULT_GRPC_PORT = 8081


def _port_free(host: str | None, port: int) -> bool:
    """Whether ``port`` can be bound on ``host`` (127.0.0.1 when unset) right now."""
    with socket.socket(socket.AF_INET6 if host and ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host or "127.0.0.1", port))
        except OSError:
            return False
    return True


def _broker_args(
    namesrv: str,
    data: Path,
    broker_port: int | None,
    broker_conf: str | None,
    host: str | None,
    log_args: list[str],
    metrics_port: int | None,
    proxy_port: int | None = None,
) -> list[str]:
    conf = _read_conf(broker_conf)
    args = ["broker", "-n", namesrv, *log_args]
    if metrics_port is not None:
        args += ["-o", f"metricsPromExporterPort={metrics_port}"]
    # the gRPC 5.x protocol (issue 16): 8081 like RocketMQ's proxy, a free port when the
    # broker port is one too, off with -1; grpcServerPort in --broker-conf wins over the default
    # (a second standalone on this machine then finds 8081 taken and takes a free port)
    if proxy_port is None and "grpcServerPort" not in conf:
        proxy_port = (
            DEFAULT_GRPC_PORT if broker_port != 0 and _port_free(host, DEFAULT_GRPC_PORT) else 0
        )
    if proxy_port is not None:
        args += ["-o", f"grpcServerPort={proxy_port}"]
    # the HA port: RocketMQ's default is listenPort + 1, which may be any other process's port
    # when the broker port was picked free (the peer harness's ariane target failed to start
    # so); a standalone has no slave, so it binds a free one (registered with the NameServer,
    # where a slave added later finds it); haListenPort in --broker-conf wins
    if "haListenPort" not in conf:
        args += ["-o", "haListenPort=0"]
    if broker_conf is not None:
        args += ["-c", broker_conf]
    if broker_port is not None:
        args += ["-p", str(broker_port)]
    elif "listenPort" not in conf:
        args += ["-p", "10911"]
    if "storePathRootDir" not in conf:
        args += ["--store-dir", str(data / "broker" / "store")]
    for key, value in DEV_STORE_SIZES.items():
        if key not in conf:
            args += ["-o", f"{key}={value}"]
    if host is not None:
        args += ["--host", host]
    return args


def _tail(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def _fail(reason: str, child: _Child | None, prog: str = "ariane standalone") -> None:
    click.echo(f"{prog}: {reason}", err=True)
    if child is not None:
        child.log.flush()
        lines = _tail(child.log_path, 5) or list(child.tail)[-5:]
        for line in [*_tail(child.logger_path, 5), *lines]:
            click.echo(f"  {child.name}: {line}", err=True)
        click.echo(f"  (see {child.logger_path} and {child.log_path})", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="./data",
    show_default=True,
    help="Where the NameServer's and broker's files and the logs (logs/*.log) go.",
)
@click.option(
    "--namesrv-port",
    type=click.IntRange(0, 65535),
    default=9876,
    show_default=True,
    help="NameServer port (0 picks a free port).",
)
@click.option(
    "--broker-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Broker port (default: listenPort from --broker-conf, else 10911; 0 picks a free port).",
)
@click.option(
    "--broker-conf",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="broker.conf with RocketMQ property names for the broker (namesrvAddr is replaced "
    "by this NameServer).",
)
@click.option(
    "--host",
    default=None,
    help="Address both servers bind to (default 127.0.0.1).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the broker's Prometheus /metrics on this port (metricsPromExporterPort).",
)
@click.option(
    "--namesrv-metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the NameServer's Prometheus /metrics on this port.",
)
@click.option(
    "--proxy-port",
    type=click.IntRange(-1, 65535),
    default=None,
    help="Serve the RocketMQ 5.x gRPC protocol on this port (default 8081, or a free port "
    "with --broker-port 0; -1 turns it off).",
)
# the web dashboard (issue 17)
@click.option(
    "--dashboard-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Also serve the web dashboard on this port (0 picks a free port; needs the "
    "'dashboard' extra).",
)
@log_level_option("Logging threshold of both servers.")
@log_max_bytes_option()
@log_backup_count_option()
def standalone(
    data_dir: str,
    namesrv_port: int,
    broker_port: int | None,
    broker_conf: str | None,
    host: str | None,
    metrics_port: int | None,
    namesrv_metrics_port: int | None,
    proxy_port: int | None,
    dashboard_port: int | None,
    log_level: str,
    log_max_bytes: int,
    log_backup_count: int,
) -> None:
    """Run a NameServer and one broker until Ctrl-C or SIGTERM."""
    data = Path(data_dir).resolve()
    logs = data / "logs"
    _make_dirs((logs, data / "namesrv", data / "broker"))
    sup = _Supervisor()
    _stop_on_signals(sup)
    log_args = _child_log_args(logs, log_level, log_max_bytes, log_backup_count)
    ns_args = ["namesrv", "-p", str(namesrv_port), "--data-dir", str(data / "namesrv")]
    ns_args += log_args("namesrv") + (["--host", host] if host else [])
    if namesrv_metrics_port is not None:
        ns_args += ["--metrics-port", str(namesrv_metrics_port)]
    namesrv = _Child("namesrv", ns_args, logs / "namesrv.out")
    sup.add(namesrv)
    broker: _Child | None = None
    dashboard: _Child | None = None
    status = 0
    try:
        problem = sup.wait_ready(namesrv, _START_TIMEOUT_S)
        if problem is None:
            args = _broker_args(
                namesrv.ready["namesrv"], data, broker_port, broker_conf, host,
                log_args("broker"), metrics_port, proxy_port,
            )  # fmt: skip
            broker = _Child("broker", args, logs / "broker.out")
            sup.add(broker)
            problem = sup.wait_ready(broker, _START_TIMEOUT_S)
        if problem is None and dashboard_port is not None:
            dash_args = ["dashboard", "-n", namesrv.ready["namesrv"], "-p", str(dashboard_port)]
            dash_args += ["--log-level", log_level] + (["--host", host] if host else [])
            dashboard = _Child("dashboard", dash_args, logs / "dashboard.out")
            sup.add(dashboard)
            problem = sup.wait_ready(dashboard, _START_TIMEOUT_S)
        if problem is not None:
            if problem != "interrupted":
                failed = next(
                    (c for c in (dashboard, broker) if c is not None and not c.ready), namesrv
                )
                _fail(problem, failed)
                status = 1
        else:
            assert broker is not None
            ready = f"ready namesrv={namesrv.ready['namesrv']} broker={broker.ready['broker']}"
            if "metrics" in broker.ready:
                ready += f" metrics={broker.ready['metrics']}"
            if "grpc" in broker.ready:
                ready += f" grpc={broker.ready['grpc']}"
            if "metrics" in namesrv.ready:
                ready += f" namesrv_metrics={namesrv.ready['metrics']}"
            if dashboard is not None:
                ready += f" dashboard={dashboard.ready['dashboard']}"
            click.echo(ready)
            sys.stdout.flush()
            while not sup.stop_requested:
                gone = sup.dead()
                if gone is not None:
                    sup.pump(0)
                    _fail(f"{gone.name} exited with status {gone.proc.returncode}", gone)
                    status = 1
                    break
                sup.pump(0.2)
    finally:
        for child in (dashboard, broker, namesrv):
            if child is not None:
                code = child.stop(_STOP_TIMEOUT_S)
                if code not in (0, -signal.SIGTERM) and status == 0:
                    status = 1
                child.close()
    sys.exit(status)
