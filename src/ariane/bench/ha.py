"""``ariane bench ha``: what replication costs producers, and how far a slave lags.

It starts two throw-away ``ariane cluster`` runs side by side, each one group of a master and
one slave (same machine), an ASYNC_MASTER and a SYNC_MASTER one, then runs the producer
benchmark (:mod:`ariane.bench.producer`):

1. as fast as each group takes messages, ``--rounds`` times, alternating the roles (the
   machine is noisy: compare ratios of one run): messages per second, RT, and the CPU the
   master and the slave used per message (from ``/proc``);
2. at ``--load`` (default 80 %) of ASYNC_MASTER's median rate, while the master's replication
   status (GET_BROKER_HA_STATUS) is sampled every 100 ms: how many bytes, and how many seconds
   of messages, the slave has not acknowledged (``lagSeconds``: the age of the oldest message
   the slave lacks).

The summary gives SYNC_MASTER's throughput as a fraction of ASYNC_MASTER's (group transfer is
what keeps it close: concurrent sends share one wait for the slave) and the lag quantiles.
``--json`` ends with one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import click
import numpy as np

from ariane.bench._child import proc_cpu_seconds, stop_child
from ariane.bench.producer import _bench, _Plan
from ariane.client import Admin
from ariane.common.cli_bounds import BATCH, BODY_BYTES, COUNT, IN_FLIGHT, SECONDS, FiniteFloatRange
from ariane.errors import ArianeError
from ariane.remoting.eventloop import run

__all__ = ["ha_bench"]

_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
_CLUSTER_PROPS = (
    "mappedFileSizeCommitLog=268435456",  # 256 MiB files: a fresh 1 GiB one costs seconds
    "mappedFileSizeConsumeQueue=2000000",
    "maxHashSlotNum=500000",
    "maxIndexNum=2000000",
    "haSendHeartbeatInterval=1000",
)
#: an auto-created topic of 4 queues (BenchmarkTest has 1024, each with its own files)
_TOPIC = "BenchHA"


@contextlib.contextmanager
def _cluster(role: str, extra: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """A one-group cluster (master + slave) in a temporary directory; yields its ready line."""
    with tempfile.TemporaryDirectory(prefix="ariane-bench-ha-") as tmp:
        args = [sys.executable, "-m", "ariane", "cluster", "--data-dir", tmp, "--groups", "1",
                "--slaves", "1", "--role", role, "--namesrv-port", "0", "--base-port", "0",
                "--log-level", "WARNING"]  # fmt: skip
        for prop in (*_CLUSTER_PROPS, *extra):
            args += ["-o", prop]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert proc.stdout is not None
            ready: dict[str, str] | None = None
            for line in proc.stdout:
                if line.startswith("ready "):
                    ready = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
                    break
            if ready is None:
                raise click.ClickException(f"the {role} cluster did not start")
            yield ready
        finally:
            stop_child(proc)


def _broker_pids(ready: dict[str, str]) -> dict[str, int]:
    with open(ready["cluster"], encoding="utf-8") as f:
        doc = json.load(f)
    return {"master": doc["brokers"][0]["pid"], "slave": doc["brokers"][1]["pid"]}


def _peak(ready: dict[str, str], plan: _Plan, use_async: bool) -> dict[str, Any]:
    """One run at full speed, with the brokers' CPU per message."""
    pids = _broker_pids(ready)
    before = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
    result = run(_bench(ready["namesrv"], plan, use_async, "bench_ha", 1e9, True, False))
    sent = max(1, int(result["sent"]))
    for name, pid in pids.items():
        used = proc_cpu_seconds(pid) - before[name]
        result[f"{name}_cpu_us_per_msg"] = round(used * 1e6 / sent, 1)
    return result


async def _sample_lag(
    namesrv: str, master: str, stop: asyncio.Event, interval_s: float
) -> dict[str, float]:
    """Sample the slave's lag behind ``master`` until ``stop``; quantiles of bytes and s."""
    lag_bytes: list[float] = []
    lag_s: list[float] = []
    async with Admin(namesrv_addr=namesrv) as admin:
        while not stop.is_set():
            try:
                status = await admin.broker_ha_status(master)
            except ArianeError:
                status = {}
            for conn in status.get("haConnectionInfo") or []:
                lag_bytes.append(float(conn.get("diff", 0)))
                lag_s.append(float(conn.get("lagSeconds", 0.0)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
    if not lag_s:
        return {"samples": 0}
    b = np.array(lag_bytes)
    s = np.array(lag_s)
    return {
        "samples": len(lag_s),
        "lag_s_p50": round(float(np.percentile(s, 50)), 4),
        "lag_s_p99": round(float(np.percentile(s, 99)), 4),
        "lag_s_max": round(float(s.max()), 4),
        "lag_bytes_p99": int(np.percentile(b, 99)),
        "lag_bytes_max": int(b.max()),
    }


async def _loaded(
    namesrv: str, master: str, plan: _Plan, use_async: bool, group: str
) -> dict[str, Any]:
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_lag(namesrv, master, stop, 0.1))
    try:
        result = await _bench(namesrv, plan, use_async, group, 1e9, True, False)
    finally:
        stop.set()
    result.update(await sampler)
    return result


@click.command("ha")
@click.option(
    "-s", "--size", type=BODY_BYTES, default=128, show_default=True, help="Body bytes per message."
)
@click.option(
    "--duration", type=SECONDS, default=10.0, show_default=True, help="Seconds per phase."
)
@click.option(
    "-b", "--batch", type=BATCH, default=1, show_default=True, help="Messages per request."
)
@click.option("--async/--sync", "use_async", default=True, show_default=True,
              help="Pipelined sends (send_async) or concurrent awaiting senders.")  # fmt: skip
@click.option("-c", "--concurrency", type=IN_FLIGHT, default=256, show_default=True,
              help="Requests in flight (--async) or senders (--sync).")  # fmt: skip
@click.option("--rounds", type=COUNT, default=3, show_default=True,
              help="Maximum-rate rounds per role, alternating (the machine is noisy).")  # fmt: skip
@click.option("--load", type=FiniteFloatRange(0.01, 1.0), default=0.8, show_default=True,
              help="Rate of the lag phase, as a fraction of ASYNC_MASTER's maximum.")  # fmt: skip
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A broker property for both clusters (e.g. flushDiskType=SYNC_FLUSH).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="End with one JSON summary line.")
def ha_bench(
    size: int,
    duration: float,
    batch: int,
    use_async: bool,
    concurrency: int,
    rounds: int,
    load: float,
    options: tuple[str, ...],
    as_json: bool,
) -> None:
    """Producer throughput against ASYNC_MASTER and SYNC_MASTER groups (one slave each; both
    clusters run side by side and the rounds alternate), and the slave's lag at a steady
    fraction of ASYNC_MASTER's median maximum."""
    plan = _Plan(_TOPIC, size, batch, False, None, 0, None, duration, concurrency)
    results: dict[str, Any] = {"size": size, "batch": batch, "concurrency": concurrency,
                               "async": use_async, "load": load, "rounds": rounds}  # fmt: skip
    with _cluster("ASYNC_MASTER", options) as a, _cluster("SYNC_MASTER", options) as s:
        ready = {"ASYNC_MASTER": a, "SYNC_MASTER": s}
        peaks: dict[str, list[dict[str, Any]]] = {role: [] for role in _ROLES}
        for r in range(rounds):
            for role in _ROLES if r % 2 == 0 else tuple(reversed(_ROLES)):
                peak = _peak(ready[role], plan, use_async)
                peaks[role].append(peak)
                click.echo(
                    f"round {r + 1} {role}: {peak['msgs_per_s']:,} msg/s "
                    f"(p99 RT {peak['p99_rt_ms']} ms; CPU per message: master "
                    f"{peak['master_cpu_us_per_msg']} us, slave {peak['slave_cpu_us_per_msg']} us)",
                    err=as_json,
                )
        medians = {
            role: float(np.median([p["msgs_per_s"] for p in peaks[role]])) for role in _ROLES
        }
        ratios = [
            sp["msgs_per_s"] / ap["msgs_per_s"]
            for ap, sp in zip(peaks["ASYNC_MASTER"], peaks["SYNC_MASTER"], strict=True)
            if ap["msgs_per_s"]
        ]
        rate = load * medians["ASYNC_MASTER"]
        steady_plan = _Plan(
            plan.topic, size, batch, False, None, 0, None, duration, concurrency, rate
        )
        for role in _ROLES:
            time.sleep(1.0)  # let the slaves catch up before the steady phase
            steady = run(
                _loaded(ready[role]["namesrv"], ready[role]["broker-a/0"], steady_plan,
                        use_async, "bench_ha_load")
            )  # fmt: skip
            results[role] = {"max": peaks[role], "median_msgs_per_s": medians[role],
                             "steady": steady}  # fmt: skip
            click.echo(
                f"{role}: median max {medians[role]:,.0f} msg/s; at {rate:,.0f} msg/s sent "
                f"{steady['msgs_per_s']:,}/s (p99 RT {steady['p99_rt_ms']} ms), slave lag p50 "
                f"{steady.get('lag_s_p50', '-')} s, p99 {steady.get('lag_s_p99', '-')} s, max "
                f"{steady.get('lag_s_max', '-')} s ({steady.get('lag_bytes_max', '-')} bytes)",
                err=as_json,
            )
    ratio = float(np.median(ratios)) if ratios else 0.0
    results["sync_to_async_ratio"] = round(ratio, 3)
    results["sync_to_async_ratios"] = [round(x, 3) for x in ratios]
    click.echo(
        f"SYNC_MASTER / ASYNC_MASTER throughput: {ratio:.2f} (median of rounds "
        f"{', '.join(f'{x:.2f}' for x in ratios)})",
        err=as_json,
    )
    if as_json:
        click.echo(json.dumps(results, default=str))
