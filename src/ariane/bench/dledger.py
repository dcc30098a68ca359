"""``ariane bench dledger``: what a Raft-replicated CommitLog costs producers, and how long a
leader's death stops them.

It starts, in one temporary directory, a NameServer, a single broker (``broker-s``,
ASYNC_MASTER) and a DLedger group of ``--nodes`` brokers (``broker-d``, quorum writes), each
a separate process on this machine with small CommitLog files. Then:

1. the producer benchmark (:mod:`ariane.bench.producer`) at full speed, ``--rounds`` times
   against each, alternating (the machine is noisy: compare ratios of one run): messages per
   second and send RT quantiles; the summary is DLedger's throughput as a fraction of the
   single broker's;
2. ``--kills`` times, while ``--senders`` producers send one message after another (default
   retries, the SDK's route refresh on failure): wait a random moment, SIGKILL the node the
   NameServer lists as master, and measure **election**, the time until another node is
   registered as master (brokerId 0), and **resume**, the time until a send issued after the
   kill is acknowledged (what a user sees); then start the killed node again on its store and
   wait until it answers before the next kill.

Raft timings are the broker's (``dLegerHeartBeatTimeIntervalMs`` x ``dLegerMaxHeartBeatLeak``
is how long followers wait before standing); ``--heartbeat-ms`` sets the heartbeat (DLedger's
default is 2000 ms, 6 s of silence) and ``-o`` any other property of every broker.
``--json`` ends with one JSON line. Everything is deleted on exit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import click
import numpy as np

from ariane.bench._child import stop_child
from ariane.bench.producer import _bench, _Plan
from ariane.client import Admin, Message, Producer
from ariane.common.cli_bounds import BODY_BYTES, IN_FLIGHT, OPTIONAL_COUNT, SECONDS
from ariane.errors import ArianeError
from ariane.remoting.eventloop import run

__all__ = ["dledger_bench"]

_START_TIMEOUT_S = 60.0
_SINGLE, _GROUP = "broker-s", "broker-d"
_TOPICS = {_SINGLE: "BenchSingle", _GROUP: "BenchDLedger"}
#: small files: each CommitLog, ConsumeQueue and index file is reserved on disk at once
_COMMON_PROPS: dict[str, object] = {
    "brokerClusterName": "BenchCluster",
    "flushDiskType": "ASYNC_FLUSH",
    "autoCreateTopicEnable": "false",
    "mappedFileSizeCommitLog": 64 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 600_000,
    "maxHashSlotNum": 100_000,
    "maxIndexNum": 400_000,
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _drain(stream: IO[str]) -> None:
    for _ in stream:
        pass


@dataclass
class _Proc:
    """A child ``ariane`` server: its process and ready line."""

    proc: subprocess.Popen[str]
    ready: dict[str, str]

    @classmethod
    def start(cls, args: list[str], log: Path, marker: str) -> _Proc:
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ariane", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        assert proc.stdout is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        ready: dict[str, str] | None = None
        for line in proc.stdout:
            if line.startswith(f"ready {marker}="):
                ready = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
                break
            if time.monotonic() > deadline:
                break
        if ready is None:
            stop_child(proc)
            raise click.ClickException(f"ariane {args[0]} did not start (log: {log})")
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        return cls(proc, ready)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_child(self.proc)


@dataclass
class _Setup:
    """The NameServer, the single broker and the DLedger group."""

    root: Path
    nodes: int
    props: dict[str, object]
    namesrv: _Proc | None = None
    single: _Proc | None = None
    group: dict[str, _Proc] = field(default_factory=dict)
    confs: dict[str, Path] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.ready["namesrv"]

    def start(self) -> None:
        (self.root / "namesrv").mkdir()
        self.namesrv = _Proc.start(
            ["namesrv", "--listen-port", "0", "--data-dir", str(self.root / "namesrv"),
             "--log-level", "warning"],
            self.root / "namesrv.log", "namesrv",
        )  # fmt: skip
        self.single = self._broker("single", {"brokerName": _SINGLE, "brokerId": 0,
                                              "brokerRole": "ASYNC_MASTER"})  # fmt: skip
        raft = [_free_port() for _ in range(self.nodes)]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(raft))
        for i in range(self.nodes):
            node = f"n{i}"
            self.group[node] = self._broker(node, {
                "brokerName": _GROUP, "brokerId": i + 1, "brokerRole": "SLAVE",
                "enableDLegerCommitLog": "true", "dLegerGroup": _GROUP,
                "dLegerPeers": peers, "dLegerSelfId": node,
                # followers copy the leader's topics every second (RocketMQ: 60 s), so a
                # new leader knows the topic created on the old one
                "slaveSynchronizeInterval": 1000,
            })  # fmt: skip

    def _broker(self, name: str, identity: dict[str, object]) -> _Proc:
        from ariane.common.javaprops import format_properties

        workdir = self.root / name
        workdir.mkdir()
        props = {**_COMMON_PROPS, "namesrvAddr": self.namesrv_addr, "listenPort": 0,
                 "storePathRootDir": str(workdir / "store"), **self.props, **identity}  # fmt: skip
        conf = workdir / "broker.conf"
        conf.write_text(format_properties({k: str(v) for k, v in props.items()}), "utf-8")
        self.confs[name] = conf
        return self.restart(name)

    def restart(self, name: str) -> _Proc:
        proc = _Proc.start(
            ["broker", "-c", str(self.confs[name]), "--log-level", "warning"],
            self.root / f"{name}.log", "broker",
        )  # fmt: skip
        if name != "single":
            self.group[name] = proc
        return proc

    def node_at(self, addr: str) -> str | None:
        for node, proc in self.group.items():
            if proc.ready.get("broker") == addr and proc.proc.poll() is None:
                return node
        return None

    def stop(self) -> None:
        for proc in [*self.group.values(), *([self.single] if self.single else [])]:
            proc.stop()
        if self.namesrv is not None:
            self.namesrv.stop()


@contextlib.contextmanager
def _setup(nodes: int, props: dict[str, object]) -> Iterator[_Setup]:
    root = Path(tempfile.mkdtemp(prefix="ariane-bench-dledger-"))
    setup = _Setup(root, nodes, props)
    try:
        setup.start()
        yield setup
    finally:
        setup.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _master(admin: Admin, setup: _Setup, not_addr: str | None, timeout_s: float) -> str:
    """The address the NameServer lists as the group's master (other than ``not_addr``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(ArianeError):
            info = await admin.cluster_info()
            data = info.broker_addr_table.get(_GROUP)
            addr = data.broker_addrs.get(0) if data is not None else None
            if addr and addr != not_addr and setup.node_at(addr) is not None:
                return addr
        if time.monotonic() > deadline:
            raise click.ClickException(f"no master for {_GROUP} after {timeout_s} s")
        await asyncio.sleep(0.01)


async def _create_topics(setup: _Setup) -> None:
    async with Admin(namesrv_addr=setup.namesrv_addr) as admin:
        assert setup.single is not None
        await admin.create_topic(
            _TOPICS[_SINGLE], broker_addr=setup.single.ready["broker"],
            read_queue_nums=4, write_queue_nums=4,
        )  # fmt: skip
        master = await _master(admin, setup, None, 60)
        await admin.create_topic(
            _TOPICS[_GROUP], broker_addr=master, read_queue_nums=4, write_queue_nums=4
        )
    await asyncio.sleep(3)  # the followers copy the new topic


@dataclass
class _Acks:
    """(send issued, acknowledged) monotonic times of every acknowledged send."""

    times: list[tuple[float, float]] = field(default_factory=list)
    failed: int = 0
    #: failed sends by exception class (and the last attempt's cause)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)

    def fail(self, exc: BaseException) -> None:
        self.failed += 1
        cause = exc.__cause__
        kind = type(exc).__name__
        self.failures[f"{kind} ({type(cause).__name__})" if cause is not None else kind] += 1

    def resumed_after(self, t0: float) -> float | None:
        done = [end for start, end in self.times if start > t0]
        return min(done) - t0 if done else None


async def _failovers(
    setup: _Setup, kills: int, senders: int, rng: random.Random, echo: Any
) -> dict[str, Any]:
    acks = _Acks()
    stop = asyncio.Event()
    producer = Producer("bench_dledger_failover", namesrv_addr=setup.namesrv_addr)

    async def send_loop() -> None:
        while not stop.is_set():
            start = time.monotonic()
            try:
                await producer.send(Message(_TOPICS[_GROUP], b"x" * 128))
            except ArianeError as exc:
                acks.fail(exc)
                continue
            acks.times.append((start, time.monotonic()))

    elections: list[float] = []
    resumes: list[float] = []
    async with Admin(namesrv_addr=setup.namesrv_addr) as admin, producer:
        tasks = [asyncio.create_task(send_loop()) for _ in range(senders)]
        try:
            master = await _master(admin, setup, None, 60)
            for k in range(kills):
                await asyncio.sleep(rng.uniform(0.5, 1.5))
                victim = setup.node_at(master)
                assert victim is not None
                t0 = time.monotonic()
                setup.group[victim].kill()
                master = await _master(admin, setup, master, 60)
                elections.append(time.monotonic() - t0)
                while (resumed := acks.resumed_after(t0)) is None:
                    if time.monotonic() - t0 > 60:
                        raise click.ClickException("sends did not resume within 60 s")
                    await asyncio.sleep(0.01)
                resumes.append(resumed)
                echo(f"kill {k + 1}/{kills} ({victim}): new master in {elections[-1]:.2f} s, "
                     f"sends resumed after {resumed:.2f} s")  # fmt: skip
                await asyncio.to_thread(setup.restart, victim)
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    def spread(xs: list[float]) -> dict[str, float]:
        return {"min": round(min(xs), 3), "median": round(float(np.median(xs)), 3),
                "max": round(max(xs), 3)}  # fmt: skip

    return {"kills": kills, "senders": senders, "acked": len(acks.times),
            "failed_sends": acks.failed, "failed_by_kind": dict(acks.failures.most_common()),
            "election_s": spread(elections),
            "resume_s": spread(resumes), "elections": [round(x, 3) for x in elections],
            "resumes": [round(x, 3) for x in resumes]}  # fmt: skip


@click.command("dledger")
@click.option(
    "-s", "--size", type=BODY_BYTES, default=128, show_default=True, help="Body bytes per message."
)
@click.option(
    "--duration", type=SECONDS, default=10.0, show_default=True, help="Seconds per throughput run."
)
@click.option("--async/--sync", "use_async", default=True, show_default=True,
              help="Pipelined sends (send_async) or concurrent awaiting senders.")  # fmt: skip
@click.option("-c", "--concurrency", type=IN_FLIGHT, default=256, show_default=True,
              help="Requests in flight (--async) or senders (--sync).")  # fmt: skip
@click.option("--rounds", type=OPTIONAL_COUNT, default=3, show_default=True,
              help="Throughput rounds per target, alternating (0: skip).")  # fmt: skip
@click.option("--nodes", type=click.IntRange(3, 5), default=3, show_default=True,
              help="Nodes of the DLedger group.")  # fmt: skip
@click.option("--kills", type=click.IntRange(0, 1000), default=20, show_default=True,
              help="Leader kills of the failover phase (0: skip).")  # fmt: skip
@click.option("--senders", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Producers sending one message after another during the kills.")  # fmt: skip
@click.option("--heartbeat-ms", type=click.IntRange(50, 60_000), default=500, show_default=True,
              help="dLegerHeartBeatTimeIntervalMs (DLedger's default is 2000).")  # fmt: skip
@click.option("--seed", type=int, default=None, help="Seed of the kill moments (any integer).")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A property of every broker (e.g. flushDiskType=SYNC_FLUSH).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="End with one JSON summary line.")
def dledger_bench(
    size: int,
    duration: float,
    use_async: bool,
    concurrency: int,
    rounds: int,
    nodes: int,
    kills: int,
    senders: int,
    heartbeat_ms: int,
    seed: int | None,
    options: tuple[str, ...],
    as_json: bool,
) -> None:
    """Producer throughput of a DLedger group next to a single broker, then the failover time
    over leader kills (all processes on this machine)."""
    props: dict[str, object] = {"dLegerHeartBeatTimeIntervalMs": heartbeat_ms}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="-o")
        props[key.strip()] = value.strip()
    seed = random.SystemRandom().randrange(1 << 30) if seed is None else seed
    results: dict[str, Any] = {"size": size, "concurrency": concurrency, "async": use_async,
                               "nodes": nodes, "heartbeat_ms": heartbeat_ms, "seed": seed,
                               "options": list(options)}  # fmt: skip

    def echo(text: str) -> None:
        click.echo(text, err=as_json)

    with _setup(nodes, props) as setup:
        run(_create_topics(setup))
        peaks: dict[str, list[dict[str, Any]]] = {_SINGLE: [], _GROUP: []}
        for r in range(rounds):
            for target in (_SINGLE, _GROUP) if r % 2 == 0 else (_GROUP, _SINGLE):
                plan = _Plan(_TOPICS[target], size, 1, False, None, 0, None, duration,
                             concurrency)  # fmt: skip
                peak = run(_bench(setup.namesrv_addr, plan, use_async, "bench_dledger", 1e9,
                                  True, False))  # fmt: skip
                peaks[target].append(peak)
                echo(f"round {r + 1} {target}: {peak['msgs_per_s']:,} msg/s (p50 RT "
                     f"{peak['p50_rt_ms']} ms, p99 {peak['p99_rt_ms']} ms)")  # fmt: skip
        if rounds:
            ratios = [d["msgs_per_s"] / s["msgs_per_s"]
                      for s, d in zip(peaks[_SINGLE], peaks[_GROUP], strict=True)
                      if s["msgs_per_s"]]  # fmt: skip
            for target, label in ((_SINGLE, "single"), (_GROUP, "dledger")):
                results[label] = {
                    "runs": peaks[target],
                    "median_msgs_per_s": float(np.median([p["msgs_per_s"] for p in peaks[target]])),
                    "median_p99_rt_ms": float(np.median([p["p99_rt_ms"] for p in peaks[target]])),
                }
            ratio = float(np.median(ratios)) if ratios else 0.0
            results["dledger_to_single_ratio"] = round(ratio, 3)
            echo(f"DLedger ({nodes} nodes) / single broker throughput: {ratio:.2f} (rounds "
                 f"{', '.join(f'{x:.2f}' for x in ratios)}); p99 RT "
                 f"{results['dledger']['median_p99_rt_ms']} ms vs "
                 f"{results['single']['median_p99_rt_ms']} ms")  # fmt: skip
        if kills:
            fo = run(_failovers(setup, kills, senders, random.Random(seed), echo))
            results["failover"] = fo
            e, s = fo["election_s"], fo["resume_s"]
            echo(f"failover over {kills} leader kills (heartbeat {heartbeat_ms} ms): new master "
                 f"min/median/max {e['min']}/{e['median']}/{e['max']} s; sends resumed "
                 f"{s['min']}/{s['median']}/{s['max']} s; {fo['acked']} acked, "
                 f"{fo['failed_sends']} sends failed")  # fmt: skip
            for kind, count in fo["failed_by_kind"].items():
                echo(f"  failed: {count} x {kind}")
    if as_json:
        click.echo(json.dumps(results, default=str))
