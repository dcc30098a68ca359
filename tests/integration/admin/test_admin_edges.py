"""Every mqadmin command answers bad input with one line and a non-zero status (issue 20 item 4).

The walk fills each command's required options (a number where it takes a number, the first
choice of a choice, else a word) and points it at a NameServer nobody listens on: each command
ends with one readable line (an argument error or "cannot connect"), never a traceback. In-process
through click's runner; the only sockets are refused connections to 127.0.0.1:1.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ariane.admin.cli import COMMANDS, admin
from ariane.cli import main

UNREACHABLE = "127.0.0.1:1"


def _command(name: str) -> click.Command:
    command = admin.get_command(click.Context(admin), name)
    assert command is not None
    return command


def _required_args(command: click.Command) -> list[str]:
    args: list[str] = []
    for param in command.params:
        if not isinstance(param, click.Option) or not param.required or "-n" in param.opts:
            continue
        kind = param.type
        if isinstance(kind, click.Choice):
            value = str(kind.choices[0])
        elif isinstance(kind, click.types.IntParamType | click.types.FloatParamType):
            value = "1"
        else:
            value = "x"
        args += [param.opts[0], value]
    return args


def _takes_namesrv(command: click.Command) -> bool:
    return any(isinstance(p, click.Option) and "-n" in p.opts for p in command.params)


def _one_line(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(admin, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        result.exception,
    )
    assert "Traceback" not in result.output, args
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, (args, lines)
    return result.exit_code, lines[0]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_unreachable_namesrv_is_one_line(name: str) -> None:
    command = _command(name)
    namesrv = ["-n", UNREACHABLE] if _takes_namesrv(command) else []
    code, line = _one_line([name, *namesrv, *_required_args(command)])
    assert code != 0, line
    assert line.startswith(f"admin {name}: "), line


def test_cannot_connect_names_the_namesrv() -> None:
    code, line = _one_line(["clusterList", "-n", UNREACHABLE])
    assert code == 1
    assert line.startswith(
        f"admin clusterList: cannot connect: no NameServer of ['{UNREACHABLE}'] is reachable"
    ), line


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["updateTopic", "-c", "C", "-t", "T", "-r", "abc"], "-r"),
        (["queryCq", "-t", "T", "-q", "x"], "-q"),
        (["updateTopicPerm", "-c", "C", "-t", "T", "-p", "5"], "-p"),
        (["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday"], "-s"),
    ],
)
def test_wrong_type_is_one_line(args: list[str], option: str) -> None:
    code, line = _one_line([args[0], "-n", UNREACHABLE, *args[1:]])
    assert code == 2
    assert f"Invalid value for '{option}'" in line, line
    assert line.endswith("(see --help)"), line


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["consumer", "-n", UNREACHABLE, "-t", "T"], "Error: no NameServer of"),
        (["producer", "-n", UNREACHABLE, "-t", "T"], "Error: the warm-up send to T failed: "),
    ],
)
def test_client_benches_with_an_unreachable_namesrv(args: list[str], first: str) -> None:
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert "Traceback" not in result.output
    assert [line for line in lines if line.startswith("Error:")] == lines[-1:], lines
    assert lines[-1].startswith(first), lines
    assert f"['{UNREACHABLE}'] is reachable" in lines[-1], lines
