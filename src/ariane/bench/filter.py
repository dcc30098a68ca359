"""``ariane bench filter``: SQL92 filter evaluations per second on one core.

Each expression is compiled once and evaluated in a tight loop on a message's property map
(user properties plus the system ones a producer sets: UNIQ_KEY, TAGS, KEYS, WAIT), as the
broker does for every message it checks against a SQL92 subscription. The loop runs for about
``--seconds`` per expression (or exactly ``--iterations`` times); the compile time is the best
of a few uncached compiles.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping

import click
import orjson

from ariane.common.cli_bounds import OPTIONAL_COUNT, SECONDS
from ariane.filter.parser import parse
from ariane.filter.sql92 import CompiledFilter, compile

__all__ = ["CASES", "filter_bench"]

_MESSAGE: dict[str, str] = {
    "UNIQ_KEY": "7F00000100002A9F0000000000000001",
    "TAGS": "TagA",
    "KEYS": "order-20261122-0001",
    "WAIT": "true",
    "orderStatus": "1",
    "sellerId": "21",
    "region": "cn-hangzhou",
    "price": "99.5",
    "a": "42",
}

CASES: tuple[tuple[str, str], ...] = (
    ("tag equality", "TAGS = 'TagA'"),
    ("numeric >", "orderStatus > 0"),
    ("3 clauses", "orderStatus IS NOT NULL AND orderStatus > 0 AND sellerId = '21'"),
    (
        "mixed, 5 clauses",
        "(a > 10 AND a < 100) OR (region IN ('cn-hangzhou', 'cn-beijing') "
        "AND price BETWEEN 10.0 AND 100.0)",
    ),
    (
        "IN + STARTSWITH + NOT",
        "TAGS IN ('TagA', 'TagB') AND region STARTSWITH 'cn-' AND NOT (sellerId = '7')",
    ),
    ("missing properties", "vip = 'true' OR (level IS NOT NULL AND level >= 3)"),
    ("no match, failed conversion", "region > 5"),
)


def _rate(f: CompiledFilter, props: Mapping[str, str], seconds: float, iterations: int) -> float:
    matches = f.matches
    if iterations <= 0:  # calibrate: grow the batch until it takes ~1/10 of the budget
        n = 1000
        while True:
            start = time.perf_counter()
            for _ in range(n):
                matches(props)
            batch = time.perf_counter() - start
            if batch >= seconds / 10:
                break
            n *= 2
        iterations = max(n, int(n * seconds / batch))
    start = time.perf_counter()
    for _ in range(iterations):
        matches(props)
    elapsed = time.perf_counter() - start
    return iterations / elapsed if elapsed > 0 else float("inf")


def _compile_us(expression: str) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        result = parse(expression)
        CompiledFilter(expression, result.root, result.ignored_from)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


@click.command("filter")
@click.option(
    "--seconds", type=SECONDS, default=1.0, show_default=True, help="time per expression, s"
)
@click.option(
    "--iterations",
    type=OPTIONAL_COUNT,
    default=0,
    help="evaluations per expression (overrides --seconds; 0: use --seconds)",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object last")
def filter_bench(seconds: float, iterations: int, as_json: bool) -> None:
    """SQL92 filter evaluations per second for typical subscription expressions."""
    results = []
    for name, expression in CASES:
        f = compile(expression)
        rate = _rate(f, _MESSAGE, seconds, iterations)
        results.append(
            {
                "name": name,
                "expression": expression,
                "result": f.evaluate(_MESSAGE),
                "evals_per_s": round(rate),
                "us_per_eval": round(1e6 / rate, 3),
                "compile_us": round(_compile_us(expression), 1),
            }
        )
    out = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "properties": len(_MESSAGE),
        "cases": results,
    }
    if as_json:
        click.echo(orjson.dumps(out).decode())
        return
    click.echo(f"{out['python']}, {out['properties']} properties per message")
    for r in results:
        click.echo(
            f"{r['evals_per_s']:>12,} evals/s {r['us_per_eval']:>7.3f} us "
            f"compile {r['compile_us']:>7.1f} us  {r['name']}: {r['expression']} -> {r['result']}"
        )
