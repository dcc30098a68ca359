"""A real ``ariane namesrv`` process on a free port: robustness, liveness, lifecycle."""

from __future__ import annotations

import random
import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ariane.remoting.blocking import BlockingRemotingClient
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import (
    DataVersion,
)
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.route import TopicRouteData
from tests.helpers import register_broker_command
from tests.integration.namesrv_process import NamesrvProcess
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def start_namesrv(tmp_path: Path) -> Iterator[Callable[..., NamesrvProcess]]:
    started: list[NamesrvProcess] = []

    def start(*args: str, data_dir: Path | None = None) -> NamesrvProcess:
        ns = NamesrvProcess(data_dir or tmp_path / f"ns{len(started)}", *args)
        started.append(ns)
        return ns

    yield start
    for ns in started:
        ns.kill()


@pytest.fixture
def client() -> Iterator[BlockingRemotingClient]:
    with BlockingRemotingClient() as c:
        yield c


def config_file(tmp_path: Path, **props: object) -> str:
    path = tmp_path / "namesrv.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def register_request(name: str = "broker-a", addr: str = "127.0.0.1:10911") -> RemotingCommand:
    now = DataVersion(0, int(time.time() * 1000), 1)
    return register_broker_command(broker_name=name, broker_addr=addr, data_version=now)


def route(client: BlockingRemotingClient, addr: str, topic: str = "T") -> RemotingCommand:
    return client.invoke(
        addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5000
    )


def assert_serving(ns: NamesrvProcess) -> None:
    assert ns.alive
    with BlockingRemotingClient() as fresh:
        r = fresh.invoke(
            ns.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5000
        )
        assert r.code == ResponseCode.SUCCESS


def test_help_documents_every_flag() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ariane", "namesrv", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in (
        "--listen-port",
        "-p",
        "--host",
        "--config-file",
        "-c",
        "--data-dir",
        "--log-level",
    ):
        assert flag in out


def test_bad_config_value_prints_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ariane", "namesrv", "-c", config_file(tmp_path, listenPort="abc")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "listenPort" in lines[0]


def test_busy_port_is_reported(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "ariane",
                "namesrv",
                "-p",
                str(port),
                "--data-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"127.0.0.1:{port}" in result.stderr


def test_sigterm_stops_gracefully_and_kv_config_survives(
    start_namesrv: Callable[..., NamesrvProcess], client: BlockingRemotingClient, tmp_path: Path
) -> None:
    ns = start_namesrv(data_dir=tmp_path / "data")
    put = h.PutKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4")
    r = client.invoke(
        ns.addr, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, put.to_ext_fields()), 5000
    )
    assert r.code == ResponseCode.SUCCESS
    assert ns.stop() == 0
    assert (tmp_path / "data" / "kvConfig.json").exists()
    again = start_namesrv(data_dir=tmp_path / "data")
    get = RemotingCommand.request(
        RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
    )
    r = client.invoke(again.addr, get, 5000)
    assert r.ext_fields["value"] == "broker-a:4"


def test_random_bytes_and_oversized_frames_close_only_their_connection(
    start_namesrv: Callable[..., NamesrvProcess],
) -> None:
    ns = start_namesrv()
    rng = random.Random(20240611)
    payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(4, 400))) for _ in range(30)]
    payloads += [
        struct.pack(">i", 16 * 1024 * 1024) + b"\x00" * 64,  # one byte over 16 MiB with its length
        struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64,
        struct.pack(">i", -5) + b"\x00" * 8,
        struct.pack(">iI", 12, 3 << 24) + b"\x00" * 8,  # unknown serialisation type
        struct.pack(">iI", 12, 8) + b"{{{{{{{{",  # broken JSON header
    ]
    keeper = BlockingRemotingClient()
    try:
        keeper.invoke(ns.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5000)
        for payload in payloads:
            with socket.create_connection(("127.0.0.1", ns.port), timeout=10) as s:
                s.sendall(payload)
                s.settimeout(0.5)
                try:
                    while s.recv(65536):  # drain whatever comes back until closed or quiet
                        pass
                except TimeoutError:
                    pass  # random bytes may form a partial frame the server is still waiting on
                except ConnectionResetError:
                    pass
            assert ns.alive
        # the frames over the limit were refused, the connection closed by the server
        for payload in payloads[30:]:
            with socket.create_connection(("127.0.0.1", ns.port), timeout=10) as s:
                s.sendall(payload)
                s.settimeout(10)
                try:
                    assert s.recv(65536) == b""
                except ConnectionResetError:
                    pass
        r = keeper.invoke(
            ns.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5000
        )
        assert r.code == ResponseCode.SUCCESS
        assert_serving(ns)
    finally:
        keeper.close()


def test_clients_disconnecting_mid_request(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv()
    frame = encode(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
    for cut in (2, 7, len(frame) // 2, len(frame) - 1, len(frame)):
        with socket.create_connection(("127.0.0.1", ns.port), timeout=10) as s:
            s.sendall(frame[:cut])
        # and one that sends many requests and vanishes before reading any answer
    with socket.create_connection(("127.0.0.1", ns.port), timeout=10) as s:
        s.sendall(frame * 200)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    assert_serving(ns)


def test_a_thousand_idle_connections(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1100
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"open file limit {hard} is below {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    ns = start_namesrv()
    idle: list[socket.socket] = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", ns.port), timeout=10))
        assert_serving(ns)
        # an idle connection can still talk
        s = idle[500]
        s.sendall(encode(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)))
        decoder = FrameDecoder()
        answers: list[RemotingCommand] = []
        while not answers:
            data = s.recv(65536)
            assert data
            answers = decoder.feed(data)
        assert answers[0].code == ResponseCode.SUCCESS
    finally:
        for s in idle:
            s.close()
    assert_serving(ns)


def test_dead_broker_is_removed_from_routes(
    start_namesrv: Callable[..., NamesrvProcess], client: BlockingRemotingClient, tmp_path: Path
) -> None:
    # the route is read once before the broker expires: 2 s leave a loaded machine time for
    # that one round trip (0.8 s was within reach of a scheduling stall)
    conf = config_file(tmp_path, scanNotActiveBrokerInterval=100, brokerChannelExpiredTime=2000)
    ns = start_namesrv("-c", conf)
    with BlockingRemotingClient() as broker:  # keeps its connection open but stops heartbeating
        assert broker.invoke(ns.addr, register_request(), 5000).code == ResponseCode.SUCCESS
        r = route(client, ns.addr)
        assert r.code == ResponseCode.SUCCESS
        assert r.body is not None
        assert TopicRouteData.decode(r.body).broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
        wait_until(
            lambda: route(client, ns.addr).code == ResponseCode.TOPIC_NOT_EXIST,
            what="broker expired",
        )
    assert route(client, ns.addr, "TBW102").code == ResponseCode.TOPIC_NOT_EXIST


def test_broker_connection_close_removes_routes_at_once(
    start_namesrv: Callable[..., NamesrvProcess], client: BlockingRemotingClient
) -> None:
    ns = start_namesrv()
    broker = BlockingRemotingClient()
    assert broker.invoke(ns.addr, register_request(), 5000).code == ResponseCode.SUCCESS
    assert route(client, ns.addr).code == ResponseCode.SUCCESS
    broker.close()
    wait_until(
        lambda: route(client, ns.addr).code == ResponseCode.TOPIC_NOT_EXIST, what="route removed"
    )


def test_name_servers_are_independent(
    start_namesrv: Callable[..., NamesrvProcess], client: BlockingRemotingClient
) -> None:
    first, second = start_namesrv(), start_namesrv()
    with BlockingRemotingClient() as broker:
        for ns in (first, second):
            assert broker.invoke(ns.addr, register_request(), 5000).code == ResponseCode.SUCCESS
        unregister = h.UnRegisterBrokerRequestHeader(
            broker_name="broker-a",
            broker_addr="127.0.0.1:10911",
            cluster_name="DefaultCluster",
            broker_id=0,
        )
        r = broker.invoke(
            first.addr,
            RemotingCommand.request(RequestCode.UNREGISTER_BROKER, unregister.to_ext_fields()),
            5000,
        )
        assert r.code == ResponseCode.SUCCESS
        assert route(client, first.addr).code == ResponseCode.TOPIC_NOT_EXIST
        assert route(client, second.addr).code == ResponseCode.SUCCESS
    assert first.stop() == 0
    assert second.stop() == 0
