"""In-process driver of the traced consume path's client work (issue 15), for callgrind: N
deliveries of distinct stored messages (decoded from CommitLog records 2,000 at a time, as a
pull body gives them) through ``ConsumeTracer.hook_before`` / ``hook_after`` as the consume
service calls them, and every 2,000 deliveries the dispatcher worker's round without its I/O:
the queue taken, its items encoded, the entry buffer's records written and packed into trace
messages, each message's UTF-8 body and its ``Message`` (``KEYS``) built as ``_send`` builds
them. The dispatcher is never started (nothing is sent; the worker's wake-up is a no-op).

    PYTHONPATH=<tree>/src .venv/bin/python tools/trace_consume_cost.py N [trace|skip] [nokeys]

``skip`` decodes the same messages without the hooks or the round (the message construction
to subtract); ``nokeys``: messages without a KEYS property (``ariane bench consumer``'s);
``fixed``: a fixed clock, request prefix and counter, and a printed digest of what was shipped
(bodies, KEYS, record counts), to compare two trees byte for byte (not for measuring: the
hashing costs more than the trace).
``tools/trace_consume_callgrind.sh`` runs it under callgrind.
"""

from __future__ import annotations

import hashlib
import itertools
import sys
from typing import Any, cast

import ariane.client._trace_dispatch as _dispatch
import ariane.client._trace_hooks as _hooks
import ariane.client._trace_records as _records
from ariane.bench._micro_cases import stored_message
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client.config import ClientConfig
from ariane.common import properties as props
from ariane.common.clock import SystemClock
from ariane.common.message import Message
from ariane.common.record import decode_records, encode_record

ROUND = 2000
_UNIQ = "7F00000100002A9F0000000000000001"


class _FixedClock(SystemClock):
    """1,796,000,000,000 ms plus 1 ms every third reading."""

    def __init__(self) -> None:
        self.reads = 0

    def now_ms(self) -> int:
        self.reads += 1
        return 1_796_000_000_000 + self.reads // 3


def _template(keys: bool) -> tuple[bytes, bytes]:
    """A stored record cut around its UNIQ_KEY value (32 characters)."""
    msg = stored_message()
    msg.properties[props.UNIQ_KEY] = _UNIQ
    if not keys:
        del msg.properties[props.KEYS]
    record = encode_record(msg)
    at = record.index(_UNIQ.encode())
    return record[:at], record[at + len(_UNIQ) :]


def _shipped(dispatcher: _dispatch.AsyncTraceDispatcher, digest: Any | None) -> int:
    """The worker's round without sending: the trace messages of what is queued."""
    items = _dispatch._take(dispatcher._queue, len(dispatcher._queue))
    packed_of = getattr(dispatcher, "_packed", None)
    if packed_of is not None:
        packed = packed_of(items)
    else:  # the code before the buffer packed whole messages
        ready = dispatcher._encoded(items)
        if dispatcher._entries:
            ready = ready + dispatcher._taken_entries()
        packed = _dispatch.pack(ready, dispatcher.settings.max_message_chars)
    dispatcher._wake_at = 1  # as the worker re-arms it
    for one in packed:
        data = one.data
        body = data if data.__class__ is bytes else data.encode("utf-8")
        msg = Message(dispatcher.trace_topic, body, properties={props.KEYS: one.keys})
        if digest is None:  # measuring: no hashing
            continue
        digest.update(msg.body)
        digest.update(msg.properties[props.KEYS].encode())
        digest.update(one.records.to_bytes(4, "big"))
    return len(packed)


def main() -> None:
    n = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "trace"
    head, tail = _template("nokeys" not in sys.argv[3:])
    dispatcher = _dispatch.AsyncTraceDispatcher(
        trace_topic=None,
        host_config=ClientConfig(namesrv_addr="127.0.0.1:9876"),
        host_group="bench",
        kind="CONSUME",
        sender_factory=cast(Any, None),
    )
    clock = None
    if "fixed" in sys.argv[3:]:
        clock = _FixedClock()
        _hooks._REQUEST_PREFIX = "0123456789ABCDEF"
        # the tree's counter (the compiled one takes numbers without an int each)
        _hooks._request_counter = getattr(_records, "new_counter", itertools.count)(1000)
    tracer = ConsumeTracer(dispatcher, "benchmark_consumer", clock)
    hook_before, hook_after = tracer.hook_before, tracer.hook_after
    digest = hashlib.sha256() if "fixed" in sys.argv[3:] else None
    messages = 0
    for start in range(0, n, ROUND):
        body = b"".join(
            [head + f"7F0000010001{i:020X}".encode() + tail for i in range(start, start + ROUND)]
        )
        msgs = decode_records(body)
        if mode == "skip":
            continue
        for msg in msgs:
            one = [msg]
            before = hook_before(one)
            if before is not None:
                hook_after(before, 1)
        messages += _shipped(dispatcher, digest)
    print(f"{mode} n={n}: {messages} trace messages, stats {dispatcher.stats}")
    if digest is not None:
        print(f"digest {digest.hexdigest()}")


if __name__ == "__main__":
    main()
