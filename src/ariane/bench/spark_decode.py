"""``ariane bench spark-decode``: the Spark source's client-side decode, without Spark or a
broker, in µs per row.

How it works: ``--records`` stored records of ``--size`` body bytes (IPv4 hosts, the five
properties of ``ariane bench micro``'s ``record.decode``: TAGS, UNIQ_KEY, KEYS, WAIT, CLUSTER)
are joined into one buffer, as the source joins PULL bodies, and each way of turning that
buffer into the source's Arrow batch (``ariane.spark._columns``) is timed (best of
``--rounds``):

* ``plain``: ``decode_records`` + ``messages_to_batch`` (a ``MessageExt`` per row);
* ``numpy``: the vectorised path the pure-Python build uses;
* ``columns_py``: ``decode_columns_py`` alone (the reference of the compiled call);
* ``columns``: the compiled ``decode_columns`` alone, and ``compiled``: it plus the Arrow
  wrapping (``columns_to_batch``), with ``--properties`` user/all/none;
* ``compiled_bodies``: the same from the list of pull bodies of 32 records each (what
  ``read_range`` passes: no join), and ``compiled_join``: joining them first.

``--columns body,queueOffset`` times a read of those columns only (a user schema: the other
columns are not built). Each batch is compared with the plain one (``same``); nothing is
asserted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import click

from ariane.common.cli_bounds import COUNT, MAX_BODY_BYTES

__all__ = ["spark_decode_bench"]


def _records(records: int, size: int) -> list[bytes]:
    from ariane.bench._micro_cases import stored_message
    from ariane.common.record import encode_record

    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    out = []
    for i in range(records):
        msg = stored_message()
        msg.properties["UNIQ_KEY"] = f"7F00000100002A9F{i:016X}"
        msg.body, msg.queue_offset, msg.commit_log_offset = body, i, i * (size + 200)
        out.append(encode_record(msg))
    return out


def _best(call: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - began)
    return best


@click.command("spark-decode")
@click.option(
    "--records", type=COUNT, default=4096, show_default=True, help="Records in the buffer."
)
@click.option(
    "--size",
    type=click.IntRange(0, MAX_BODY_BYTES),
    default=1024,
    show_default=True,
    help="Body bytes per record.",
)
@click.option(
    "--rounds", type=COUNT, default=7, show_default=True, help="Timed rounds (best is kept)."
)
@click.option(
    "--properties",
    "mode_name",
    type=click.Choice(["user", "all", "none"]),
    default="user",
    show_default=True,
)
@click.option(
    "--columns",
    "column_list",
    default=None,
    help="Comma-separated columns to build (a read schema) [default: all].",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line.")
def spark_decode_bench(
    records: int, size: int, rounds: int, mode_name: str, column_list: str | None, as_json: bool
) -> None:
    """Per-row cost of the Spark source's record-to-Arrow decode (no Spark, no broker)."""
    from ariane.common import native, record_columns
    from ariane.spark import _columns as cols
    from ariane.spark.options import PropertiesMode

    mode = PropertiesMode(mode_name)
    columns = None if column_list is None else tuple(column_list.split(","))
    fields = record_columns.ALL_FIELDS if columns is None else cols.fields_of(columns)
    parts = _records(records, size)
    buf = b"".join(parts)
    bodies = [b"".join(parts[i : i + 32]) for i in range(0, records, 32)]
    end = 2**62
    plain = cols.decode_plain(buf, "broker-a", mode, 0, end, None, columns)
    skip = cols._SYSTEM_NAMES if mode is PropertiesMode.USER else ()
    with_props = mode is not PropertiesMode.NONE and (columns is None or "properties" in columns)
    fixed = (0, end, None, with_props, skip, fields)
    ways: dict[str, Callable[[], Any]] = {
        "plain": lambda: cols.decode_plain(buf, "broker-a", mode, 0, end, None, columns),
        "numpy": lambda: cols._numpy_to_batch(buf, "broker-a", mode, 0, end, None, columns),
        "columns_py": lambda: record_columns.decode_columns_py(buf, *fixed),
    }
    if record_columns.COMPILED:
        ways["columns"] = lambda: record_columns.decode_columns(buf, *fixed)
        ways["compiled"] = lambda: cols._compiled_to_batch(
            buf, "broker-a", mode, 0, end, None, columns
        )
        ways["compiled_bodies"] = lambda: cols._compiled_to_batch(
            bodies, "broker-a", mode, 0, end, None, columns
        )
        ways["compiled_join"] = lambda: cols._compiled_to_batch(
            cols.join_bodies(bodies), "broker-a", mode, 0, end, None, columns
        )
    result: dict[str, Any] = {"records": records, "size": size, "properties": mode_name}
    result["columns"] = "all" if columns is None else ",".join(columns)
    result["build"] = native.build_name()
    for name, call in ways.items():
        got = call()
        result[f"{name}_us_per_row"] = round(_best(call, rounds) / records * 1e6, 3)
        if hasattr(got, "equals"):
            result[f"{name}_same"] = bool(got.equals(plain))
    if as_json:
        click.echo(json.dumps(result))
        return
    for key, value in result.items():
        click.echo(f"{key:28s} {value}")
