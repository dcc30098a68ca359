"""``ariane bench micro``: in-process costs of the per-message steps, in µs per call.

How it works: each row of ``ariane.bench._micro_cases`` builds its input once and is timed
with ``timeit`` (``--rounds`` rounds of ``--number`` calls, the best round is reported; a
row whose call covers several messages, a batch body, gets ``--number / per`` calls and is
reported per message; the broker rows feed a whole request to an in-process broker,
``ariane.bench._micro_broker``, and are timed on this thread's CPU clock). This process runs the build it has (``ariane.common.native``:
compiled or pure). When it is the compiled build, the rows whose code has a compiled twin
are timed again in a child interpreter started with ``ARIANE_PURE=1`` (the pure twins, on
the same inputs), unless ``--no-pure``. The command prints the numbers; it asserts nothing.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import timeit
from collections.abc import Sequence
from typing import Any

import click
import orjson

from ariane.bench._micro_cases import CASES, Case
from ariane.common import native
from ariane.common.cli_bounds import COUNT

__all__ = ["measure", "micro_bench", "result_doc"]


def measure(case: Case, rounds: int, number: int) -> float:
    """Best of ``rounds`` rounds of ``case``'s call, in µs per unit of work."""
    call = case.build()
    try:
        loops = max(1, number // case.per)
        timer = getattr(call, "timer", time.perf_counter)
        best = min(timeit.Timer(call, timer=timer).repeat(repeat=rounds, number=loops))
    finally:
        close = getattr(call, "close", None)
        if close is not None:
            close()
    return best / loops / case.per * 1e6


def _pure_child(names: Sequence[str], rounds: int, number: int) -> dict[str, float]:
    """Run the named rows in ``python -m ariane bench micro`` with ``ARIANE_PURE=1``."""
    argv = [sys.executable, "-m", "ariane", "bench", "micro", "--json", "--no-pure"]
    argv += ["--rounds", str(rounds), "--number", str(number)]
    for name in names:
        argv += ["--only", name]
    env = {**os.environ, "ARIANE_PURE": "1"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise click.ClickException(f"the ARIANE_PURE=1 child failed: {done.stderr.strip()}")
    doc = orjson.loads(lines[-1])
    return {row["name"]: row["us_per_call"] for row in doc["rows"]}


def result_doc(
    cases: Sequence[Case],
    timings: dict[str, float],
    pure: dict[str, float],
    rounds: int,
    number: int,
) -> dict[str, Any]:
    """The JSON document of one run (``pure``: the child's figures, maybe empty)."""
    rows = []
    for case in cases:
        mine, twin = timings[case.name], pure.get(case.name)
        rows.append(
            {
                "name": case.name,
                "input": case.what,
                "compiled_twin": case.twin,
                "us_per_call": round(mine, 4),
                "pure_us_per_call": None if twin is None else round(twin, 4),
                "pure_over_build": None if twin is None or mine <= 0 else round(twin / mine, 2),
            }
        )
    return {
        "build": native.build_name(),
        "pure_build": "pure (ARIANE_PURE=1, child interpreter)" if pure else None,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "rounds": rounds,
        "number": number,
        "rows": rows,
    }


def _echo_table(doc: dict[str, Any]) -> None:
    build = "compiled" if doc["build"] == "compiled" else "this build"
    click.echo(
        f"build: {doc['build']}; {doc['python']}; best of {doc['rounds']} rounds of "
        f"{doc['number']} calls; µs per call"
        + (f"; pure column: {doc['pure_build']}" if doc["pure_build"] else "")
    )
    width = max(len(r["name"]) for r in doc["rows"])
    click.echo(f"{'row':<{width}}  {build:>10}  {'pure':>8}  {'pure/c':>6}  input")
    for r in doc["rows"]:
        pure = "" if r["pure_us_per_call"] is None else f"{r['pure_us_per_call']:8.3f}"
        ratio = "" if r["pure_over_build"] is None else f"{r['pure_over_build']:6.2f}"
        click.echo(
            f"{r['name']:<{width}}  {r['us_per_call']:10.3f}  {pure:>8}  {ratio:>6}  {r['input']}"
        )


def select(only: Sequence[str]) -> list[Case]:
    """The cases named in ``only`` (all when empty), in table order.

    Raises:
        click.BadParameter: an unknown name.
    """
    known = {c.name for c in CASES}
    unknown = sorted(set(only) - known)
    if unknown:
        raise click.BadParameter(f"unknown rows {unknown}; rows: {', '.join(sorted(known))}")
    return [c for c in CASES if not only or c.name in only]


@click.command("micro")
@click.option(
    "--rounds", type=COUNT, default=5, show_default=True, help="timeit rounds; the best is kept"
)
@click.option("--number", type=COUNT, default=10_000, show_default=True, help="calls per round")
@click.option("--only", multiple=True, help="only this row (repeatable)")
@click.option(
    "--pure/--no-pure",
    default=True,
    show_default=True,
    help="also time the rows with a compiled twin in an ARIANE_PURE=1 child",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object last")
def micro_bench(rounds: int, number: int, only: tuple[str, ...], pure: bool, as_json: bool) -> None:
    """Per-message steps in-process (codecs, ACL signing and check, trace hooks), µs per call."""
    if rounds <= 0 or number <= 0:
        raise click.BadParameter("--rounds and --number must be > 0")
    cases = select(only)
    timings = {case.name: measure(case, rounds, number) for case in cases}
    twins = [c.name for c in cases if c.twin]
    pure_timings: dict[str, float] = {}
    if pure and native.COMPILED and twins:
        pure_timings = _pure_child(twins, rounds, number)
    doc = result_doc(cases, timings, pure_timings, rounds, number)
    if as_json:
        click.echo(orjson.dumps(doc).decode())
        return
    _echo_table(doc)
