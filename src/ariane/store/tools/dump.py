"""``ariane store dump``: print every CommitLog record with its offsets."""

from __future__ import annotations

from collections.abc import Callable

from ariane.common.record import decode_record
from ariane.errors import CorruptionError
from ariane.store.tools.reader import iter_commit_log

__all__ = ["dump"]


def dump(
    root: str,
    echo: Callable[[str], None],
    *,
    start: int = 0,
    limit: int | None = None,
    show_body: bool = False,
) -> int:
    """Print records of store ``root`` from physical offset ``start``; return how many."""
    count = 0
    for ev in iter_commit_log(root, check_crc=True):
        if ev.offset < start:
            continue
        if limit is not None and count >= limit:
            break
        if ev.kind == "record":
            assert ev.record is not None
            try:
                msg, _ = decode_record(ev.record)
            except CorruptionError as exc:  # pragma: no cover - check_record accepted it
                echo(f"{ev.offset:>14} UNDECODABLE {exc}")
                continue
            props = " ".join(f"{k}={v}" for k, v in sorted(msg.properties.items()))
            entry = ""
            if ev.entry is not None:
                entry = f"entry={ev.entry[0]}/{ev.entry[1]} "
                if not ev.committed:
                    entry += "UNCOMMITTED "
            echo(
                f"{ev.offset:>14} {entry}size={msg.store_size} topic={msg.topic} queue={msg.queue_id} "
                f"qoffset={msg.queue_offset} sysflag={msg.sys_flag:#x} "
                f"stored={msg.store_timestamp_ms} body={len(msg.body)}B id={msg.offset_msg_id} "
                f"{props}"
            )
            if show_body:
                echo(f"{'':>14} body={msg.body!r}")
            count += 1
        elif ev.kind == "noop":
            assert ev.entry is not None
            echo(f"{ev.offset:>14} entry={ev.entry[0]}/{ev.entry[1]} NOOP")
        elif ev.kind == "blank":
            echo(f"{ev.offset:>14} BLANK size={ev.size} (end of file)")
        elif ev.kind == "corrupt":
            echo(f"{ev.offset:>14} CORRUPT {ev.reason} ({ev.size} bytes to the end of the file)")
    return count
