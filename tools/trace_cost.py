"""In-process cost of consume trace on the client, without I/O (issue 15): per delivery of one
message, ``ConsumeTracer.before`` + ``after`` against a real ``AsyncTraceDispatcher`` (never
started: the queue is drained here), and every ROUND deliveries what the dispatcher's worker
does with the queue (encoding the open pairs, ``pack``, the bodies' UTF-8). Messages are
distinct stored messages (their own property dicts, as a pull gives them). Prints µs of
process time per delivery, best of REPS; add ``nogc`` to run with the collector off.

    PYTHONPATH=src .venv/bin/python tools/trace_cost.py [nogc]
"""

from __future__ import annotations

import copy
import gc
import sys
import time
from typing import Any, cast

from ariane.bench._micro_cases import stored_message
from ariane.client._trace_dispatch import AsyncTraceDispatcher, TraceSettings, encoded, pack
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client.config import ClientConfig
from ariane.common.trace import ConsumeReturnType

N, ROUND, REPS = 40_000, 1000, 7


def main() -> None:
    dispatcher = AsyncTraceDispatcher(
        trace_topic=None,
        host_config=ClientConfig(namesrv_addr="127.0.0.1:9876"),
        host_group="bench",
        kind="CONSUME",
        sender_factory=cast(Any, None),
        settings=TraceSettings(queue_size=10**7),
    )
    tracer = ConsumeTracer(dispatcher, "benchmark_consumer")
    base = stored_message()
    calls = []
    for i in range(N):
        msg = copy.copy(base)
        msg.properties = dict(base.properties)
        msg.properties["UNIQ_KEY"] = f"7F0000010001{i:020X}"
        calls.append([msg])
    ok = ConsumeReturnType.SUCCESS
    queue = dispatcher._queue

    def one_pass() -> tuple[float, float]:
        hooks = work = 0.0
        for start in range(0, N, ROUND):
            t0 = time.process_time()
            for msgs in calls[start : start + ROUND]:
                before = tracer.before(msgs)
                if before is not None:
                    tracer.after(before, 1, True, ok)
            t1 = time.process_time()
            items = [queue.popleft() for _ in range(len(queue))]
            for packed in pack(encoded(items)):
                packed.data.encode()
            del items
            hooks += t1 - t0
            work += time.process_time() - t1
        return hooks / N * 1e6, work / N * 1e6

    if "nogc" in sys.argv[1:]:
        gc.disable()
    results = [one_pass() for _ in range(REPS)]
    hooks = min(r[0] for r in results)
    work = min(r[1] for r in results)
    total = min(r[0] + r[1] for r in results)
    print(f"hooks {hooks:.2f}  worker {work:.2f}  total {total:.2f} us/delivery")


if __name__ == "__main__":
    main()
