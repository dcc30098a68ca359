"""``ariane bench remoting``: round trips per second through the remoting stack.

A ``RemotingServer`` with one echo processor runs in a child process (or in-process with
``--in-process``); the client keeps ``--concurrency`` requests in flight on one connection,
each shaped like a SEND_MESSAGE_V2 (short-key header, ``--body-bytes`` payload) and answered
with a send-response-like header plus the echoed body. It also times the sans-IO codec alone.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import statistics
import time
from array import array
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

import click

from ariane.common.cli_bounds import COUNT, IN_FLIGHT, MAX_BODY_BYTES, OPTIONAL_COUNT
from ariane.remoting.client import RemotingClient
from ariane.remoting.config import RemotingServerConfig
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.eventloop import run, uvloop_available
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand, SerializeType
from ariane.remoting.protocol.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader
from ariane.remoting.server import RemotingServer

__all__ = ["remoting_bench"]

_CODE = RequestCode.SEND_MESSAGE_V2
_EXT = SendMessageRequestHeaderV2(
    producer_group="bench_producer_group",
    topic="BenchmarkTest",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=1,
    sys_flag=0,
    born_timestamp=1_700_000_000_000,
    flag=0,
    properties="UNIQ_KEY\x017F0000010001000000000000000000\x02WAIT\x01true\x02TAGS\x01bench\x02",
    reconsume_times=0,
    unit_mode=False,
    batch=False,
).to_ext_fields()
_RESPONSE_EXT = SendMessageResponseHeader(
    msg_id="7F00000100002A9F0000000000000000",
    queue_id=1,
    queue_offset=42,
    msg_region="DefaultRegion",
    trace_on="true",
).to_ext_fields()


def _echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(ResponseCode.SUCCESS, None, dict(_RESPONSE_EXT), request.body)


async def _echo_async(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return _echo(ctx, request)


async def _start_server(async_processor: bool = False) -> RemotingServer:
    server = RemotingServer(RemotingServerConfig(listen_port=0, channel_max_idle_seconds=0))
    server.register_processor(_CODE, _echo_async if async_processor else _echo)
    await server.start()
    return server


def _serve_child(conn: Connection, use_uvloop: bool, async_processor: bool) -> None:
    async def main() -> None:
        server = await _start_server(async_processor)
        conn.send(server.port)
        loop = asyncio.get_running_loop()
        while True:  # "cpu": report CPU seconds used so far; "stop": report and stop
            message = await loop.run_in_executor(None, conn.recv)
            conn.send(time.process_time())
            if message == "stop":
                break
        await server.stop()

    run(main(), use_uvloop=use_uvloop)


async def _drive(
    addr: str, concurrency: int, total: int, body: bytes, serialize_type: SerializeType
) -> dict[str, Any]:
    client = RemotingClient()
    channel = await client.get_channel(addr)
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    latencies = array("d")
    state = {"sent": 0, "done": 0, "errors": 0}
    now = time.perf_counter

    def send_one() -> None:
        request = RemotingCommand.request(_CODE, dict(_EXT), body, serialize_type=serialize_type)
        state["sent"] += 1
        channel.invoke_future(request, 30_000).add_done_callback(partial(on_done, now()))

    def on_done(started: float, future: asyncio.Future[RemotingCommand]) -> None:
        latencies.append(now() - started)
        state["done"] += 1
        if future.cancelled() or future.exception() is not None or future.result().code != 0:
            state["errors"] += 1
        if state["sent"] < total:
            send_one()
        elif state["done"] == total and not finished.done():
            finished.set_result(None)

    began = now()
    for _ in range(min(concurrency, total)):
        send_one()
    await finished
    elapsed = now() - began
    await client.close()
    ordered = sorted(latencies)
    return {
        "requests": total,
        "errors": state["errors"],
        "seconds": round(elapsed, 3),
        "requests_per_s": round(total / elapsed),
        "latency_p50_ms": round(ordered[len(ordered) // 2] * 1000, 3),
        "latency_p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
        "latency_mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def _ask(conn: Connection | None, message: str) -> float | None:
    if conn is None:
        return None
    conn.send(message)
    answer: float = conn.recv()
    return answer


def _codec_rates(
    body: bytes, serialize_type: SerializeType, rounds: int = 50_000
) -> dict[str, int]:
    request = RemotingCommand.request(_CODE, dict(_EXT), body, serialize_type=serialize_type)
    started = time.perf_counter()
    for _ in range(rounds):
        frame = encode(request)
    encode_rate = rounds / (time.perf_counter() - started)
    data = frame * 100
    decoder = FrameDecoder()
    started = time.perf_counter()
    for _ in range(rounds // 100):
        decoder.feed(data)
    decode_rate = rounds / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(rounds):
        SendMessageRequestHeaderV2.from_ext_fields(_EXT)
    header_rate = rounds / (time.perf_counter() - started)
    return {
        "codec_encode_per_s": round(encode_rate),
        "codec_decode_per_s": round(decode_rate),
        "send_header_parse_per_s": round(header_rate),
    }


@click.command("remoting")
@click.option(
    "--concurrency", "-n", type=IN_FLIGHT, default=64, show_default=True, help="Requests in flight."
)
@click.option(
    "--requests", "total", type=COUNT, default=200_000, show_default=True, help="Requests to time."
)
@click.option(
    "--warmup",
    type=OPTIONAL_COUNT,
    default=20_000,
    show_default=True,
    help="Untimed requests first (0: none).",
)
@click.option(
    "--body-bytes",
    type=click.IntRange(0, MAX_BODY_BYTES),  # a request may have no body
    default=128,
    show_default=True,
    help="Payload size of a request.",
)
@click.option(
    "--serialize",
    type=click.Choice(["json", "rocketmq"]),
    default="json",
    show_default=True,
    help="Header serialisation of the requests.",
)
@click.option("--in-process", is_flag=True, help="Run the server on the client's event loop.")
@click.option(
    "--async-processor", is_flag=True, help="Use an async def processor (one task per request)."
)
@click.option("--no-uvloop", is_flag=True, help="Use the standard asyncio loop.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def remoting_bench(
    concurrency: int,
    total: int,
    warmup: int,
    body_bytes: int,
    serialize: str,
    in_process: bool,
    async_processor: bool,
    no_uvloop: bool,
    as_json: bool,
) -> None:
    """Echo round trips per second with N requests in flight on one connection."""
    use_uvloop = not no_uvloop and uvloop_available()
    body = bytes(range(256)) * (body_bytes // 256) + bytes(body_bytes % 256)
    stype = SerializeType.ROCKETMQ if serialize == "rocketmq" else SerializeType.JSON

    async def measure(port: int | None, child: Connection | None) -> dict[str, Any]:
        server = None
        if port is None:
            server = await _start_server(async_processor)
            port = server.port
        addr = f"127.0.0.1:{port}"
        try:
            if warmup:
                await _drive(addr, concurrency, warmup, body, stype)
            cpu_before = _ask(child, "cpu")
            result = await _drive(addr, concurrency, total, body, stype)
            cpu_after = _ask(child, "cpu")
            if cpu_before is not None and cpu_after is not None:
                used = cpu_after - cpu_before
                result["server_cpu_us_per_request"] = round(used / total * 1e6, 2)
                result["server_cpu_percent"] = round(used / result["seconds"] * 100, 1)
            return result
        finally:
            if server is not None:
                await server.stop()

    if in_process:
        result = run(measure(None, None), use_uvloop=use_uvloop)
    else:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_serve_child, args=(child, use_uvloop, async_processor), daemon=True
        )
        proc.start()
        try:
            port = parent.recv()
            result = run(measure(port, parent), use_uvloop=use_uvloop)
        finally:
            parent.send("stop")
            parent.recv()
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
    report = {
        "benchmark": "remoting",
        "concurrency": concurrency,
        "body_bytes": body_bytes,
        "serialize": serialize,
        "server": "in-process" if in_process else "child process",
        "processor": "async" if async_processor else "sync",
        "loop": "uvloop" if use_uvloop else "asyncio",
        **result,
        **_codec_rates(body, stype),
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(
        f"remoting echo: {report['requests_per_s']:,} req/s "
        f"({total:,} requests, {concurrency} in flight, {body_bytes} B bodies, {serialize}, "
        f"{report['loop']}, {report['processor']} processor, server {report['server']})"
    )
    click.echo(
        f"latency: p50 {report['latency_p50_ms']} ms, p99 {report['latency_p99_ms']} ms, "
        f"mean {report['latency_mean_ms']} ms; errors {report['errors']}"
    )
    if "server_cpu_us_per_request" in report:
        click.echo(
            f"server: {report['server_cpu_us_per_request']} us CPU per request, "
            f"{report['server_cpu_percent']} % of one core"
        )
    click.echo(
        f"codec: encode {report['codec_encode_per_s']:,}/s, decode {report['codec_decode_per_s']:,}/s, "
        f"send header parse {report['send_header_parse_per_s']:,}/s"
    )
