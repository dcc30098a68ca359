"""What admin commands print: one ``View`` per command, shown as rich tables or as JSON.

How it works: every command builds a ``View`` from the answers it got: ``data`` (plain
JSON-able values with stable camelCase keys, times in epoch milliseconds) for ``--json``, and
``tables`` (titled rows) plus ``lines`` (status sentences) for people. Cells may be ``Ts``
(a time, shown local and human-readable), floats (two decimals), ``None`` (``-``) or
anything with a ``str``. rich is imported only when a table is drawn, so JSON output and
``--help`` stay fast.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from ariane.admin.timefmt import format_timestamp

__all__ = ["Table", "Ts", "View", "cell_text", "kv_table", "render_json", "render_text"]


@dataclass(frozen=True, slots=True)
class Ts:
    """A time cell (epoch milliseconds)."""

    ms: int | None


@dataclass(slots=True)
class Table:
    """Rows under column headers; ``numeric`` columns are right-aligned."""

    columns: Sequence[str]
    rows: list[Sequence[Any]] = field(default_factory=list)
    title: str | None = None
    numeric: frozenset[str] = frozenset()


@dataclass(slots=True)
class View:
    """A command's result: ``data`` for ``--json``, ``tables`` and ``lines`` for people."""

    data: Any
    tables: list[Table] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def kv_table(values: Mapping[str, Any], *, title: str | None = None) -> Table:
    """A two-column key/value table, sorted by key."""
    return Table(("Key", "Value"), [(k, values[k]) for k in sorted(values)], title=title)


def cell_text(value: Any) -> str:
    """How one cell is written."""
    if value is None:
        return "-"
    if isinstance(value, Ts):
        return format_timestamp(value.ms)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def render_json(view: View, out: IO[str] | None = None) -> None:
    """Write ``view.data`` as indented JSON with sorted keys."""
    text = orjson.dumps(
        view.data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    )
    stream = out if out is not None else sys.stdout
    stream.write(text.decode() + "\n")
    stream.flush()


def render_text(view: View, out: IO[str] | None = None) -> None:
    """Draw ``view``'s tables (rich) and lines."""
    stream = out if out is not None else sys.stdout
    if view.tables:
        from rich import box
        from rich.console import Console
        from rich.table import Table as RichTable

        # not a terminal: wide enough that long addresses and ids stay on one line
        width = None if stream.isatty() else 240
        console = Console(file=stream, width=width, highlight=False, soft_wrap=False)
        for table in view.tables:
            rich_table = RichTable(
                title=table.title,
                box=box.SIMPLE_HEAD,
                show_edge=False,
                pad_edge=False,
                title_justify="left",
                title_style="bold",
                header_style="bold",
            )
            for name in table.columns:
                rich_table.add_column(
                    name,
                    justify="right" if name in table.numeric else "left",
                    overflow="fold",
                )
            for row in table.rows:
                rich_table.add_row(*(cell_text(v) for v in row))
            console.print(rich_table)
    for line in view.lines:
        stream.write(line + "\n")
    stream.flush()
