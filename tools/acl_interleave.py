"""ACL on/off in one process, in short alternating slices (issue 11's benchmark bar).

``tools/acl_onoff.sh`` runs one ``ariane bench producer`` process per measurement, so a pair
of runs is some 10 s apart and each run pays an interpreter start: on this shared machine the
other sessions' load moves a pair's ratio by ±15-30 %. Here one process holds two producers,
one unsigned on the plain cluster and one signed on the ACL cluster, both warm, and sends with
the bench's own async runner (``ariane.bench.producer``) for ``SECONDS`` at a time, switching
cluster every slice (order swapped every round: off-on, on-off, ...). The runner drains its
in-flight sends at the end of a slice, so slices do not overlap. Per slice it writes one line
for ``tools/acl_onoff_summary.py``::

    <round> <workload> <off|on> <sent> <seconds> <client CPU s> <broker CPU s> <failed>

(client CPU: this process's CPU over the slice; broker CPU: the on-CPU nanoseconds of every
thread of that cluster's broker, ``/proc/PID/task/*/schedstat``, finer than ``/proc/PID/stat``'s
10 ms ticks).

    python tools/acl_interleave.py NS_OFF BROKER_PID_OFF NS_ON BROKER_PID_ON ROUNDS SECONDS \\
        WORKLOAD SIZE BATCH CONCURRENCY [control] > runs.txt

``control`` (an A/A run): the "on" producer does not sign, so the two clusters (both without
ACL then) show how far apart two like clusters measure on this machine.
"""

from __future__ import annotations

import os
import sys
import time

from ariane.acl.credentials import SessionCredentials
from ariane.bench.producer import _Plan, _Runner, _Stats
from ariane.client import Message, Producer
from ariane.remoting.eventloop import run

CREDENTIALS = SessionCredentials("benchuser", "bench-secret")


def on_cpu_seconds(pid: int) -> float:
    """CPU time of every thread of process ``pid`` so far (0 for a thread that just ended)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


async def _slice(
    producer: Producer, plan: _Plan, broker_pid: int
) -> tuple[int, float, float, float, int]:
    stats = _Stats()
    runner = _Runner(producer, plan, stats)
    cpu, broker = time.process_time(), on_cpu_seconds(broker_pid)
    started = time.perf_counter()
    await runner.run_async()
    seconds = time.perf_counter() - started
    cpu, broker = time.process_time() - cpu, on_cpu_seconds(broker_pid) - broker
    return stats.ok_msgs, seconds, cpu, broker, stats.failed


async def main(argv: list[str]) -> None:
    ns_off, pid_off, ns_on, pid_on = argv[1], int(argv[2]), argv[3], int(argv[4])
    rounds, seconds, workload = int(argv[5]), float(argv[6]), argv[7]
    size, batch, concurrency = int(argv[8]), int(argv[9]), int(argv[10])
    plan = _Plan(f"BenchI{size}x{batch}", size, batch, False, None, 0, None, seconds, concurrency)
    off = Producer("bench_off", namesrv_addr=ns_off, send_timeout_ms=10_000)
    signed = None if argv[11:12] == ["control"] else CREDENTIALS
    on = Producer("bench_on", namesrv_addr=ns_on, send_timeout_ms=10_000, credentials=signed)
    modes = {"off": (off, pid_off), "on": (on, pid_on)}
    async with off, on:
        for producer, pid in modes.values():  # routes, connections and a first slice to warm up
            await producer.send(Message(plan.topic, b"warm-up"))
            await _slice(producer, plan, pid)
        for number in range(1, rounds + 1):
            order = ("off", "on") if number % 2 else ("on", "off")
            for mode in order:
                producer, pid = modes[mode]
                sent, wall, cpu, broker, failed = await _slice(producer, plan, pid)
                line = (
                    f"{number} {workload} {mode} {sent} {wall:.4f} {cpu:.5f} {broker:.5f} {failed}"
                )
                print(line, flush=True)


if __name__ == "__main__":
    run(main(sys.argv))
