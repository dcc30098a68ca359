"""In-process broker cost of the Spark sink's SEND_BATCH requests (issue 19 item 3): N
messages of 1 KiB in batches of ROWS, each message with its own ``UNIQ_KEY`` and the same id
as ``__ARIANE_DEDUP`` (what ``RowSender.add_batch`` sends), fed to an in-process broker's
server channel (``ariane.bench._micro_broker``: the event-loop thread's whole work per
request). Prints the main thread's and the process's CPU µs per message (the process adds
the dispatch, flush and allocation threads); ``nodedup`` turns the idempotence window off.

    PYTHONPATH=src .venv/bin/python tools/sink_batch_cost.py N ROWS [nodedup]
"""

from __future__ import annotations

import sys
import time

from ariane.bench import _micro_cases as mc
from ariane.bench._micro_broker import InProcessBroker
from ariane.common import native
from ariane.common import properties as props
from ariane.common.batch import encode_batch
from ariane.remoting.protocol.codec import encode
from ariane.spark.ids import MessageIdSequence


def main(n: int, rows: int, dedup: bool) -> None:
    broker = InProcessBroker(**({} if dedup else {"dedup_window_size": 0}))
    try:
        request = mc.batch_request()
        ids = MessageIdSequence("ns", 0, 0)
        frames = []
        for _ in range(n // rows + 1):
            entries = []
            for _ in range(rows):
                mid = ids.next()
                text = f"{props.UNIQ_KEY}\x01{mid}\x02{props.DEDUP}\x01{mid}\x02"
                entries.append((mc.BODY, 0, text))
            request.body = encode_batch(entries)
            frames.append(encode(request))
        broker.request(mc.batch_request())  # creates the topic
        thread, process = time.thread_time(), time.process_time()
        for frame in frames[1:]:
            broker.feed(frame)
        count = (len(frames) - 1) * rows
        print(
            f"{native.build_name()}: main thread {(time.thread_time() - thread) / count * 1e6:.2f}"
            f" µs/msg, process {(time.process_time() - process) / count * 1e6:.2f} µs/msg"
        )
    finally:
        broker.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), "nodedup" not in sys.argv[3:])
