"""In-process cost of SYNC_FLUSH single sends through the broker's whole path (issue 18: broker
CPU per produced message under SYNC_FLUSH): WAVES waves of READS reads of 100 encoded 1 KiB
SEND_MESSAGE_V2 requests each, fed to an in-process SYNC_FLUSH broker's server channel
(``ariane.bench._micro_broker``); after each wave the event loop runs until every request of the
wave is answered (the group commit's rounds, answered on the loop). Prints the main thread's
and the process's CPU µs per message and the answers' codes.

    PYTHONPATH=src .venv/bin/python tools/sync_cost.py WAVES [READS]

``tools/sync_callgrind.sh`` runs it under callgrind for instruction counts per message.
"""

from __future__ import annotations

import asyncio
import struct
import sys
import time
from collections import Counter
from typing import Any

from ariane.bench import _micro_cases as mc
from ariane.bench._micro_broker import CountingTransport, InProcessBroker
from ariane.common import native
from ariane.remoting.protocol.codec import encode
from ariane.store.config import FlushDiskType

RUN = 100  # requests per read
_HEAD = struct.Struct(">iI")


class FrameCounter(CountingTransport):
    """Counts the answer frames written (and their codes, from the JSON header's start)."""

    def __init__(self) -> None:
        super().__init__()
        self.frames = 0
        self.codes: Counter[bytes] = Counter()
        #: set once ``frames`` reaches ``want``
        self.want = 0
        self.reached: asyncio.Future[None] | None = None

    def _count(self, data: Any) -> None:
        view = bytes(data)
        at = 0
        while at < len(view):
            length, header = _HEAD.unpack_from(view, at)
            start = at + 8
            self.codes[view[start : start + 12]] += 1
            self.frames += 1
            at += 4 + length
        if self.frames >= self.want and self.reached is not None and not self.reached.done():
            self.reached.set_result(None)

    def write(self, data: Any) -> None:
        self.writes += 1
        self._count(data)

    def writelines(self, list_of_data: Any) -> None:
        self.writes += 1
        for data in list_of_data:
            self._count(data)


def main(waves: int, reads: int) -> None:
    broker = InProcessBroker(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    transport = FrameCounter()
    loop = broker.loop

    async def open_channel() -> Any:
        channel = broker.controller.remoting._new_channel()
        channel.connection_made(transport)
        return channel

    channel = loop.run_until_complete(open_channel())
    single = mc.send_request()
    frame = encode(single) * RUN

    async def wave() -> None:
        transport.want = transport.frames + reads * RUN
        transport.reached = loop.create_future()
        for _ in range(reads):
            channel.data_received(frame)
        await transport.reached

    try:
        loop.run_until_complete(wave())  # the first run: topic created, lookups made
        thread, process = time.thread_time(), time.process_time()
        for _ in range(waves):
            loop.run_until_complete(wave())
        thread, process = time.thread_time() - thread, time.process_time() - process
        per = 1e6 / (waves * reads * RUN)
        print(
            f"{native.build_name()} sync: main thread {thread * per:.2f} µs/msg,"
            f" process {process * per:.2f} µs/msg; answers {dict(transport.codes)}"
        )
    finally:
        broker.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 10)
