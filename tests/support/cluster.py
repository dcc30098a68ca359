"""A NameServer and brokers as real processes, for integration and compatibility tests."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import ServerProcess, start_server

__all__ = ["Cluster", "start_broker", "start_namesrv"]


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
        self.broker_confs[name] = merged
        proc = start_broker(self.root / name, self.namesrv_addr, merged)
        self.brokers[name] = proc
        return proc

    def restart_broker(self, name: str = "broker-a", *, crash: bool = False) -> ServerProcess:
        """Stop (or SIGKILL) a broker and start it again on the same port and store."""
        old = self.brokers[name]
        port = old.ready["broker"].rsplit(":", 1)[1]
        if crash:
            old.kill()
        else:
            old.stop()
        # the old port is in the ephemeral range: an outgoing connection of another test may
        # hold it as its local port for a moment; the broker then exits "address already in
        # use" and the start is tried again
        for attempt in range(_RESTART_ATTEMPTS):
            try:
                return self.start_broker(name, listenPort=port)
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
