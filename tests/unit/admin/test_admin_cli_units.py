"""Unit tests of the admin CLI's pieces: timestamps, formatters, flags (no sockets)."""

from __future__ import annotations

import io
import json
from datetime import datetime

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ariane.admin.cli import COMMANDS, admin
from ariane.admin.cluster import broker_row
from ariane.admin.command import PermType, resolve_namesrv_addr
from ariane.admin.output import Table, Ts, View, cell_text, kv_table, render_json, render_text
from ariane.admin.stats import compute_24h_sum
from ariane.admin.timefmt import format_timestamp, parse_timestamp
from ariane.common.versions import version_desc
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, BrokerStatsItem


def local_ms(*parts: int) -> int:
    return int(datetime(*parts).timestamp() * 1000)


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("1714557600123") == 1714557600123
    assert parse_timestamp("now", now_ms=42) == 42
    assert parse_timestamp(" NOW ", now_ms=7) == 7
    expected = local_ms(2024, 5, 1, 12, 30, 15) + 123
    assert parse_timestamp("2024-05-01#12:30:15:123") == expected
    assert parse_timestamp("2024-05-01#12:30:15") == expected - 123
    assert parse_timestamp("2024-05-01T12:30:15.123") == expected
    assert parse_timestamp("2024-05-01T12:30:15+00:00") == 1714566615000


@pytest.mark.parametrize(
    "text", ["yesterday", "2024-13-01#00:00:00:000", "2024-05-01#25:00:00", "-5", "", "1.5"]
)
def test_parse_timestamp_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        parse_timestamp(text)


@given(st.integers(min_value=1, max_value=4_102_444_800_000))
def test_format_then_parse_round_trips(ms: int) -> None:
    text = format_timestamp(ms)
    day, clock = text.split(" ")
    hms, frac = clock.split(".")
    # compared as text: a local time repeated by a DST change names two instants
    assert format_timestamp(parse_timestamp(f"{day}#{hms}:{frac}")) == text


def test_format_timestamp_edges() -> None:
    assert format_timestamp(0) == "N/A"
    assert format_timestamp(-1) == "N/A"
    assert format_timestamp(None) == "N/A"
    assert format_timestamp(local_ms(2024, 5, 1, 1, 2, 3) + 4) == "2024-05-01 01:02:03.004"


def test_cells_and_tables() -> None:
    assert cell_text(None) == "-"
    assert cell_text(True) == "true"
    assert cell_text(1.0 / 3) == "0.33"
    assert cell_text(Ts(0)) == "N/A"
    assert cell_text(7) == "7"
    out = io.StringIO()
    view = View(
        {"x": 1},
        [
            Table(
                ("Name", "Count"), [("a", 1), ("b", None)], title="T", numeric=frozenset({"Count"})
            )
        ],
        ["done"],
    )
    render_text(view, out)
    text = out.getvalue()
    assert "Name" in text
    assert "Count" in text
    assert "T" in text
    assert text.rstrip().endswith("done")
    lines = [line.rstrip() for line in text.splitlines()]
    assert any(line.endswith(" 1") for line in lines)  # right-aligned number
    assert kv_table({"b": 2, "a": 1}).rows == [("a", 1), ("b", 2)]


def test_json_is_sorted_and_stable() -> None:
    out = io.StringIO()
    render_json(View({"b": [1, 2], "a": {"z": None, "y": 1.5}}), out)
    assert json.loads(out.getvalue()) == {"a": {"y": 1.5, "z": None}, "b": [1, 2]}
    assert out.getvalue().index('"a"') < out.getvalue().index('"b"')


def test_broker_row_from_runtime_info() -> None:
    rt = {
        "brokerVersionDesc": "V5_3_3",
        "putTps": "12.5 10.0 9.0",
        "getTransferredTps": "3.25 1 1",
        "earliestMessageTimeStamp": str(1_000),
        "commitLogDiskRatio": "0.42",
        "msgPutTotalYesterdayMorning": "10",
        "msgPutTotalTodayMorning": "25",
        "msgPutTotalTodayNow": "40",
        "brokerActive": "true",
    }
    row = broker_row("C", "b", 0, "h:1", rt, now_ms=1_000 + 7_200_000)
    assert (row["inTps"], row["outTps"], row["hoursOfData"]) == (12.5, 3.25, 2.0)
    assert (row["inTotalYesterday"], row["inTotalToday"]) == (15, 15)
    assert row["commitLogDiskRatio"] == 0.42
    assert row["activated"] is True
    assert broker_row("C", "b", 0, "h:1", None, 0)["reachable"] is False
    assert broker_row("C", "b", 0, "h:1", {"putTps": "garbage"}, 0)["inTps"] == 0.0


def test_compute_24h_sum_prefers_the_longest_window() -> None:
    def data(minute: int, hour: int, day: int) -> BrokerStatsData:
        return BrokerStatsData(BrokerStatsItem(minute), BrokerStatsItem(hour), BrokerStatsItem(day))

    assert compute_24h_sum(data(1, 2, 3)) == 3
    assert compute_24h_sum(data(1, 2, 0)) == 2
    assert compute_24h_sum(data(1, 0, 0)) == 1
    assert compute_24h_sum(None) == 0


def test_version_names() -> None:
    assert version_desc(479) == "V5_3_3"
    assert version_desc(401) == "V4_9_4"
    assert version_desc(212) == "V4_0_0_SNAPSHOT"
    assert version_desc(37) == "#37"


def test_namesrv_address_resolution() -> None:
    assert resolve_namesrv_addr("a:1", {"NAMESRV_ADDR": "b:2"}) == "a:1"
    assert resolve_namesrv_addr(None, {"NAMESRV_ADDR": "b:2;c:3"}) == "b:2;c:3"
    assert resolve_namesrv_addr(None, {}) == "127.0.0.1:9876"
    assert resolve_namesrv_addr(" a:1 , b:2 ", {}) == "a:1;b:2"
    for bad in ("a", "a:0", "a:99999", ":1", "a:x", ";"):
        with pytest.raises(click.BadParameter):
            resolve_namesrv_addr(bad, {})


def test_perm_values() -> None:
    perm = PermType()
    assert [perm.convert(v, None, None) for v in ("2", "4", "6")] == [2, 4, 6]
    for bad in ("3", "7", "rw"):
        with pytest.raises(click.BadParameter):
            perm.convert(bad, None, None)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["updateTopic", "-t", "T"], "-b or -c"),
        (["updateTopic", "-t", "T", "-b", "h:1", "-c", "C"], "-b or -c"),
        (["updateTopic", "-t", "T", "-c", "C", "-r", "-1"], "-r"),
        (["updateTopic", "-t", "T", "-c", "C", "-o", "maybe"], "-o"),
        (["resetOffsetByTime", "-g", "g", "-t", "t", "-s", "soon"], "timestamp"),
        (["topicRoute"], "--topic"),
        (["topicRoute", "-t", "T", "-n", "nowhere"], "host:port"),
        (["sendMessage", "-t", "T", "-p", "x", "-b", "broker-a"], "-b and -i"),
        (["consumeMessage", "-t", "T", "-o", "3"], "-o needs -b and -i"),
        (["printMsg", "-t", "T", "-c", "no-such-charset", "-n", "127.0.0.1:1"], "charset"),
        (["bogus"], "no such command"),
    ],
)
def test_bad_flags_give_one_line_and_status_2(argv: list[str], needle: str) -> None:
    result = CliRunner().invoke(admin, argv, prog_name="mqadmin")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0], result.stderr
    assert result.stdout == ""


def test_every_command_has_help_and_global_options() -> None:
    runner = CliRunner()
    listing = runner.invoke(admin, ["--help"]).stdout
    for name in COMMANDS:
        assert name in listing
        r = runner.invoke(admin, [name.lower(), "-h"])
        assert r.exit_code == 0, name
        for flag in ("--namesrvAddr", "--json", "--timeout-ms"):
            assert flag in r.stdout, (name, flag)
