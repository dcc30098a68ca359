"""In-process cost of sends through the broker's whole request path (issue 18 item 2): N
encoded 1 KiB SEND_MESSAGE_V2 requests, or N messages in SEND_BATCH requests of 64, or (``run``)
N requests in reads of 100 (a read's single sends in one pass, ``SendRun``), fed to an
in-process broker's server channel (``ariane.bench._micro_broker``); prints the main thread's
and the process's CPU µs per message, best of ROUNDS.

    PYTHONPATH=src .venv/bin/python tools/send_cost.py N ROUNDS single|batch|run|both

With ``ARIANE_COST_SETTLE=1`` the collector is settled as a started broker settles it
(``gc_policy.settle_after_start(10_000)``: collect, freeze, young collections every 10,000
allocations) before the timed feeds, so how often a collection lands in the counted window
moves the count less.

``tools/send_callgrind.sh`` runs it under callgrind for instruction counts, which the load of
a shared machine does not move; ``ariane bench micro --only broker.send_single`` is the same
path as a benchmark row.
"""

from __future__ import annotations

import os
import sys
import time

from ariane.bench import _micro_cases as mc
from ariane.bench._micro_broker import InProcessBroker
from ariane.common import native
from ariane.common.gc_policy import settle_after_start
from ariane.remoting.protocol.codec import encode

BATCH = mc.BATCH
RUN = 100  # requests per read in the ``run`` mode


def main(n: int, rounds: int, mode: str) -> None:
    broker = InProcessBroker()
    try:
        single, batch = mc.send_request(), mc.batch_request()
        broker.request(single)
        broker.request(batch)
        frames = {
            "single": (encode(single), n, 1),
            "batch": (encode(batch), n // BATCH, BATCH),
            "run": (encode(single) * RUN, n // RUN, RUN),
        }
        if mode == "run":
            broker.feed(frames["run"][0])  # the pass's first run: its lookups made
        if os.environ.get("ARIANE_COST_SETTLE") == "1":
            settle_after_start(10_000)  # as the broker's CLI does (gcYoungThreshold)
        for name in ("single", "batch") if mode == "both" else (mode,):
            frame, calls, per = frames[name]
            best_thread = best_process = float("inf")
            for _ in range(rounds):
                thread, process = time.thread_time(), time.process_time()
                for _ in range(calls):
                    broker.feed(frame)
                best_thread = min(best_thread, time.thread_time() - thread)
                best_process = min(best_process, time.process_time() - process)
            per_msg = 1e6 / max(1, calls * per)
            print(
                f"{native.build_name()} {name}: main thread {best_thread * per_msg:.2f} µs/msg,"
                f" process {best_process * per_msg:.2f} µs/msg (best of {rounds})"
            )
    finally:
        broker.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "both")
