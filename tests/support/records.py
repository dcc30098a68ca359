"""CommitLog records for decoder tests: one encoded record per call, with deterministic
timestamps and physical offset derived from the queue offset, so a test can predict every
column a decoder returns."""

from __future__ import annotations

from ariane.common.message import HostPort, MessageExt
from ariane.common.record import encode_record

V4 = HostPort.parse("10.1.2.3:5555")
STORE = HostPort.parse("127.0.0.1:10911")
BORN_MS = 1_764_000_000_000
STORED_MS = 1_764_000_000_123


def record(
    offset: int,
    body: bytes = b"b",
    properties: dict[str, str] | None = None,
    *,
    topic: str = "T",
    born: HostPort = V4,
    store: HostPort = STORE,
    sys_flag: int = 0,
    queue_id: int = 0,
    reconsume: int = 0,
    born_ms: int | None = None,
    v2: bool | None = None,
) -> bytes:
    """The stored bytes of one message at queue ``offset`` (born ``BORN_MS + offset`` unless
    ``born_ms`` is given, stored ``STORED_MS + offset``, physical offset ``4096 * offset + 17``)."""
    msg = MessageExt(
        topic,
        body,
        0,
        dict(properties or {}),
        queue_id=queue_id,
        queue_offset=offset,
        sys_flag=sys_flag,
        born_timestamp_ms=BORN_MS + offset if born_ms is None else born_ms,
        born_host=born,
        store_timestamp_ms=STORED_MS + offset,
        store_host=store,
        reconsume_times=reconsume,
        commit_log_offset=4096 * offset + 17,
    )
    return encode_record(msg, v2=v2)
