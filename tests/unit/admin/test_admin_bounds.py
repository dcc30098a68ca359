"""``mqadmin`` refuses numbers the wire cannot carry, and time ranges that select nothing,
with one line and exit status 2, before any request (no broker: the NameServer address is a
closed port that is never dialled).

Before, a queue id past int32, an offset or a timestamp past int64 went to the broker and came
back as "INVALID_PARAMETER ... out of range" (exit 1), or silently selected nothing
(``consumeMessage -o 2^70``, ``-s`` after ``-e``: an empty table, exit 0); ``updateSubGroup
-r 2^40`` was stored although RocketMQ's retryMaxTimes is an int32; ``clusterList -i 2^70``
slept for ever.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ariane.admin.cli import admin
from ariane.admin.timefmt import MAX_TIMESTAMP_MS, parse_timestamp
from tests.helpers import one_line_error

NS = ["-n", "127.0.0.1:1"]
INT32 = str(2**31)
INT64 = str(2**63)


def one_line(args: list[str]) -> str:
    return one_line_error(CliRunner().invoke(admin, [*args, *NS], prog_name="mqadmin"))


@pytest.mark.parametrize(
    ("args", "option", "bound"),
    [
        (["queryMsgByOffset", "-t", "T", "-b", "B", "-i", INT32, "-o", "0"], "-i' / '--queueId",
         "0<=x<=2147483647"),
        (["queryMsgByOffset", "-t", "T", "-b", "B", "-i", "0", "-o", INT64], "-o' / '--offset",
         "0<=x<=9223372036854775807"),
        (["consumeMessage", "-t", "T", "-b", "B", "-i", "0", "-o", INT64], "-o' / '--offset",
         "0<=x<=9223372036854775807"),
        (["consumeMessage", "-t", "T", "-b", "B", "-i", INT32], "-i' / '--queueId",
         "0<=x<=2147483647"),
        (["sendMessage", "-t", "T", "-p", "x", "-b", "B", "-i", INT32], "-i' / '--qid",
         "0<=x<=2147483647"),
        (["printMsgByQueue", "-t", "T", "-a", "B", "-i", INT32], "-i' / '--queueId",
         "0<=x<=2147483647"),
        (["queryCq", "-t", "T", "-b", "h:1", "-q", INT32, "-i", "0"], "-q' / '--queue",
         "0<=x<=2147483647"),
        (["queryCq", "-t", "T", "-b", "h:1", "-q", "0", "-i", INT64], "-i' / '--index",
         "0<=x<=9223372036854775807"),
        (["updateSubGroup", "-g", "G", "-c", "C", "-r", INT32], "-r' / '--retryMaxTimes",
         "-1<=x<=2147483647"),
        (["clusterList", "-i", "86401"], "-i' / '--interval", "1<=x<=86400"),
        (["clusterRT", "-i", "86401"], "-i' / '--interval", "1<=x<=86400"),
    ],
)  # fmt: skip
def test_numbers_past_the_wire_types_are_one_line(args: list[str], option: str, bound: str) -> None:
    line = one_line(args)
    assert line.startswith(f"mqadmin {args[0]}: error: Invalid value for '{option}': "), line
    assert f"is not in the range {bound}." in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["resetOffsetByTime", "-g", "G", "-t", "T", "-s", INT64],
        ["consumeMessage", "-t", "T", "-s", INT64],
        ["printMsg", "-t", "T", "-e", INT64],
        ["queryMsgByKey", "-t", "T", "-k", "K", "-b", INT64],
    ],
)
def test_timestamps_past_int64_are_one_line(args: list[str]) -> None:
    line = one_line(args)
    assert line.endswith(
        f"'{INT64}' is past the largest one ({MAX_TIMESTAMP_MS} ms) (see --help)"
    ), line


def test_the_largest_timestamp_is_accepted() -> None:
    assert parse_timestamp(str(MAX_TIMESTAMP_MS)) == 2**63 - 1
    with pytest.raises(ValueError, match="past the largest one"):
        parse_timestamp(str(MAX_TIMESTAMP_MS + 1))


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["consumeMessage", "-t", "T", "-s", "5", "-e", "1"], "-s"),
        (["printMsg", "-t", "T", "-b", "5", "-e", "1"], "-b"),
        (["printMsgByQueue", "-t", "T", "-a", "B", "-i", "0", "-b", "5", "-e", "1"], "-b"),
        (["queryMsgByKey", "-t", "T", "-k", "K", "-b", "5", "-e", "1"], "-b"),
    ],
)
def test_a_begin_after_the_end_is_one_line(args: list[str], flag: str) -> None:
    assert (
        one_line(args)
        == f"mqadmin {args[0]}: error: {flag} 5 is after -e 1: swap them (see --help)"
    )
