"""``ariane bench broker``: sends, batch sends, pulls and long-poll wake-ups against a broker.

Starts ``ariane broker`` in a child process on a free port with a temporary store (no
NameServer) unless ``--broker HOST:PORT`` names a running one. The client keeps
``--concurrency`` requests in flight on one connection:

1. **send**: SEND_MESSAGE_V2 of ``--size`` bytes with TAGS and a UNIQ_KEY, round-robin over 4
   queues;
2. **batch**: SEND_BATCH_MESSAGE of ``--batch`` messages each;
3. **pull**: everything sent, read back 32 at a time, one pull in flight per queue;
4. **long poll**: a pull held for the next offset, then one send; the time from issuing the
   send to receiving the pull's answer (``--rounds`` times).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import click

from ariane.bench._child import broker_child
from ariane.common.batch import encode_batch
from ariane.common.cli_bounds import BATCH, BODY_BYTES, COUNT, IN_FLIGHT
from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import run
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["broker_bench"]

_QUEUES = 4
_TIMEOUT_MS = 30_000


def _send_header(topic: str, queue_id: int, batch: bool = False) -> dict[str, str]:
    return h.SendMessageRequestHeaderV2(
        producer_group="bench_producer_group", topic=topic, default_topic="TBW102",
        default_topic_queue_nums=_QUEUES, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties="" if batch else "TAGS\x01bench\x02", batch=batch,
    ).to_ext_fields()  # fmt: skip


def _pull(topic: str, queue_id: int, offset: int, suspend_ms: int = 0) -> RemotingCommand:
    header = h.PullMessageRequestHeader(
        consumer_group="bench_consumer_group", topic=topic, queue_id=queue_id,
        queue_offset=offset, max_msg_nums=32, sys_flag=0x4 | (0x2 if suspend_ms else 0),
        commit_offset=0, suspend_timeout_millis=suspend_ms, sub_version=0, subscription="*",
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


async def _pipelined(channel: Channel, requests: Any, concurrency: int) -> tuple[float, int]:
    """Send every request with at most ``concurrency`` in flight; (seconds, failures)."""
    failures = 0
    inflight: set[asyncio.Future[RemotingCommand]] = set()
    started = time.perf_counter()
    for request in requests:
        if len(inflight) >= concurrency:
            done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            failures += sum(1 for f in done if f.result().code != ResponseCode.SUCCESS)
        inflight.add(channel.invoke_future(request, _TIMEOUT_MS))
    if inflight:
        done, _ = await asyncio.wait(inflight)
        failures += sum(1 for f in done if f.result().code != ResponseCode.SUCCESS)
    return time.perf_counter() - started, failures


async def _pull_all(channel: Channel, topic: str, per_queue: list[int]) -> tuple[float, int]:
    async def drain(queue_id: int) -> int:
        offset, got = 0, 0
        while offset < per_queue[queue_id]:
            r = await channel.invoke(_pull(topic, queue_id, offset), _TIMEOUT_MS)
            if r.code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.001)
                continue
            offset = int(r.ext_fields["nextBeginOffset"])
            got += _count_records(r.body or b"")
        return got

    started = time.perf_counter()
    counts = await asyncio.gather(*(drain(q) for q in range(_QUEUES)))
    return time.perf_counter() - started, sum(counts)


def _count_records(body: bytes) -> int:
    pos, n = 0, 0
    while pos + 4 <= len(body):
        pos += int.from_bytes(body[pos : pos + 4], "big")
        n += 1
    return n


async def _long_poll(channel: Channel, topic: str, rounds: int) -> list[float]:
    latencies = []
    body = b"x" * 16
    create = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, _send_header(topic, 0), body)
    await channel.invoke(create, _TIMEOUT_MS)
    await asyncio.sleep(0.1)  # visible to pulls
    for i in range(1, rounds + 1):
        held = channel.invoke_future(_pull(topic, 0, i, suspend_ms=15_000), _TIMEOUT_MS)
        await asyncio.sleep(0.02)  # let the broker hold it
        sent = time.perf_counter()
        send = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, _send_header(topic, 0), body)
        await channel.invoke(send, _TIMEOUT_MS)
        answer = await held
        if answer.code != ResponseCode.SUCCESS:
            raise click.ClickException(f"long-poll round {i}: code {answer.code} {answer.remark}")
        latencies.append((time.perf_counter() - sent) * 1000)
    return latencies


async def _bench(
    addr: str, messages: int, size: int, batch: int, concurrency: int, rounds: int
) -> dict[str, Any]:
    client = RemotingClient()
    channel = await client.get_channel(addr)
    body = b"b" * size
    topic = f"BenchBroker{int(time.time())}"
    results: dict[str, Any] = {"messages": messages, "size": size, "concurrency": concurrency}
    try:
        warm = [
            RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, _send_header(topic, q), body)
            for q in range(_QUEUES)
        ]
        await _pipelined(channel, warm, 1)  # creates the topic
        per_queue = [1] * _QUEUES
        sends = (
            RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, _send_header(topic, i % _QUEUES), body
            )
            for i in range(messages)
        )
        seconds, failed = await _pipelined(channel, sends, concurrency)
        for i in range(messages):
            per_queue[i % _QUEUES] += 1
        results["send_msgs_per_s"] = round(messages / seconds)
        results["send_failures"] = failed
        batches = max(1, messages // batch)
        payload = encode_batch((body, 0, {"UNIQ_KEY": f"B{i:030d}"}) for i in range(batch))
        reqs = (
            RemotingCommand.request(
                RequestCode.SEND_BATCH_MESSAGE, _send_header(topic, i % _QUEUES, True), payload
            )
            for i in range(batches)
        )
        seconds, failed = await _pipelined(channel, reqs, max(1, concurrency // 8))
        for i in range(batches):
            per_queue[i % _QUEUES] += batch
        results["batch_msgs_per_s"] = round(batches * batch / seconds)
        results["batch_failures"] = failed
        await asyncio.sleep(0.5)  # dispatch catches up
        seconds, got = await _pull_all(channel, topic, per_queue)
        results["pull_msgs_per_s"] = round(got / seconds)
        results["pulled"] = got
        latencies = await _long_poll(channel, topic + "LP", rounds)
        results["long_poll_wake_ms_median"] = round(statistics.median(latencies), 2)
        results["long_poll_wake_ms_max"] = round(max(latencies), 2)
    finally:
        await client.close()
    return results


@click.command("broker")
@click.option(
    "--broker", "addr", default=None, help="HOST:PORT of a running broker (default: start one)."
)
@click.option(
    "--messages", type=COUNT, default=100_000, show_default=True, help="Messages per phase."
)
@click.option("--size", type=BODY_BYTES, default=128, show_default=True, help="Body bytes.")
@click.option(
    "--batch", type=BATCH, default=64, show_default=True, help="Messages per batch request."
)
@click.option(
    "--concurrency", type=IN_FLIGHT, default=256, show_default=True, help="Requests in flight."
)
@click.option("--rounds", type=COUNT, default=50, show_default=True, help="Long-poll rounds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def broker_bench(
    addr: str | None,
    messages: int,
    size: int,
    batch: int,
    concurrency: int,
    rounds: int,
    as_json: bool,
) -> None:
    """Send, batch-send, pull and long-poll throughput/latency against a broker."""
    with broker_child(addr, "ariane-bench-broker-") as target:
        results = run(_bench(target, messages, size, batch, concurrency, rounds))
    if as_json:
        click.echo(json.dumps(results))
        return
    for key, value in results.items():
        click.echo(f"{key:>28}: {value}")
