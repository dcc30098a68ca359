"""A NameServer and brokers as real processes, for integration and compatibility tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import ServerProcess, free_port, start_server

__all__ = ["HA_TEST_CONF", "Cluster", "HACluster", "HAMember", "start_broker", "start_namesrv"]


def start_namesrv(workdir: Path, *extra: str) -> ServerProcess:
    """Start ``ariane namesrv`` on a free port; its address is ``proc.ready['namesrv']``."""
    workdir.mkdir(parents=True, exist_ok=True)
    return start_server(
        ["namesrv", "--listen-port", "0", "--data-dir", str(workdir), *extra],
        name="namesrv",
        cwd=workdir,
    )


def write_broker_conf(path: Path, props: Mapping[str, object]) -> Path:
    """Write a RocketMQ-style ``broker.conf``."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


_RESTART_ATTEMPTS = 20


def start_broker(
    workdir: Path, namesrv_addr: str, conf: Mapping[str, object] | None = None, *extra: str
) -> ServerProcess:
    """Start ``ariane broker -c broker.conf`` on a free port; address in ``ready['broker']``."""
    workdir.mkdir(parents=True, exist_ok=True)
    props: dict[str, object] = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": 0,
        "namesrvAddr": namesrv_addr,
        "listenPort": 0,
        "storePathRootDir": workdir / "store",
        "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        # 64 MiB CommitLog files: a fresh 1 GiB file is pre-faulted at start, which costs
        # seconds per broker start and a gigabyte of page cache per test
        "mappedFileSizeCommitLog": 64 * 1024 * 1024,
        # a 4 MB index file instead of RocketMQ's 420 MB one: parallel test runs on one disk
        # otherwise fill it (the store refuses puts above 90 % usage)
        "maxHashSlotNum": 100_000,
        "maxIndexNum": 200_000,
        # the disk is shared by parallel runs and benchmarks and passes RocketMQ's 85-90 % now
        # and then: a broker deleting files or refusing writes there fails unrelated tests
        "diskSpaceWarningLevelRatio": 99,
        "diskSpaceCleanForciblyRatio": 98,
    }
    props.update(conf or {})
    conf_path = write_broker_conf(workdir / "broker.conf", props)
    return start_server(["broker", "-c", str(conf_path), *extra], name="broker", cwd=workdir)


@dataclass
class Cluster:
    """One NameServer and some brokers, all started by this test and stopped by PID."""

    root: Path
    namesrv: ServerProcess | None = None
    brokers: dict[str, ServerProcess] = field(default_factory=dict)
    broker_confs: dict[str, dict[str, object]] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.ready["namesrv"]

    def broker_addr(self, name: str = "broker-a") -> str:
        return self.brokers[name].ready["broker"]

    def start(self, broker_names: tuple[str, ...] = ("broker-a",), **conf: object) -> Cluster:
        self.namesrv = start_namesrv(self.root / "namesrv")
        for name in broker_names:
            self.start_broker(name, **conf)
        return self

    def start_broker(self, name: str, **conf: object) -> ServerProcess:
        merged = dict(self.broker_confs.get(name, {}))
        merged.update({"brokerName": name, **conf})
        # the broker's ports are picked below the ephemeral range and kept for its restarts:
        # a port of that range, once the broker is killed, may become the local port of any
        # outgoing connection on the machine for as long as it lives (CI: a restart refused
        # for 10 s on its old HA port)
        picked = [key for key in ("listenPort", "haListenPort") if key not in merged]
        for attempt in range(_RESTART_ATTEMPTS):
            merged.update({key: free_port() for key in picked})
            self.broker_confs[name] = merged
            try:
                proc = start_broker(self.root / name, self.namesrv_addr, merged)
            except RuntimeError as exc:
                retry = picked and "address already in use" in str(exc)
                if not retry or attempt + 1 == _RESTART_ATTEMPTS:
                    raise
                continue
            self.brokers[name] = proc
            return proc
        raise AssertionError("unreachable")

    def restart_broker(self, name: str = "broker-a", *, crash: bool = False) -> ServerProcess:
        """Stop (or SIGKILL) a broker and start it again on the same port and store."""
        old = self.brokers[name]
        port = old.ready["broker"].rsplit(":", 1)[1]
        # the HA port too: by default it is listenPort + 1, which was never ours and may be
        # the local port of a long-lived connection of another test
        pinned: dict[str, object] = {"listenPort": port}
        if "haListenPort" not in self.broker_confs.get(name, {}):
            pinned["haListenPort"] = old.ready["ha"].rsplit(":", 1)[1]
        if crash:
            old.kill()
        else:
            old.stop()
        # a port the test chose may be in the ephemeral range: an outgoing connection of
        # another test may hold it as its local port for a moment; the broker then exits
        # "address already in use" and the start is tried again
        for attempt in range(_RESTART_ATTEMPTS):
            try:
                return self.start_broker(name, **pinned)
            except RuntimeError as exc:
                if "address already in use" not in str(exc) or attempt + 1 == _RESTART_ATTEMPTS:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def stop(self) -> None:
        for proc in self.brokers.values():
            proc.stop()
        if self.namesrv is not None:
            self.namesrv.stop()


# -- master/slave clusters through ``ariane cluster`` (issue 13) ------------------------------

#: Settings that keep replication tests fast: small files, short HA intervals.
HA_TEST_CONF: dict[str, object] = {
    "mappedFileSizeCommitLog": 1024 * 1024,
    "maxMessageSize": 256 * 1024,
    "mappedFileSizeConsumeQueue": 20_000 * 20,
    "maxHashSlotNum": 10_000,
    "maxIndexNum": 40_000,
    "flushDiskType": "ASYNC_FLUSH",
    "haSendHeartbeatInterval": 200,
    "haHousekeepingInterval": 3000,
    "slaveSynchronizeInterval": 300,
    "registerNameServerPeriod": 1000,
    "syncFlushTimeout": 1500,
}


@dataclass
class HAMember:
    """One broker of an ``ariane cluster`` (from its ``cluster.json``)."""

    name: str
    broker_id: int
    role: str
    addr: str
    ha: str
    pid: int
    conf: Path
    store: Path

    @property
    def key(self) -> str:
        return f"{self.name}/{self.broker_id}"


@dataclass
class HACluster:
    """``ariane cluster`` run by a test: a NameServer and broker groups with slaves.

    Members are killed by PID and restarted by the test itself (on their old ports, with
    their ``broker.conf``); everything is stopped by PID at the end.
    """

    root: Path
    groups: int = 1
    slaves: int = 1
    role: str = "ASYNC_MASTER"
    conf: dict[str, object] = field(default_factory=dict)
    member_conf: dict[str, dict[str, object]] = field(default_factory=dict)
    proc: ServerProcess | None = None
    members: dict[str, HAMember] = field(default_factory=dict)
    namesrv_addr: str = ""
    restarted: dict[str, ServerProcess] = field(default_factory=dict)

    def start(self) -> HACluster:
        props = {**HA_TEST_CONF, **self.conf}
        args = [
            "cluster", "--data-dir", str(self.root), "--groups", str(self.groups),
            "--slaves", str(self.slaves), "--role", self.role, "--namesrv-port", "0",
            "--base-port", "0", "--log-level", "INFO",
        ]  # fmt: skip
        for key, value in props.items():
            args += ["-o", f"{key}={value}"]
        for target, extra in self.member_conf.items():
            for key, value in extra.items():
                args += ["-m", f"{target}:{key}={value}"]
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc = start_server(args, name="cluster", cwd=self.root)
        self.namesrv_addr = self.proc.ready["namesrv"]
        doc = json.loads(Path(self.proc.ready["cluster"]).read_text(encoding="utf-8"))
        for b in doc["brokers"]:
            member = HAMember(
                b["name"], b["id"], b["role"], b["addr"], b["ha"], b["pid"], Path(b["conf"]),
                Path(b["store"]),
            )  # fmt: skip
            self.members[member.key] = member
        return self

    def member(self, key: str = "broker-a/0") -> HAMember:
        return self.members[key]

    def addr(self, key: str = "broker-a/0") -> str:
        return self.members[key].addr

    def kill(self, key: str) -> None:
        """SIGKILL a member (a crash) and wait until it is gone."""
        self._signal(key, signal.SIGKILL, 20)

    def stop_member(self, key: str) -> None:
        """SIGTERM a member (a clean stop) and wait until it is gone."""
        self._signal(key, signal.SIGTERM, 30)

    def _signal(self, key: str, sig: int, wait_s: float) -> None:
        member = self.members[key]
        proc = self.restarted.pop(key, None)
        if proc is not None:  # restarted by this test: its own child
            proc.kill() if sig == signal.SIGKILL else proc.stop()
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(member.pid):
            time.sleep(0.02)

    def restart(self, key: str, **conf: object) -> ServerProcess:
        """Start a stopped member again on its old ports with its ``broker.conf``."""
        member = self.members[key]
        port = member.addr.rsplit(":", 1)[1]
        ha_port = member.ha.rsplit(":", 1)[1]
        args = ["broker", "-c", str(member.conf), "-o", f"listenPort={port}",
                "-o", f"haListenPort={ha_port}"]  # fmt: skip
        for k, v in conf.items():
            args += ["-o", f"{k}={v}"]
        for attempt in range(_RESTART_ATTEMPTS):
            try:
                proc = start_server(args, name=key, cwd=member.conf.parent)
                break
            except RuntimeError as exc:
                if "already in use" not in str(exc) or attempt + 1 == _RESTART_ATTEMPTS:
                    raise
                time.sleep(0.5)
        self.restarted[key] = proc
        member.pid = proc.pid
        return proc

    def stop(self) -> None:
        for proc in self.restarted.values():
            proc.stop()
        self.restarted.clear()
        if self.proc is not None:
            self.proc.stop(60)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        # ProcessLookupError: it was reaped between the open() and the read()
        return False
