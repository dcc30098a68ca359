"""A NameServer and a DLedger group of brokers as real processes, for the failover tests."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from ariane.client import Admin
from tests.integration.dledger.raft_proxy import RaftProxies
from tests.support.cluster import start_broker, start_namesrv
from tests.support.processes import ServerProcess, free_port

#: Raft timings for tests: a follower stands after 3 x 200 ms of silence
FAST_RAFT: dict[str, object] = {
    "dLegerHeartBeatTimeIntervalMs": 200,
    "dLegerMaxHeartBeatLeak": 3,
    "dLegerMinVoteIntervalMs": 50,
    "dLegerMaxVoteIntervalMs": 200,
    "dLegerVoteWaitMs": 600,
    "dLegerMaxWaitAckTimeMs": 2000,
    "slaveSynchronizeInterval": 500,
    "mappedFileSizeCommitLog": 8 * 1024 * 1024,
}


@dataclass
class DLedgerCluster:
    """One NameServer and ``n`` DLedger brokers of group ``broker-a``."""

    root: Path
    n: int = 3
    conf: dict[str, object] = field(default_factory=dict)
    proxied: bool = False
    metrics: bool = False
    namesrv: ServerProcess | None = None
    nodes: dict[str, ServerProcess] = field(default_factory=dict)
    peers: str = ""
    proxies: RaftProxies | None = None
    listen_ports: dict[str, int] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.ready["namesrv"]

    def start(self) -> DLedgerCluster:
        self.namesrv = start_namesrv(self.root / "namesrv")
        ports = [free_port() for _ in range(self.n)]
        self.peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        if self.proxied:  # nodes listen behind proxies that can cut links
            self.listen_ports = {f"n{i}": free_port() for i in range(self.n)}
            self.proxies = RaftProxies({f"n{i}": p for i, p in enumerate(ports)}, self.listen_ports)
        for i in range(self.n):
            self.start_node(f"n{i}")
        return self

    def node_conf(self, node: str) -> dict[str, object]:
        conf: dict[str, object] = {
            "enableDLegerCommitLog": "true",
            "dLegerGroup": "broker-a",
            "dLegerPeers": self.peers,
            "dLegerSelfId": node,
            **FAST_RAFT,
        }
        if node in self.listen_ports:
            conf["dLegerListenPort"] = self.listen_ports[node]
        if self.metrics:
            conf["metricsPromExporterPort"] = free_port()
        conf.update(self.conf)
        return conf

    def start_node(self, node: str) -> ServerProcess:
        proc = start_broker(self.root / node, self.namesrv_addr, self.node_conf(node))
        self.nodes[node] = proc
        return proc

    def scrape(self, node: str) -> dict[str, float]:
        """The node's ``ariane_dledger_*`` samples (``name{labels}`` -> value)."""
        import urllib.request

        url = f"http://{self.nodes[node].ready['metrics']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("ariane_dledger_"):
                key, _, value = line.rpartition(" ")
                name, _, labels = key.partition("{")
                extra = [
                    p for p in labels.rstrip("}").split(",") if p.startswith(("role=", "peer="))
                ]
                out[name + "".join("{" + e + "}" for e in extra)] = float(value)
        return out

    def kill(self, node: str) -> None:
        self.nodes.pop(node).kill()

    def stop(self) -> None:
        for proc in self.nodes.values():
            proc.stop()
        self.nodes.clear()
        if self.namesrv is not None:
            self.namesrv.stop()
            self.namesrv = None
        if self.proxies is not None:
            self.proxies.close()
            self.proxies = None

    def node_at(self, addr: str) -> str | None:
        for node, proc in self.nodes.items():
            if proc.ready.get("broker") == addr:
                return node
        return None

    async def master(
        self, admin: Admin, *, not_addr: str | None = None, timeout_s: float = 20
    ) -> str:
        """The address the NameServer has as broker-a's master (brokerId 0), waiting for one
        (other than ``not_addr``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = await admin.cluster_info()
            data = info.broker_addr_table.get("broker-a")
            addr = data.broker_addrs.get(0) if data is not None else None
            if addr and addr != not_addr and self.node_at(addr) is not None:
                return addr
            if time.monotonic() > deadline:
                raise AssertionError(f"no master for broker-a (not {not_addr}) in {timeout_s} s")
            await asyncio.sleep(0.02)
