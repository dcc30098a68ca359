"""A topic read the way the Spark source's executors read it, without Spark (issue 19 item
3): every queue of TOPIC from its min to its max offset through ``QueueReader.read_raw``
(bulk pulls, or plain pulls with BULK ``false``), ROUNDS times, printing rows/s and the CPU
µs per row of the broker process BROKER_PID and of this client. OPTIONS ``k=v,...;k=v,...``
adds reader options (e.g. ``bulkPullSocket=false``), the sets taken in turn round by round
(A/B in one process).

    PYTHONPATH=src:tools .venv/bin/python tools/queue_read_cpu.py NAMESRV TOPIC BROKER_PID \
        true|false [ROUNDS] [OPTIONS]
"""

from __future__ import annotations

import sys
import time

from spark_write_cpu import cpu_parts

from ariane.spark._cluster import ClusterOffsets, QueueReader
from ariane.spark.options import SourceOptions
from ariane.spark.planning import QueueRange


def main(
    namesrv: str, topic: str, broker_pid: int, bulk: str, rounds: int, extra: list[dict[str, str]]
) -> None:
    base = {"nameserver": namesrv, "topic": topic, "bulkPull": bulk}
    cluster = ClusterOffsets(SourceOptions.parse(base))
    keys = list(cluster.queues())
    mins, maxs = cluster.bounds(keys)
    for r in range(rounds):
        chosen = extra[r % len(extra)] if extra else {}
        opts = SourceOptions.parse({**base, **chosen})
        broker = sum(cpu_parts(broker_pid))
        client = time.process_time()
        started = time.perf_counter()
        rows = size = 0
        for key in keys:
            rng = QueueRange(key[0], key[1], key[2], mins[key], maxs[key])
            size += sum(map(len, QueueReader(opts).read_raw(rng)))
            rows += maxs[key] - mins[key]
        elapsed = time.perf_counter() - started
        broker_us = (sum(cpu_parts(broker_pid)) - broker) / rows * 1e6
        client_us = (time.process_time() - client) / rows * 1e6
        print(
            f"bulkPull={bulk} {chosen} {rows} rows ({size} bytes) {rows / elapsed:,.0f} rows/s "
            f"broker {broker_us:.2f} µs/row client {client_us:.2f} µs/row",
            flush=True,
        )


if __name__ == "__main__":
    a = sys.argv[1:]
    sets = a[5].split(";") if len(a) > 5 else []
    options = [dict(kv.split("=", 1) for kv in s.split(",") if kv) for s in sets]
    main(a[0], a[1], int(a[2]), a[3], int(a[4]) if len(a) > 4 else 2, options)
