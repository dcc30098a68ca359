"""``ariane bench memory``: the broker's resident memory with many topics and groups.

How it works: starts ``ariane standalone`` (NameServer + broker, ASYNC_FLUSH, fresh temporary
directory), reads the broker process's ``VmRSS`` once it is ready, creates ``--topics``
topics of ``--queues`` queues and ``--groups`` subscription groups through the admin API in
bulk (one request per broker per batch), waits ``--settle`` seconds (route registration,
config persistence, a GC pass), and reads ``VmRSS`` and the peak ``VmHWM`` again. It prints
the numbers; it asserts nothing. Issue 18's goal: 1,000 topics x 8 queues and 10,000 groups
under 300 MB RSS.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import click
import orjson

from ariane.bench._child import ariane_child
from ariane.client import Admin
from ariane.common.cli_bounds import MAX_SECONDS, OPTIONAL_COUNT, QUEUES, FiniteFloatRange
from ariane.common.native import build_name
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.bodies import TopicConfig

__all__ = ["memory_bench", "proc_memory_kib"]

_TOPIC_BATCH = 250
_GROUP_BATCH = 2000


def proc_memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of a process, in KiB, from ``/proc/PID/status``."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _sep, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found += [int(c) for c in f.read().split()]
    return found


def _broker_pid(launcher: int) -> int:
    for child in _children(launcher):
        with open(f"/proc/{child}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        if b"broker" in argv:
            return child
    raise click.ClickException("no broker process under the standalone launcher")


@contextlib.contextmanager
def _standalone() -> Iterator[tuple[dict[str, str], int]]:
    args = ["standalone", "--namesrv-port", "0", "--broker-port", "0"]
    with ariane_child(
        args, "--data-dir", "ariane-bench-memory-", "namesrv", "the standalone cluster"
    ) as (ready, proc):
        yield ready, _broker_pid(proc.pid)


async def _seed(namesrv: str, topics: int, queues: int, groups: int) -> float:
    start = time.perf_counter()
    async with Admin(namesrv_addr=namesrv, timeout_ms=60_000) as admin:
        names = [f"MemTopic{i:05d}" for i in range(topics)]
        for first in range(0, topics, _TOPIC_BATCH):
            await admin.create_topics(
                [TopicConfig(n, queues, queues) for n in names[first : first + _TOPIC_BATCH]]
            )
        for first in range(0, groups, _GROUP_BATCH):
            await admin.create_groups(
                [
                    SubscriptionGroupConfig(f"mem_group_{i:05d}")
                    for i in range(first, min(groups, first + _GROUP_BATCH))
                ]
            )
    return time.perf_counter() - start


@click.command("memory")
@click.option(
    "--topics", type=OPTIONAL_COUNT, default=1000, show_default=True, help="topics to create"
)
@click.option(
    "--queues", type=QUEUES, default=8, show_default=True, help="read/write queues per topic"
)
@click.option(
    "--groups", type=OPTIONAL_COUNT, default=10_000, show_default=True, help="subscription groups"
)
@click.option(
    "--settle",
    type=FiniteFloatRange(0, MAX_SECONDS),
    default=5.0,
    show_default=True,
    help="seconds to wait before reading",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object last")
def memory_bench(topics: int, queues: int, groups: int, settle: float, as_json: bool) -> None:
    """Broker RSS with TOPICS x QUEUES and GROUPS (a standalone cluster of its own)."""
    out: dict[str, Any] = {"topics": topics, "queues": queues, "groups": groups}
    out["build"] = build_name()
    with _standalone() as (ready, pid):
        idle = proc_memory_kib(pid)
        out["seed_s"] = asyncio.run(_seed(ready["namesrv"], topics, queues, groups))
        time.sleep(settle)
        loaded = proc_memory_kib(pid)
    out["idle_rss_mb"] = idle["VmRSS"] / 1024
    out["rss_mb"] = loaded["VmRSS"] / 1024
    out["peak_rss_mb"] = loaded["VmHWM"] / 1024
    click.echo(
        f"broker ({out['build']}): idle {out['idle_rss_mb']:.0f} MB RSS; with {topics} topics x "
        f"{queues} queues and {groups} groups {out['rss_mb']:.0f} MB RSS "
        f"(peak {out['peak_rss_mb']:.0f} MB), seeded in {out['seed_s']:.1f} s"
    )
    if as_json:
        click.echo(orjson.dumps(out).decode())
