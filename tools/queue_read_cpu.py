"""A topic read the way the Spark source's executors read it, without Spark (issue 19 item
3): every queue of TOPIC from its min to its max offset through ``QueueReader.read_raw``
(bulk pulls, or plain pulls with BULK ``false``), ROUNDS times, printing rows/s and the CPU
µs per row of the broker process BROKER_PID and of this client.

    PYTHONPATH=src:tools .venv/bin/python tools/queue_read_cpu.py NAMESRV TOPIC BROKER_PID \
        true|false [ROUNDS]
"""

from __future__ import annotations

import sys
import time

from spark_write_cpu import cpu_parts

from ariane.spark._cluster import ClusterOffsets, QueueReader
from ariane.spark.options import SourceOptions
from ariane.spark.planning import QueueRange


def main(namesrv: str, topic: str, broker_pid: int, bulk: str, rounds: int) -> None:
    opts = SourceOptions.parse({"nameserver": namesrv, "topic": topic, "bulkPull": bulk})
    cluster = ClusterOffsets(opts)
    keys = list(cluster.queues())
    mins, maxs = cluster.bounds(keys)
    for _ in range(rounds):
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
            f"bulkPull={bulk} {rows} rows ({size} bytes) {rows / elapsed:,.0f} rows/s "
            f"broker {broker_us:.2f} µs/row client {client_us:.2f} µs/row",
            flush=True,
        )


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), a[3], int(a[4]) if len(a) > 4 else 2)
