"""``ariane broker`` and ``ariane standalone`` as real processes: help, bad configuration,
ready lines, logs and graceful shutdown."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from ariane.broker.cli import broker
from ariane.standalone import standalone
from tests.support.polling import wait_until
from tests.support.processes import ariane_command, free_port, start_server
from tests.support.rpc import pull, send_message

pytestmark = pytest.mark.integration


def run_cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ariane_command(*args), capture_output=True, text=True, timeout=timeout_s, check=False
    )


@pytest.mark.parametrize("command", [broker, standalone])
def test_help_documents_every_flag(command: object) -> None:
    import click

    assert isinstance(command, click.Command)
    name = "broker" if command is broker else "standalone"
    out = run_cli(name, "--help").stdout
    for param in command.params:
        assert isinstance(param, click.Option)
        for flag in param.opts:
            assert flag in out, f"{flag} missing from {name} --help"
        assert param.help, f"{param.opts} has no help text"


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("listenPort=abc", "listenPort"),
        ("flushDiskType=SOMETIMES", "flushDiskType"),
        ("brokerPermission=99", "brokerPermission"),
        ("deleteWhen=30", "deleteWhen"),
        ("namesrvAddr=nohostport", "namesrvAddr"),
    ],
)
def test_bad_config_value_exits_2_naming_the_key(tmp_path: Path, line: str, key: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'store'}\n{line}\n")
    result = run_cli("broker", "-c", str(conf))
    assert result.returncode == 2, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if "bad config value" in ln]
    assert len(errors) == 1, result.stderr
    assert key in errors[0]


def test_missing_config_file_and_bad_option(tmp_path: Path) -> None:
    result = run_cli("broker", "-c", str(tmp_path / "missing.conf"))
    assert result.returncode == 2
    assert "missing.conf" in result.stderr
    result = run_cli("broker", "-o", "novalue", "--store-dir", str(tmp_path / "s"))
    assert result.returncode == 2
    assert "KEY=VALUE" in result.stderr


def test_corrupt_metadata_file_exits_2(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / "topics.json").write_text("{not json")
    result = run_cli("broker", "--store-dir", str(store), "-p", "0")
    assert result.returncode == 2
    assert "topics.json" in result.stderr


def test_busy_port_exits_1(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = run_cli("broker", "--store-dir", str(tmp_path / "s"), "-p", str(port))
    assert result.returncode == 1
    assert "cannot listen" in result.stderr
    assert str(port) in result.stderr  # names the port it could not take


def test_broker_without_name_server_still_serves(tmp_path: Path) -> None:
    proc = start_server(
        ["broker", "-p", "0", "--store-dir", str(tmp_path / "s"), "-o", "brokerName=solo"],
        name="broker",
    )
    try:
        addr = proc.ready["broker"]
        assert send_message(addr, "Solo", b"x").code == 0
        assert wait_until(lambda: pull(addr, "Solo", "G").code == 0, 10)
    finally:
        assert proc.stop() == 0
    assert "boot success" in proc.output()


def test_standalone_runs_both_and_stops_both(tmp_path: Path) -> None:
    data = tmp_path / "data"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog={64 * 1024 * 1024}\nbrokerName=standalone-a\n")
    proc = start_server(
        [
            "standalone", "--data-dir", str(data), "--namesrv-port", "0", "--broker-port", "0",
            "--broker-conf", str(conf), "--metrics-port", str(free_port()),
        ],
        name="standalone",
    )  # fmt: skip
    stopped = False
    try:
        ns, addr = proc.ready["namesrv"], proc.ready["broker"]
        scraped = urllib.request.urlopen(f"http://{proc.ready['metrics']}/metrics", timeout=10)
        assert b'rocketmq_broker_permission{cluster="DefaultCluster"' in scraped.read()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", ns)
        assert send_message(addr, "Standalone", b"hello").code == 0
        assert wait_until(lambda: pull(addr, "Standalone", "G").code == 0, 10)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.proc.wait(60) == 0
        stopped = True
    finally:
        if not stopped:
            proc.stop()
    for hostport in (ns, addr):
        host, port = hostport.rsplit(":", 1)
        with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
            pass
    broker_out = (data / "logs" / "broker.out").read_text()
    assert "boot success" in broker_out
    assert "shut down" in broker_out
    assert "shut down" in (data / "logs" / "namesrv.out").read_text()
    # the servers' own logs: files only (no stderr copy in the .out files)
    assert "broker standalone-a started" in (data / "logs" / "broker.log").read_text()
    assert "name server stopped" in (data / "logs" / "namesrv.log").read_text()
    assert "started" not in broker_out
    assert not (data / "broker" / "store" / "abort").exists()
    assert (data / "broker" / "store" / "config" / "topics.json").exists()


def test_standalone_reports_a_broker_that_cannot_start(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={a_file / 'store'}\n")  # valid, but the broker cannot use it
    result = run_cli(
        "standalone", "--data-dir", str(tmp_path / "d"), "--namesrv-port", "0",
        "--broker-port", "0", "--broker-conf", str(conf), timeout_s=120,
    )  # fmt: skip
    assert result.returncode == 1
    assert "broker exited with status 2" in result.stderr
    assert "Not a directory" in result.stderr
    assert "ready" not in result.stdout


def test_standalone_refuses_a_bad_broker_conf_before_starting(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=not-a-port\n")
    result = run_cli(
        "standalone", "--data-dir", str(tmp_path / "d"), "--namesrv-port", "0",
        "--broker-conf", str(conf), timeout_s=120,
    )  # fmt: skip
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"ariane standalone: bad config value: {conf}: listenPort: must be an integer, "
        "got 'not-a-port'"
    ]
    assert "ready" not in result.stdout
