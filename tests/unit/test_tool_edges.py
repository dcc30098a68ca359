"""The `ariane` tools meet bad input with one readable line and a non-zero status (issue 20 item 4).

In-process (click's runner), no sockets: a missing config file, a directory where a file is
expected, a file where a directory is expected and a value of the wrong type.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import ariane.broker.cli as broker_cli
import ariane.namesrv.cli as namesrv_cli
from ariane.bench._workdir import make_work_dir
from ariane.cli import LazyGroup, main
from ariane.errors import ConnectError
from tests.helpers import one_line_error


@pytest.fixture(autouse=True)
def _no_logging_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    # the servers install a root stderr handler first; keep the test process's logging as is
    monkeypatch.setattr(broker_cli, "configure_logging", lambda *a, **k: None)
    monkeypatch.setattr(namesrv_cli, "configure_logging", lambda *a, **k: None)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), prog_name="ariane")


def one_line(result: Result) -> str:
    return one_line_error(result, exit_code=None)


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_missing_config_file_says_not_found(server: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    result = run(server, "-c", str(missing))
    assert result.exit_code == 2
    assert one_line(result) == f"ariane {server}: {missing}: config file not found"


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_bad_file_value_is_reported_even_when_a_flag_overrides_it(
    server: str, tmp_path: Path
) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("listenPort=abc\n", encoding="utf-8")
    result = run(server, "-c", str(conf), "-p", "0")
    assert result.exit_code == 2
    assert one_line(result) == (
        f"ariane {server}: bad config value: listenPort: must be an integer, got 'abc'"
    )


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_config_directory_and_wrong_type_are_one_line_usage_errors(
    server: str, tmp_path: Path
) -> None:
    result = run(server, "-c", str(tmp_path))
    assert result.exit_code == 2
    assert one_line(result) == (
        f"ariane {server}: error: Invalid value for '-c' / '--config-file': "
        f"File '{tmp_path}' is a directory. (see --help)"
    )
    result = run(server, "-p", "abc")
    assert result.exit_code == 2
    line = one_line(result)
    assert line.startswith(f"ariane {server}: error: Invalid value for '-p'"), line
    assert "'abc' is not a valid integer" in line


def test_a_bad_option_of_a_group_is_one_line() -> None:
    for args, prefix in ((["--bogus"], "ariane"), (["bench", "--bogus"], "ariane bench")):
        result = run(*args)
        assert result.exit_code == 2
        assert one_line(result) == f"{prefix}: error: No such option '--bogus'. (see --help)"


def test_unknown_commands_are_one_line() -> None:
    for args, prefix in ((["nosuch"], "ariane"), (["bench", "nosuch"], "ariane bench")):
        result = run(*args)
        assert result.exit_code == 2
        assert one_line(result) == f"{prefix}: error: No such command 'nosuch'. (see --help)"


@pytest.mark.parametrize("bench", ["store", "recovery"])
def test_bench_dir_that_is_a_file(bench: str, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x", encoding="utf-8")
    result = run("bench", bench, "--dir", str(a_file))
    assert result.exit_code == 2
    assert one_line(result) == (
        f"ariane bench {bench}: error: --dir {a_file}: is a file, not a directory (see --help)"
    )
    assert a_file.read_text(encoding="utf-8") == "x"


def test_bench_dir_missing_is_created(tmp_path: Path) -> None:
    where = tmp_path / "a" / "b"
    made = Path(make_work_dir("ariane-bench-", str(where)))
    assert made.parent == where
    assert made.is_dir()
    assert made.name.startswith("ariane-bench-")


def test_bench_dir_under_a_file_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x", encoding="utf-8")
    result = run("bench", "store", "--dir", str(a_file / "sub"))
    assert result.exit_code == 2
    assert one_line(result).startswith(
        f"ariane bench store: error: --dir {a_file / 'sub'}: cannot create it:"
    )


@pytest.mark.parametrize("launcher", ["standalone", "cluster"])
def test_a_data_dir_that_cannot_be_created_is_one_line(launcher: str, tmp_path: Path) -> None:
    # a data directory under a file: mkdir fails before any process starts
    a_file = tmp_path / "file"
    a_file.write_text("x", encoding="utf-8")
    result = run(launcher, "--data-dir", str(a_file / "data"))
    assert result.exit_code == 2
    assert one_line(result) == (
        f"ariane {launcher}: cannot create data directory {a_file / 'data' / 'logs'}: "
        "Not a directory (choose a writable --data-dir)"
    )


@pytest.mark.parametrize("tool", ["dump", "verify", "repair"])
def test_store_tools_on_a_missing_directory(tool: str, tmp_path: Path) -> None:
    result = run("store", tool, str(tmp_path / "missing"))
    assert result.exit_code == 2
    line = one_line(result)
    assert line.startswith(f"ariane store {tool}: error: Invalid value for 'DIRECTORY'"), line
    assert "does not exist" in line


def test_an_error_of_ours_from_a_sub_command_is_one_line() -> None:
    @click.command()
    def boom() -> None:
        raise ConnectError("no NameServer of ['127.0.0.1:1'] is reachable")

    group = LazyGroup(name="tool")
    group.add_command(boom)
    result = CliRunner().invoke(group, ["boom"])
    assert result.exit_code == 1
    assert one_line(result) == "Error: no NameServer of ['127.0.0.1:1'] is reachable"


def test_replay_from_a_directory_without_an_archive_is_one_line(tmp_path: Path) -> None:
    result = run("pipeline", "replay", "--from", str(tmp_path), "-t", "T")
    assert result.exit_code == 2
    assert one_line(result) == (
        f"ariane pipeline replay: error: --from {tmp_path}: no Parquet archive there "
        "(write one with 'ariane pipeline archive') (see --help)"
    )


@pytest.mark.parametrize("launcher", ["standalone", "cluster"])
def test_launchers_check_every_value_of_the_broker_conf(launcher: str, tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=abc\n", encoding="utf-8")
    data = tmp_path / "data"
    result = run(launcher, "--broker-conf", str(conf), "--data-dir", str(data))
    assert result.exit_code == 2
    assert one_line(result) == (
        f"ariane {launcher}: bad config value: {conf}: listenPort: must be an integer, got 'abc'"
    )
