"""Types of the compiled twins in ``_speedups.c`` (see ``ariane.common.native``)."""

from collections.abc import Mapping
from typing import Any

ABI: int
RAW_SEND_SLOTS: int

def encode_properties(props: Mapping[str, str], /) -> str: ...
def decode_properties(text: str, /) -> dict[str, str]: ...
def decode_batch(data: bytes | bytearray | memoryview, entry_cls: Any, /) -> list[Any]: ...
def configure(msg_cls: Any, hostport_cls: Any, v1: int, v2: int, v6_flags: int, /) -> None: ...
def decode_record_v4(buf: bytes | bytearray | memoryview, pos: int, /) -> Any: ...
def configure_records(names: tuple[str, ...], /) -> bool: ...
def decode_records_v4(
    buf: bytes | bytearray | memoryview, skip_flags: int, /
) -> list[Any] | None: ...
def join_spans(
    buf: bytes | bytearray | memoryview | Any, starts: list[int], stops: list[int], /
) -> bytes: ...
def sub_records(
    calls: list[Any],
    group: str,
    request_prefix: str,
    sub_before: bool,
    item_chars: int,
    item_key_chars: int,
    /,
) -> list[tuple[str, str, int, tuple[str, ...]]] | None: ...
def configure_frame(
    cmd_cls: Any, loads: Any, languages: Mapping[str, Any], json: Any, /
) -> None: ...
def decode_json_frame(source: bytes, start: int, end: int, /) -> Any: ...
def decode_json_frames(
    source: bytes, pos: int, max_frame_bytes: int, commands: list[Any], raw: bool = ..., /
) -> int: ...
def configure_raw_send(
    cls: type, slots: tuple[Any, ...], languages: Mapping[str, Any], /
) -> None: ...
def send_header_scan(header: bytes, /) -> tuple[int, int, int, int, dict[str, str]] | None: ...
def sub_pairs(
    pairs: list[Any],
    group: str,
    request_prefix: str,
    taken: object,
    item_chars: int,
    item_key_chars: int,
    /,
) -> list[tuple[str, str, int, tuple[str, ...]]] | None: ...
def decode_columns(
    buf: bytes | bytearray | memoryview | list[bytes],
    start: int,
    end: int,
    tags: tuple[bytes, ...] | None,
    with_props: bool,
    skip: tuple[bytes, ...],
    fields: int,
    /,
) -> tuple[Any, ...] | None: ...
def configure_dispatch(request_cls: Any, tags_code: Any, schedule_topic: bytes, /) -> None: ...
def dispatch_record(buf: Any, pos: int, limit: int, /) -> Any: ...
def index_key_entries(
    topics: tuple[Any, ...],
    phys: tuple[Any, ...],
    stamps: tuple[Any, ...],
    keys: tuple[Any, ...],
    uniqs: tuple[Any, ...],
    flags: tuple[Any, ...],
    end_phy: int,
    /,
) -> bytes | None: ...
def index_write(
    mm: Any,
    slot_num: int,
    index_num: int,
    count: int,
    begin_phy: int,
    begin_ts: int,
    entries: bytes,
    start: int,
    /,
) -> tuple[int, int, int, int]: ...
def configure_put(
    prepared_cls: Any,
    request_cls: Any,
    result_cls: Any,
    put_ok: Any,
    message_cls: Any,
    host_cls: Any,
    header_v4: Any,
    schedule_topic: str,
    v6_flags: int,
    /,
) -> None: ...
def put_prepare(
    msg: Any, topics: dict[str, Any], tag_codes: dict[str, int], max_props: int, max_size: int, /
) -> Any: ...
def put_write(
    one: Any,
    mm: Any,
    pos: int,
    phys: int,
    store_ts: int,
    queue_table: dict[Any, int],
    staged: Any,
    /,
) -> Any: ...
def configure_put_log(state_cls: Any, mapped_file_cls: Any, /) -> None: ...
def put_log(
    state: Any, msg: Any, lock: Any, queue_table: dict[Any, int], staged: Any, /
) -> Any: ...
def header_parse(cls: Any, plan: tuple[Any, ...], ext: Any, /) -> Any: ...
def send_head(
    prefix: bytes,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born: str,
    flag: int,
    properties: str,
    middle: bytes,
    opaque: int,
    suffix: bytes,
    body_length: int,
    max_frame_bytes: int,
    /,
) -> bytes | None: ...
def send_prepare_run(
    ctx: tuple[Any, ...], requests: list[Any], start: int, out: list[Any], /
) -> int: ...
def send_answer_run(
    ctx: tuple[Any, ...],
    requests: list[Any],
    ready: list[Any],
    results: list[Any],
    start: int,
    frames: list[bytes],
    sizes: dict[str, list[int]],
    /,
) -> int: ...
