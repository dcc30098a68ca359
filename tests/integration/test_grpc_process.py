"""``ariane broker`` with ``grpcServerPort`` and ``ariane standalone --proxy-port`` serve the 5.x
gRPC protocol on a real port: plaintext and TLS, with bad input answered by a status."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest

from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.proxy.v2 import service_pb2_grpc as sg
from tests.support.cluster import start_broker
from tests.support.processes import running

pytestmark = pytest.mark.integration

MD = (("x-mq-client-id", "it-client"),)


def _route(channel: grpc.Channel, topic: str = "ItTopic") -> spb.QueryRouteResponse:
    stub = sg.MessagingServiceStub(channel)
    return stub.QueryRoute(  # type: ignore[no-any-return]
        spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=MD, timeout=10
    )


def test_broker_serves_grpc_and_answers_bad_input_with_a_status(tmp_path: Path) -> None:
    with running(start_broker(tmp_path / "b", "", {"grpcServerPort": 0})) as broker:
        addr = broker.ready["grpc"]
        with grpc.insecure_channel(addr) as channel:
            route = _route(channel)
            assert route.status.code == pb.OK
            assert len(route.message_queues) == 8
            assert route.message_queues[0].broker.endpoints.addresses[0].port == int(
                addr.rsplit(":", 1)[1]
            )
            raw = channel.unary_unary(
                "/apache.rocketmq.v2.MessagingService/SendMessage",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            answer = spb.SendMessageResponse.FromString(
                raw(b"\xff\xff\xff\xff\x0f", metadata=MD, timeout=10)
            )
            assert answer.status.code == pb.BAD_REQUEST
            assert "malformed apache.rocketmq.v2.SendMessageRequest" in answer.status.message
            recall = channel.unary_unary(
                "/apache.rocketmq.v2.MessagingService/RecallMessage",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            with pytest.raises(grpc.RpcError) as info:
                recall(b"", metadata=MD, timeout=10)
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
            # the server is still fine
            assert _route(channel).status.code == pb.OK


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return key, cert


def test_tls(tmp_path: Path) -> None:
    try:
        key, cert = _self_signed(tmp_path)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"openssl cannot make a test certificate here: {exc}")
    conf = {"grpcServerPort": 0, "grpcTlsCertPath": cert, "grpcTlsKeyPath": key}
    with running(start_broker(tmp_path / "b", "", conf)) as broker:
        addr = broker.ready["grpc"]
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(addr, creds) as channel:
            assert _route(channel).status.code == pb.OK
        with grpc.insecure_channel(addr) as plain, pytest.raises(grpc.RpcError):
            _route(plain)


def test_bench_grpc_runs_both_protocols_on_one_broker() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ariane", "bench", "grpc", "-n", "300", "-c", "8", "--json"],
        capture_output=True, text=True, timeout=240, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    phases = {row["phase"]: row for row in result["phases"]}
    for name in ("produce remoting", "produce gRPC", "consume remoting PULL",
                 "consume gRPC PullMessage", "receive+ack gRPC (POP)"):  # fmt: skip
        assert phases[name]["msgs"] == 300, phases[name]
        assert phases[name]["failed"] == 0
        assert phases[name]["msgs_per_s"] > 0


def _drain(call: Any, answers: queue.Queue[spb.TelemetryCommand]) -> None:
    try:
        for answer in call:
            answers.put(answer)
    except grpc.RpcError:
        pass  # cancelled at the end of the test


def test_streams_per_connection_are_limited(tmp_path: Path) -> None:
    """A connection gets ``grpcMaxStreamsPerConnection`` streams at once; more wait (HTTP/2
    flow control) until one ends; none is refused or breaks the others."""
    conf = {"grpcServerPort": 0, "grpcMaxStreamsPerConnection": 2}
    with running(start_broker(tmp_path / "b", "", conf)) as broker:
        settings = spb.TelemetryCommand(
            settings=pb.Settings(
                client_type=pb.PRODUCER,
                publishing=pb.Publishing(topics=[pb.Resource(name="Limited")]),
            )
        )
        with grpc.insecure_channel(broker.ready["grpc"]) as channel:
            stub = sg.MessagingServiceStub(channel)
            calls = []

            def open_stream(i: int) -> queue.Queue[spb.TelemetryCommand]:
                requests: queue.Queue[spb.TelemetryCommand | None] = queue.Queue()
                requests.put(settings)
                call = stub.Telemetry(
                    iter(requests.get, None), metadata=(("x-mq-client-id", f"c{i}"),)
                )
                answers: queue.Queue[spb.TelemetryCommand] = queue.Queue()
                threading.Thread(target=_drain, args=(call, answers), daemon=True).start()
                calls.append((call, requests))
                return answers

            for i in range(2):
                assert open_stream(i).get(timeout=30).status.code == pb.OK
            third = open_stream(2)
            with pytest.raises(queue.Empty):
                third.get(timeout=1.0)  # waits for a free slot
            calls[0][1].put(None)  # the client ends its first stream
            calls[0][0].cancel()
            assert third.get(timeout=30).status.code == pb.OK
            for call, requests in calls[1:]:
                requests.put(None)
                call.cancel()
