"""``ariane bench grpc``: the 5.x gRPC protocol next to the 4.x remoting protocol, same broker,
same run (issue 16).

Starts ``ariane broker`` with ``grpcServerPort=0`` in a child process (temporary store)
unless ``--broker``/``--grpc`` name a running one, then measures, ``--concurrency`` requests in
flight on one connection each:

1. **produce, remoting**: SEND_MESSAGE_V2 of ``--size`` bytes, round robin over 4 queues;
2. **produce, gRPC**: SendMessage of one message each (what the 5.x SDKs send);
3. **consume, remoting**: everything of (1) read back with PULL_MESSAGE, 32 at a time;
4. **consume, gRPC PullMessage**: everything of (2) through the 5.1 offset RPC, 32 at a time;
5. **receive + ack, gRPC**: ReceiveMessage (POP) of (2) under a fresh group, each message
   acked, ``--concurrency`` receives in flight (skipped when the broker has no POP);
6. **timer accuracy** (``--timers N``): N timer messages at ``--timer-rate`` per second (sent
   over remoting: one Python gRPC client cannot send 10k/s), each due ``--timer-delay-ms``
   later; p50/p99/max lateness of the delivered copies (store time - requested time).

Each phase prints msgs/s and the p50/p99 latency of its requests; ``--json`` ends with one
JSON object. Compare ratios of one run: the machine is shared.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import click
import grpc
import numpy as np

from ariane.bench._child import broker_child_ready
from ariane.bench.broker import _pipelined, _pull, _pull_all, _send_header
from ariane.common.cli_bounds import BODY_BYTES, COUNT, IN_FLIGHT, OPTIONAL_COUNT, TIMER_DELAY_MS
from ariane.common.properties import TIMER_DELIVER_MS
from ariane.common.record import decode_records
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.proxy.v2 import service_pb2_grpc as sg
from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import run
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["grpc_bench"]

_QUEUES = 4
_MD = (("x-mq-client-id", f"bench@{uuid.uuid4().hex[:8]}"),)


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else 0.0


def _pcts(rts_ms: list[float]) -> dict[str, float]:
    if not rts_ms:
        return {"p50_ms": 0.0, "p99_ms": 0.0}
    a = np.asarray(rts_ms)
    return {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99))}


async def _bounded(
    n: int, concurrency: int, one: Callable[[int], Awaitable[bool]]
) -> tuple[float, int, list[float]]:
    """Run ``one(i)`` for i < n with ``concurrency`` in flight; (seconds, failures, RTs)."""
    rts: list[float] = []
    failures = 0
    nxt = 0

    async def worker() -> None:
        nonlocal nxt, failures
        while nxt < n:
            i = nxt
            nxt += 1
            t0 = time.perf_counter()
            if await one(i):
                rts.append((time.perf_counter() - t0) * 1000)
            else:
                failures += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, failures, rts


class _Grpc:
    def __init__(self, target: str) -> None:
        self.channel = grpc.aio.insecure_channel(
            target, options=[("grpc.max_receive_message_length", -1)]
        )
        self.stub = sg.MessagingServiceStub(self.channel)

    async def send(self, topic: str, body: bytes, **sysp: Any) -> bool:
        msg = pb.Message(topic=pb.Resource(name=topic), body=body)
        msg.system_properties.message_id = uuid.uuid4().hex
        msg.system_properties.tag = "bench"
        for key, value in sysp.items():
            getattr(msg.system_properties, key).CopyFrom(value)
        r = await self.stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=_MD)
        return r.status.code == pb.OK

    async def pull_all(self, topic: str, per_queue: list[int]) -> tuple[float, int]:
        async def drain(queue_id: int) -> int:
            offset, got = 0, 0
            while offset < per_queue[queue_id]:
                request = spb.PullMessageRequest(
                    group=pb.Resource(name="bench_grpc_pull"),
                    message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id),
                    offset=offset, batch_size=32,
                )  # fmt: skip
                async for frame in self.stub.PullMessage(request, metadata=_MD):
                    kind = frame.WhichOneof("content")
                    if kind == "message":
                        got += 1
                    elif kind == "next_offset":
                        offset = frame.next_offset
            return got

        started = time.perf_counter()
        counts = await asyncio.gather(*(drain(q) for q in range(len(per_queue))))
        return time.perf_counter() - started, sum(counts)

    async def end_offsets(self, topic: str, expected: int, timeout_s: float = 30.0) -> list[int]:
        """Each queue's end offset once the queues hold ``expected`` messages in all: the
        broker makes a message pullable when its reput thread has dispatched it, a moment
        after the send's answer (the phase would otherwise time a read of part of them)."""
        route = await self.stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=_MD
        )
        deadline = time.monotonic() + timeout_s
        while True:
            ends = []
            for q in range(len(route.message_queues)):
                r = await self.stub.QueryOffset(
                    spb.QueryOffsetRequest(
                        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=q),
                        query_offset_policy=pb.END,
                    ),
                    metadata=_MD,
                )
                ends.append(r.offset)
            if sum(ends) >= expected or time.monotonic() > deadline:
                return ends
            await asyncio.sleep(0.01)

    async def consumer_settings(
        self, group: str, topic: str
    ) -> grpc.aio.StreamStreamCall[Any, Any]:
        call = self.stub.Telemetry(metadata=_MD)  # type: ignore[call-arg]
        sub = pb.Subscription(
            group=pb.Resource(name=group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name=topic),
                    expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                )
            ],
        )
        await call.write(
            spb.TelemetryCommand(
                settings=pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=sub)
            )
        )
        await call.read()
        return call

    async def receive_ack(self, group: str, topic: str, wait_s: float) -> tuple[int, int, bool]:
        """One receive (32) and the acks of what came; (received, acked, pop supported)."""
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=32,
        )
        request.invisible_duration.seconds = 30
        request.long_polling_timeout.FromMilliseconds(int(wait_s * 1000))
        entries = []
        supported = True
        async for frame in self.stub.ReceiveMessage(request, metadata=_MD, timeout=wait_s + 10):
            kind = frame.WhichOneof("content")
            if kind == "status" and frame.status.code == pb.NOT_IMPLEMENTED:
                supported = False
            if kind == "message":
                sp = frame.message.system_properties
                entries.append(
                    spb.AckMessageEntry(message_id=sp.message_id, receipt_handle=sp.receipt_handle)
                )
        if not entries:
            return 0, 0, supported
        ack = await self.stub.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries
            ),
            metadata=_MD,
        )
        acked = sum(1 for e in ack.entries if e.status.code == pb.OK)
        return len(entries), acked, supported


def _line(
    name: str, n: int, seconds: float, failures: int, extra: dict[str, float]
) -> dict[str, Any]:
    row = {
        "phase": name,
        "msgs": n,
        "seconds": round(seconds, 3),
        "msgs_per_s": round(_rate(n, seconds), 1),
        "failed": failures,
    }
    row.update({k: round(v, 3) for k, v in extra.items()})
    click.echo(
        f"{name:<28} {row['msgs_per_s']:>10.1f} msg/s  {n} msgs in {seconds:.2f} s"
        + "".join(f"  {k}={v:.2f}" for k, v in extra.items())
        + (f"  failed={failures}" if failures else "")
    )
    return row


@dataclass(frozen=True)
class _Plan:
    messages: int
    size: int
    concurrency: int
    timers: int
    timer_rate: int
    timer_delay_ms: int


async def _bench(broker: str, target: str, plan: _Plan) -> list[dict[str, Any]]:
    messages, size, concurrency = plan.messages, plan.size, plan.concurrency
    timers, timer_rate, timer_delay_ms = plan.timers, plan.timer_rate, plan.timer_delay_ms
    rows: list[dict[str, Any]] = []
    body = b"x" * size
    client = RemotingClient()
    g = _Grpc(target)
    try:
        channel = await client.get_channel(broker)
        requests = (
            RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, _send_header("BenchRemoting", i % _QUEUES), body
            )
            for i in range(messages)
        )
        seconds, failed = await _pipelined(channel, requests, concurrency)
        rows.append(_line("produce remoting", messages, seconds, failed, {}))
        seconds, failed, rts = await _bounded(
            messages, concurrency, lambda i: g.send("BenchGrpc", body)
        )
        rows.append(_line("produce gRPC", messages, seconds, failed, _pcts(rts)))
        per_queue = [
            messages // _QUEUES + (1 if q < messages % _QUEUES else 0) for q in range(_QUEUES)
        ]
        seconds, got = await _pull_all(channel, "BenchRemoting", per_queue)
        rows.append(_line("consume remoting PULL", got, seconds, 0, {}))
        grpc_queues = await g.end_offsets("BenchGrpc", messages)
        seconds, got = await g.pull_all("BenchGrpc", grpc_queues)
        rows.append(_line("consume gRPC PullMessage", got, seconds, 0, {}))
        rows += await _receive_phase(g, messages, concurrency)
        if timers:
            rows.append(
                await _timer_phase(channel, timers, timer_rate, timer_delay_ms, concurrency)
            )
    finally:
        await g.channel.close(None)
        await client.close()
    return rows


async def _receive_phase(g: _Grpc, messages: int, concurrency: int) -> list[dict[str, Any]]:
    group = f"bench_pop_{uuid.uuid4().hex[:6]}"
    call = await g.consumer_settings(group, "BenchGrpc")
    received = acked = 0
    started = time.perf_counter()
    last = started  # when the last message was acked (idle long polls at the end excluded)
    try:
        received, acked, supported = await g.receive_ack(group, "BenchGrpc", 5.0)
        if not supported:
            click.echo("receive+ack gRPC             skipped: the broker has no POP consumption")
            return []

        async def loop() -> None:
            nonlocal received, acked, last
            empty = 0
            while received < messages and empty < 3:
                n, a, _ = await g.receive_ack(group, "BenchGrpc", 5.0)
                received += n
                acked += a
                empty = empty + 1 if n == 0 else 0
                if n:
                    last = time.perf_counter()

        await asyncio.gather(*(loop() for _ in range(max(1, concurrency // 8))))
    finally:
        call.cancel()
    return [_line("receive+ack gRPC (POP)", received, last - started, received - acked, {})]


async def _timer_phase(
    channel: Channel, timers: int, rate: int, delay_ms: int, concurrency: int
) -> dict[str, Any]:
    """Timer messages sent at ``rate`` per second (remoting SEND_MESSAGE_V2 with
    ``TIMER_DELIVER_MS``: a Python gRPC client cannot send 10k/s), each due ``delay_ms``
    later; lateness = store time of the delivered copy - the requested time, read back with
    PULL_MESSAGE. The wheel delivers at the first ``timerPrecisionMs`` boundary at or after
    the due time, so lateness up to the precision is by design."""
    topic = "BenchTimer"
    start = time.time()
    inflight: set[asyncio.Future[RemotingCommand]] = set()
    failed = 0
    for i in range(timers):
        pause = start + i / rate - time.time()
        if pause > 0:
            await asyncio.sleep(pause)
        if len(inflight) >= concurrency:
            done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            failed += sum(1 for f in done if f.result().code != ResponseCode.SUCCESS)
        due = int((start + i / rate) * 1000) + delay_ms
        header = _send_header(topic, i % _QUEUES)
        header["i"] = f"TIMER_DELIVER_MS\x01{due}\x02UNIQ_KEY\x01T{i}\x02"
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"t")
        inflight.add(channel.invoke_future(request, 30_000))
    if inflight:
        done, _ = await asyncio.wait(inflight)
        failed += sum(1 for f in done if f.result().code != ResponseCode.SUCCESS)
    sent_s = time.time() - start
    lateness: list[float] = []
    offsets = [0] * _QUEUES
    deadline = time.time() + delay_ms / 1000 + 30
    while len(lateness) < timers - failed and time.time() < deadline:
        for q in range(_QUEUES):
            response = await channel.invoke(_pull(topic, q, offsets[q]), 30_000)
            if response.code != ResponseCode.SUCCESS:
                continue
            for msg in decode_records(response.body or b""):
                lateness.append(
                    float(msg.store_timestamp_ms - int(msg.properties[TIMER_DELIVER_MS]))
                )
                offsets[q] = msg.queue_offset + 1
        await asyncio.sleep(0.02)
    a = np.asarray(lateness or [0.0])
    extra = {
        "sent_per_s": _rate(timers, sent_s),
        "p50_late_ms": float(np.percentile(a, 50)),
        "p99_late_ms": float(np.percentile(a, 99)),
        "max_late_ms": float(a.max()),
    }
    lost = timers - failed - len(lateness)
    return _line(f"timer accuracy ({rate}/s)", len(lateness), sent_s, failed + lost, extra)


@click.command("grpc")
@click.option("--broker", default=None, help="A running broker's remoting HOST:PORT (with --grpc).")
@click.option("--grpc", "grpc_addr", default=None, help="Its gRPC HOST:PORT (grpcServerPort).")
@click.option("-n", "--messages", type=COUNT, default=20_000, show_default=True)
@click.option(
    "-s", "--size", type=BODY_BYTES, default=256, show_default=True, help="Body bytes per message."
)
@click.option(
    "-c", "--concurrency", type=IN_FLIGHT, default=64, show_default=True, help="Requests in flight."
)
@click.option(
    "--timers",
    type=OPTIONAL_COUNT,
    default=0,
    show_default=True,
    help="Timer messages for the accuracy phase (0: skip).",
)
@click.option(
    "--timer-rate",
    type=click.IntRange(1, 10_000_000),
    default=10_000,
    show_default=True,
    help="Timer messages sent per second.",
)
@click.option(
    "--timer-delay-ms",
    type=TIMER_DELAY_MS,
    default=3_000,
    show_default=True,
    help="Delay of each timer message.",
)
@click.option("--json", "as_json", is_flag=True, help="End with one JSON line.")
def grpc_bench(
    broker: str | None,
    grpc_addr: str | None,
    messages: int,
    size: int,
    concurrency: int,
    timers: int,
    timer_rate: int,
    timer_delay_ms: int,
    as_json: bool,
) -> None:
    """Produce and consume through gRPC next to remoting on one broker."""
    if (broker is None) != (grpc_addr is None):
        raise click.UsageError("--broker and --grpc go together")
    overrides = [
        "grpcServerPort=0",
        "autoCreateTopicEnable=true",
        "enableTopicMessageTypeCheck=false",
    ]
    plan = _Plan(messages, size, concurrency, timers, timer_rate, timer_delay_ms)
    if broker is not None and grpc_addr is not None:
        rows = run(_bench(broker, grpc_addr, plan))
    else:
        with broker_child_ready("ariane-bench-grpc-", overrides) as ready:
            if "grpc" not in ready:
                raise click.ClickException("the broker did not start its gRPC server")
            rows = run(_bench(ready["broker"], ready["grpc"], plan))
    if as_json:
        click.echo(json.dumps({"size": size, "concurrency": concurrency, "phases": rows}))
