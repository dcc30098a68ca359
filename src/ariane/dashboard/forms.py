"""Reading what a browser sends (query strings and forms) into checked values, and the list
mechanics every page shares: filter, sort and page on the server.

Everything here is pure; a bad value raises :class:`BadInput` naming the field and saying what
is expected, which the pages show as one readable line.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ariane.errors import InvalidArgumentError

__all__ = [
    "BadInput",
    "Listing",
    "fmt_time",
    "paginate",
    "parse_bool",
    "parse_int",
    "parse_time",
    "time_range",
]

T = TypeVar("T")
_TIME_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S")


class BadInput(InvalidArgumentError):
    """A request field is missing or malformed.

    Args:
        name: the field (as the form names it).
        message: what is wrong and what is expected.
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


def parse_int(
    text: str | None, name: str, *, default: int | None = None, lo: int = 0, hi: int = 2**31 - 1
) -> int:
    """An integer in [lo, hi]; ``default`` when absent or empty."""
    if text is None or not text.strip():
        if default is None:
            raise BadInput(name, "is required")
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise BadInput(name, f"must be a whole number, got {text!r}") from None
    if not lo <= value <= hi:
        raise BadInput(name, f"must be between {lo} and {hi}, got {value}")
    return value


def parse_bool(text: str | None) -> bool:
    """A checkbox or flag: on/true/1/yes."""
    return (text or "").strip().lower() in ("1", "on", "true", "yes")


def parse_time(text: str | None, name: str) -> int | None:
    """Milliseconds since the epoch from ``YYYY-MM-DDTHH:MM[:SS]`` (the browser's local
    time input, read in this machine's time zone) or a number of milliseconds; ``None`` when
    empty."""
    if text is None or not text.strip():
        return None
    raw = text.strip()
    if raw.isdigit():
        return int(raw)
    for fmt in _TIME_FORMATS:
        try:
            return int(datetime.datetime.strptime(raw, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise BadInput(name, f"must be a time like 2024-05-01T13:45 or milliseconds, got {raw!r}")


def time_range(
    begin_text: str | None,
    end_text: str | None,
    *,
    now_ms: int,
    default_span_ms: int,
    max_span_ms: int,
) -> tuple[int, int]:
    """[begin, end) in ms: defaults to the last ``default_span_ms``; refuses a reversed
    range and one wider than ``max_span_ms``."""
    end = parse_time(end_text, "end")
    begin = parse_time(begin_text, "begin")
    if end is None:
        end = now_ms + 1
    if begin is None:
        begin = end - default_span_ms
    if end <= begin:
        raise BadInput("end", "must be after begin")
    if end - begin > max_span_ms:
        days = max_span_ms / 86_400_000
        raise BadInput("begin", f"the time range may span at most {days:g} days")
    return begin, end


def fmt_time(ms: int | None) -> str:
    """``YYYY-MM-DD HH:MM:SS`` in local time; ``-`` for 0 or none (never 1970)."""
    if not ms or ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    """One page of a filtered, sorted list.

    Attributes:
        rows: the rows of this page.
        total: rows matching the filter.
        page: this page (1-based).
        pages: number of pages (at least 1).
        sort: the sort key used.
        desc: descending order.
    """

    rows: list[T]
    total: int
    page: int
    pages: int
    sort: str
    desc: bool

    def to_json(self, row: Callable[[T], Any]) -> dict[str, Any]:
        """JSON form with each row turned by ``row``."""
        return {
            "rows": [row(r) for r in self.rows],
            "total": self.total,
            "page": self.page,
            "pages": self.pages,
            "sort": self.sort,
            "desc": self.desc,
        }


def paginate(
    rows: Sequence[T],
    *,
    keys: dict[str, Callable[[T], Any]],
    sort: str | None,
    desc: bool,
    page_text: str | None,
    page_size: int,
    default_sort: str,
) -> Listing[T]:
    """Sort ``rows`` by the named key (unknown names are refused) and cut one page; a page
    past the end shows the last page."""
    name = sort or default_sort
    key = keys.get(name)
    if key is None:
        raise BadInput("sort", f"must be one of {', '.join(sorted(keys))}, got {name!r}")
    page = parse_int(page_text, "page", default=1, lo=1)
    ordered = sorted(rows, key=key, reverse=desc)
    pages = max(1, math.ceil(len(ordered) / page_size))
    page = min(page, pages)
    start = (page - 1) * page_size
    return Listing(ordered[start : start + page_size], len(ordered), page, pages, name, desc)
