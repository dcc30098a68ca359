"""Bounded click types for the numbers of the ``ariane`` command line.

How it works: every numeric option of the command tree takes one of these (or its own
``click.IntRange``), so a value that would make no sense (a count of 0, a negative size, a
rate of ``nan``) is refused by click before the command runs: one line naming the option and
the accepted range, exit status 2, instead of a ZeroDivisionError or nonsense output.
``tests/unit/test_cli_bounds.py`` walks the tree and fails on any unbounded number.
``FiniteFloatRange`` is ``click.FloatRange`` that also refuses ``nan`` (which compares false
with every bound, so plain ``FloatRange`` lets it through).
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = [
    "BATCH",
    "BODY_BYTES",
    "COUNT",
    "IN_FLIGHT",
    "MAX_BODY_BYTES",
    "MAX_COUNT",
    "MAX_SECONDS",
    "OPTIONAL_COUNT",
    "QUEUES",
    "RATE",
    "SECONDS",
    "THREADS",
    "TIMER_DELAY_MS",
    "FiniteFloatRange",
]


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that refuses ``nan`` too."""

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        rv = super().convert(value, param, ctx)
        if math.isnan(rv):
            self.fail(
                f"{value!r} is not a number in the range {self._describe_range()}.", param, ctx
            )
        return rv


#: the largest count (messages, rounds, records) a command takes: more is not a benchmark
MAX_COUNT = 2**31 - 1
#: the largest message body: a body must fit in one CommitLog file (1 GiB) with room to spare
MAX_BODY_BYTES = 64 << 20
#: the longest duration in seconds (a week)
MAX_SECONDS = 7 * 24 * 3600.0

#: messages, rounds, records...: at least one
COUNT = click.IntRange(1, MAX_COUNT)
#: a count where 0 means "none" / "skip this phase"
OPTIONAL_COUNT = click.IntRange(0, MAX_COUNT)
#: message body bytes (a broker refuses an empty body)
BODY_BYTES = click.IntRange(1, MAX_BODY_BYTES)
#: messages per batch request
BATCH = click.IntRange(1, 65_536)
#: requests in flight / asyncio senders
IN_FLIGHT = click.IntRange(1, 65_536)
#: operating-system threads
THREADS = click.IntRange(1, 1024)
#: queues of a topic (the broker's defaultTopicQueueNums and updateTopic take 1..1024)
QUEUES = click.IntRange(1, 1024)
#: a duration or an interval in seconds: > 0
SECONDS = FiniteFloatRange(0, MAX_SECONDS, min_open=True)
#: a timer message's delay in ms: up to the broker's timerMaxDelaySec (3 days)
TIMER_DELAY_MS = click.IntRange(0, 3 * 24 * 3600 * 1000)
#: messages per second; 0 means "as fast as possible" / "off" where the option says so
RATE = FiniteFloatRange(0, 10_000_000)
