"""The compiled twin of a single put: ``CommitLog.prepare_one_py`` and ``write_one_py`` in C.

How it works (issue 18: one writer's puts, RocketMQ ``CommitLog.asyncPutMessage`` with
``MessageExtEncoder.encode``). ``_speedups_put.h`` prepares a message of the common shape
(a topic already in the CommitLog's topic cache, IPv4 hosts, exact ints in range, exact str
properties, a bytes body, a cached or absent TAGS code, not the schedule topic) into the same
:class:`~ariane.store.prepared.PreparedOne` the pure method makes, and writes such a one
(record bytes, queue offset, ``DispatchRequest``, ``PutResult``) in one call each; ``put_one``
does both in one call for ``CommitLog.put_message`` (no ``PreparedOne`` in between). Anything
else makes them return ``None`` before any effect, and the CommitLog runs its pure methods,
which stay the reference (and say why a message is refused). The DLedger CommitLog, which
inherits ``prepare_one``/``write_one``, gets both as well. ``prepare`` and ``write`` are
``None`` in the pure build (``ARIANE_PURE=1`` or no compiler).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from typing import Any

from ariane.common import native
from ariane.common.message import HostPort
from ariane.common.sysflag import host_flags
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.store.format import DispatchRequest
from ariane.store.inner import MessageInner
from ariane.store.prepared import PreparedOne
from ariane.store.results import PutResult, PutStatus

__all__ = ["HEADERS", "Prepare", "PutOne", "Write", "new_inner", "prepare", "put_one", "write"]

#: Fixed header up to and including BODYLENGTH, one struct per (born v6, store v6).
HEADERS = {
    (False, False): struct.Struct(">iiiiiqqiq4siq4siiqi"),
    (True, False): struct.Struct(">iiiiiqqiq16siq4siiqi"),
    (False, True): struct.Struct(">iiiiiqqiq4siq16siiqi"),
    (True, True): struct.Struct(">iiiiiqqiq16siq16siiqi"),
}

#: ``put_prepare(msg, topics, tag_codes, max_props, max_size)``
Prepare = Callable[[MessageInner, dict[str, Any], dict[str, int], int, int], PreparedOne | None]
#: ``put_write(one, mm, pos, phys, store_ts, queue_table, staged)``
Write = Callable[
    [PreparedOne, "bytearray | mmap.mmap", int, int, int, dict[tuple[str, int], int], Any],
    PutResult | None,
]
#: ``put_one(msg, topics, tag_codes, max_props, max_size, mm, pos, phys, room, store_ts,
#: queue_table, staged)``: ``put_prepare`` then ``put_write``; None (nothing done) also when
#: the record is longer than ``room``
PutOne = Callable[
    [MessageInner, dict[str, Any], dict[str, int], int, int, "bytearray | mmap.mmap", int, int,
     int, int, dict[tuple[str, int], int], Any],
    PutResult | None,
]  # fmt: skip


def _load() -> tuple[Prepare | None, Write | None, PutOne | None]:
    fast = native.speedups
    if fast is None or not hasattr(fast, "put_one"):  # pure, or a stale build
        return None, None, None
    fast.configure_put(
        PreparedOne, DispatchRequest, PutResult, PutStatus.PUT_OK, MessageInner, HostPort,
        HEADERS[(False, False)], SCHEDULE_TOPIC, host_flags(True, True),
    )  # fmt: skip
    return fast.put_prepare, fast.put_write, fast.put_one


#: the compiled calls (None: the pure build)
prepare, write, put_one = _load()


def _new_inner() -> Callable[..., MessageInner]:
    fast = native.speedups
    if put_one is None or fast is None or not hasattr(fast, "message_inner"):
        return MessageInner
    made: Callable[..., MessageInner] = fast.message_inner
    return made


#: ``new_inner(topic, queue_id, body, flag, properties, sys_flag, born_timestamp_ms,
#: born_host, store_host, reconsume_times, prepared_transaction_offset, properties_string)``:
#: ``MessageInner`` of its twelve fields given positionally; compiled, without the dataclass's
#: Python ``__init__`` (``_speedups_storeput.h``); the class itself in the pure build
new_inner = _new_inner()
