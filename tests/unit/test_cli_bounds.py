"""Every number of the ``ariane`` command tree has bounds (issue 20 item 4: bad input gets one
readable line, never a traceback or nonsense output).

The tree is walked as click sees it (lazy groups included, ``ariane admin`` is ``mqadmin``): a
numeric option must be a ``click.IntRange`` with a lower bound or a ``FiniteFloatRange`` with
both bounds (plain ``FloatRange`` lets ``nan`` through). Then the values that used to crash or
print nonsense are refused by click before the command runs: one line naming the option, exit 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from ariane.cli import main
from ariane.common.cli_bounds import SECONDS, FiniteFloatRange
from tests.helpers import one_line_error

#: options where any value is legal, each with the reason
ANY_VALUE = {
    # the seed of random.Random: every integer is a seed
    ("ariane bench dledger", "--seed"),
}


def _walk(
    command: click.Command, path: str, ctx: click.Context
) -> Iterator[tuple[str, click.Parameter]]:
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{path} {name}"
            yield from _walk(sub, f"{path} {name}", click.Context(sub, parent=ctx, info_name=name))
        return
    for param in command.params:
        yield path, param


def _numeric_params() -> list[tuple[str, click.Parameter]]:
    found = []
    for path, param in _walk(main, "ariane", click.Context(main, info_name="ariane")):
        if isinstance(param.type, click.types.IntParamType | click.types.FloatParamType):
            found.append((path, param))
    return found


def _problem(param: click.Parameter) -> str | None:
    kind = param.type
    if isinstance(kind, click.IntRange):
        return None if kind.min is not None else "no lower bound"
    if isinstance(kind, FiniteFloatRange):
        return None if kind.min is not None and kind.max is not None else "not bounded both ways"
    if isinstance(kind, click.FloatRange):
        return "a FloatRange takes nan: use FiniteFloatRange"
    return f"unbounded {kind.name}"


def test_every_numeric_option_is_bounded() -> None:
    params = _numeric_params()
    assert len(params) > 150  # the walk reached the lazy groups (bench, admin...)
    unbounded = [
        f"{path} {max(param.opts, key=len)}: {problem}"
        for path, param in params
        if (path, max(param.opts, key=len)) not in ANY_VALUE
        and (problem := _problem(param)) is not None
    ]
    assert unbounded == []


def test_every_default_is_inside_its_bounds() -> None:
    for path, param in _numeric_params():
        default = param.default
        if not isinstance(default, int | float) or (path, max(param.opts, key=len)) in ANY_VALUE:
            continue  # no default (None, unset)
        assert param.type.convert(default, param, None) == default, (path, param.opts)


def test_nan_is_refused_by_finite_float_range() -> None:
    with pytest.raises(click.BadParameter, match="'nan' is not a number in the range"):
        SECONDS.convert("nan", None, None)
    with pytest.raises(click.BadParameter, match="not in the range"):
        SECONDS.convert("inf", None, None)
    assert SECONDS.convert("2.5", None, None) == 2.5


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), prog_name="ariane")


def one_line(result: Result) -> str:
    return one_line_error(result)


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        # ZeroDivisionError tracebacks before
        (["bench", "store", "--messages", "0"], "--messages", "0"),
        (["bench", "store", "--size", "0"], "--size", "0"),
        (["bench", "store", "--writers", "0", "--sync-messages", "10"], "--writers", "0"),
        # nonsense output before
        (["bench", "store", "--passes", "0"], "--passes", "0"),
        (["bench", "store", "--messages", "-1"], "--messages", "-1"),
        (["store", "dump", "{dir}", "--limit", "-1"], "--limit", "-1"),
        (["store", "dump", "{dir}", "--from", "-5"], "--from", "-5"),
        # more that divided by zero or looped on nonsense
        (["bench", "pop", "--timer-precision-ms", "0"], "--timer-precision-ms", "0"),
        (["bench", "grpc", "--timer-rate", "0"], "--timer-rate", "0"),
        (["bench", "spark-decode", "--records", "0"], "--records", "0"),
        (["bench", "producer", "--rate", "nan"], "--rate", "nan"),
        (["bench", "producer", "--delay-level", "19"], "--delay-level", "19"),
        (["bench", "consumer", "--produce-rate", "inf"], "--produce-rate", "inf"),
        (["bench", "consumer", "--size", "4"], "-s' / '--size", "4"),
        (["bench", "remoting", "--concurrency", "0"], "--concurrency' / '-n", "0"),
        (["bench", "recovery", "--file-mb", "4096"], "--file-mb", "4096"),
        (
            ["pipeline", "archive", "-t", "T", "--to", "{dir}", "--trigger-seconds", "0"],
            "--trigger-seconds",
            "0",
        ),
        (
            ["pipeline", "archive", "-t", "T", "--to", "{dir}", "--max-offsets-per-trigger", "0"],
            "--max-offsets-per-trigger",
            "0",
        ),
        (["dashboard", "--collect-interval-s", "nan"], "--collect-interval-s", "nan"),
        (
            ["admin", "transferLeadership", "-g", "G", "-t", "n1", "-w", "nan"],
            "-w' / '--waitSeconds",
            "nan",
        ),
    ],
)
def test_bad_numbers_are_one_line_naming_the_option(
    args: list[str], option: str, value: str, tmp_path: Path
) -> None:
    result = run(*(a.replace("{dir}", str(tmp_path)) for a in args))
    line = one_line(result)
    assert f"error: Invalid value for '{option}': " in line, line
    assert value in line, line
    assert "range" in line, line
