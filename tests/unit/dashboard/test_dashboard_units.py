"""The dashboard's pure parts: input parsing, paging, the cache, CSRF and logins, redirects,
and the summary bodies of the broker's two summary requests (no sockets)."""

from __future__ import annotations

import asyncio
import datetime
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.dashboard.cache import TtlCache
from ariane.dashboard.data import topic_kind
from ariane.dashboard.forms import BadInput, fmt_time, paginate, parse_int, parse_time, time_range
from ariane.dashboard.security import SessionSigner, UserStore, csrf_ok, hash_password
from ariane.dashboard.web import safe_next
from ariane.errors import ConfigError, RemoteProtocolError
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.summary_bodies import (
    GroupSummary,
    GroupSummaryTable,
    TopicSummary,
    TopicSummaryTable,
)

DAY = 86_400_000


def test_parse_time_reads_local_inputs_and_milliseconds() -> None:
    local = datetime.datetime(2024, 5, 1, 13, 45, 10)
    assert parse_time("2024-05-01T13:45:10", "begin") == int(local.timestamp() * 1000)
    assert parse_time("2024-05-01 13:45", "begin") == int(
        local.replace(second=0).timestamp() * 1000
    )
    assert parse_time("1714567890123", "begin") == 1714567890123
    assert parse_time("  ", "begin") is None
    with pytest.raises(BadInput, match="begin: must be a time"):
        parse_time("yesterday", "begin")


def test_time_range_defaults_and_refusals() -> None:
    assert time_range(None, None, now_ms=10 * DAY, default_span_ms=DAY, max_span_ms=7 * DAY) == (
        9 * DAY + 1,
        10 * DAY + 1,
    )
    with pytest.raises(BadInput, match="after begin"):
        time_range("2000", "1000", now_ms=0, default_span_ms=1, max_span_ms=DAY)
    with pytest.raises(BadInput, match="7 days"):
        time_range("0", str(8 * DAY), now_ms=0, default_span_ms=1, max_span_ms=7 * DAY)


def test_parse_int_bounds_and_messages() -> None:
    assert parse_int("", "page", default=1) == 1
    assert parse_int(" 7 ", "page") == 7
    with pytest.raises(BadInput, match="page: must be a whole number"):
        parse_int("x", "page")
    with pytest.raises(BadInput, match="between 1 and 5"):
        parse_int("9", "n", lo=1, hi=5)
    with pytest.raises(BadInput, match="n: is required"):
        parse_int(None, "n")


def test_fmt_time_never_shows_1970() -> None:
    assert fmt_time(0) == "-"
    assert fmt_time(None) == "-"
    assert fmt_time(-5) == "-"


@given(st.lists(st.integers(0, 1000), max_size=120), st.integers(1, 9), st.integers(1, 30))
def test_paginate_cuts_sorted_pages(values: list[int], page: int, size: int) -> None:
    listing = paginate(
        values, keys={"v": lambda v: v}, sort="v", desc=True, page_text=str(page),
        page_size=size, default_sort="v",
    )  # fmt: skip
    ordered = sorted(values, reverse=True)
    assert listing.total == len(values)
    assert listing.pages == max(1, -(-len(values) // size))
    assert 1 <= listing.page <= listing.pages
    start = (listing.page - 1) * size
    assert listing.rows == ordered[start : start + size]


def test_paginate_refuses_unknown_sort() -> None:
    with pytest.raises(BadInput, match="sort: must be one of a, b"):
        paginate([], keys={"a": str, "b": str}, sort="c", desc=False, page_text=None,
                 page_size=5, default_sort="a")  # fmt: skip


def test_topic_kinds() -> None:
    assert topic_kind("%RETRY%g", None) == "RETRY"
    assert topic_kind("%DLQ%g", None) == "DLQ"
    assert topic_kind("TBW102", None) == "SYSTEM"
    assert topic_kind("rmq_sys_x", None) == "SYSTEM"
    assert topic_kind("T", TopicConfig("T", attributes={"message.type": "delay"})) == "DELAY"
    assert topic_kind("T", TopicConfig("T", order=True)) == "FIFO"
    assert topic_kind("T", TopicConfig("T")) == "NORMAL"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_cache_fresh_stale_and_single_flight() -> None:
    async def go() -> None:
        clock = _Clock()
        cache = TtlCache(clock, fresh_s=3, stale_s=60)
        loads = 0
        gate = asyncio.Event()

        async def loader() -> int:
            nonlocal loads
            loads += 1
            await gate.wait()
            return loads

        first = asyncio.gather(cache.get("k", loader), cache.get("k", loader))
        await asyncio.sleep(0)
        gate.set()
        assert await first == [1, 1]  # two callers, one load
        clock.now = 2
        assert await cache.get("k", loader) == 1  # fresh
        clock.now = 10
        assert await cache.get("k", loader) == 1  # stale: served, refresh started
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert await cache.get("k", loader) == 2
        clock.now = 100
        gate.clear()
        pending = asyncio.ensure_future(cache.get("k", loader))
        await asyncio.sleep(0)
        assert not pending.done()  # too old: waits for the load
        gate.set()
        assert await pending == 3
        cache.invalidate("k")
        assert await cache.get("k", loader) == 4

    asyncio.run(go())


def test_cache_does_not_keep_failures() -> None:
    async def go() -> None:
        cache = TtlCache(_Clock(), fresh_s=3, stale_s=60)
        calls = 0

        async def flaky() -> str:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("broker down")
            return "ok"

        with pytest.raises(RuntimeError):
            await cache.get("k", flaky)
        assert await cache.get("k", flaky) == "ok"

    asyncio.run(go())


def test_users_file_plain_and_hashed(tmp_path: Path) -> None:
    path = tmp_path / "users.properties"
    path.write_text(
        f"admin=pw,1\nviewer={hash_password('look', iterations=1000)}\n", encoding="utf-8"
    )
    users = UserStore(str(path))
    assert users.check("admin", "pw") == users.get("admin")
    assert users.check("admin", "pw").admin is True  # type: ignore[union-attr]
    assert users.check("viewer", "look").admin is False  # type: ignore[union-attr]
    assert users.check("viewer", "nope") is None
    assert users.check("ghost", "pw") is None
    path.write_text("other=x\n", encoding="utf-8")
    os.utime(path, (1, 1))  # a different mtime: read again
    assert users.get("admin") is None
    assert users.check("other", "x") is not None
    (tmp_path / "empty").write_text("# nobody\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no user=password"):
        UserStore(str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="cannot read"):
        UserStore(str(tmp_path / "missing"))


def test_session_cookie_and_csrf() -> None:
    signer = SessionSigner(b"k" * 32)
    assert signer.loads(signer.dumps("admin")) == "admin"
    assert signer.loads(signer.dumps("admin") + "x") is None
    assert SessionSigner(b"j" * 32).loads(signer.dumps("admin")) is None
    assert signer.loads(None) is None
    assert csrf_ok("abc", "abc")
    assert not csrf_ok("abc", "abd")
    assert not csrf_ok(None, "abc")
    assert not csrf_ok("abc", "")


def test_safe_next_refuses_other_sites() -> None:
    assert safe_next("/topic?q=a", "/") == "/topic?q=a"
    for bad in ("//evil.example/x", "https://evil.example", "javascript:alert(1)", "/\\evil", None):
        assert safe_next(bad, "/home") == "/home"


@given(
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.floats(0, 1e6, allow_nan=False),
    st.integers(0, 2**40),
    st.integers(0, 2**41),
)
def test_topic_summary_round_trip(count: int, total: int, tps: float, day: int, last: int) -> None:
    table = TopicSummaryTable("1.2.3.4:10911", {"T": TopicSummary(count, total, tps, day, last)})
    assert TopicSummaryTable.decode(table.encode()) == table


@given(
    st.integers(-1, 50),
    st.lists(st.text("abc@", min_size=1), max_size=3),
    st.integers(0, 2**40),
    st.booleans(),
    st.integers(-1, 64),
)
def test_group_summary_round_trip_and_compact(
    clients: int, topics: list[str], diff: int, orderly: bool, retries: int
) -> None:
    summary = GroupSummary(client_count=clients, topics=tuple(topics), diff=diff,
                           orderly=orderly, retry_max_times=retries)  # fmt: skip
    table = GroupSummaryTable("b", {"g": summary, "idle": GroupSummary()})
    body = table.encode()
    assert b'"idle":{}' in body
    assert GroupSummaryTable.decode(body) == table


def test_summary_decoders_refuse_junk() -> None:
    with pytest.raises(RemoteProtocolError):
        GroupSummaryTable.decode(b'{"brokerAddr":"b","table":{"g":{"diff":"many"}}}')
    with pytest.raises(RemoteProtocolError):
        GroupSummaryTable.decode(b'{"brokerAddr":"b","table":{"g":{"topics":[1]}}}')
    with pytest.raises(RemoteProtocolError):
        TopicSummaryTable.decode(b"[1, 2]")
    with pytest.raises(RemoteProtocolError):
        TopicSummaryTable.decode(b'{"table":{"T":{"messageCount":"x"}}}trailing')


def test_the_dashboard_uses_the_sdk_only() -> None:
    """design.md: ``dashboard`` is an application of ``client``; it imports no server."""
    import ast

    import ariane.dashboard

    root = Path(ariane.dashboard.__file__).parent
    imported: set[str] = set()
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
    servers = ("ariane.broker", "ariane.namesrv", "ariane.store", "ariane.admin", "ariane.proxy")
    assert sorted(m for m in imported if m.startswith(servers)) == []
    assert "ariane.client" in imported
