"""``ariane bench pop``: POP receive + ack next to push pulls, and timer accuracy, over the
remoting protocol against one broker (issue 16).

Starts ``ariane broker`` in a child process (temporary store, no NameServer;
``--timer-precision-ms`` and ``-o key=value`` go into its configuration) unless ``--broker``
names a running one. Same run, same broker, one connection each:

1. **preload**: ``--messages`` of ``--size`` bytes, pipelined sends over 4 queues;
2. **pull**: all of them read back with PULL_MESSAGE, 32 at a time, one pull in flight per
   queue (what a push consumer's pull service does);
3. **pop + ack**: the same messages under a new group: ``--concurrency`` POP_MESSAGE requests
   in flight (queue -1, 32 at a time), every message acked with ACK_MESSAGE as it arrives
   (what simple consumers do); msgs/s = messages acked per second;
4. **pop + batch ack** (``--batch-ack``): the same with one BATCH_ACK_MESSAGE per answer;
5. **timers** (``--timers N``): N timer messages sent at ``--timer-rate`` per second, each
   due ``--timer-delay-ms`` after its send; then the delivered copies are read back. Lateness
   = store time of the delivered copy - requested time (``TIMER_DELIVER_MS``): at most one
   precision step (the slot rounding) when the wheel keeps up; ``beyond slot`` subtracts that
   rounding (store time - the slot boundary the timer was due at): the wheel's own delay;
6. **burst** (``--burst N``): N timers all due at the same second (sent first), then the same
   lateness figures and how long delivering them all took. The due second is
   ``--burst-lead-ms`` after the sends are expected to end, expected from half the timer
   phase's send rate (else the preload's): usually later, so the sends are over before the wheel
   reads the slot ahead; ``sent_before_due_ms`` says how long before the due time they ended.

``--json`` ends with one JSON object. Compare ratios within one run: the machine is shared.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import click
import numpy as np

from ariane.bench._child import broker_child
from ariane.bench.broker import _pipelined, _pull_all, _send_header
from ariane.client._pop_api import decode_pop_response
from ariane.common.cli_bounds import (
    BODY_BYTES,
    COUNT,
    IN_FLIGHT,
    OPTIONAL_COUNT,
    RATE,
    TIMER_DELAY_MS,
)
from ariane.common.pop import ReceiptHandle
from ariane.common.properties import POP_CK, TIMER_DELIVER_MS
from ariane.common.record import decode_records
from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import run
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.headers import pop as hp
from ariane.remoting.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody

__all__ = ["pop_bench"]

_QUEUES = 4
_TIMEOUT_MS = 30_000


def _sends(topic: str, body: bytes, n: int, props: str = "") -> Iterator[RemotingCommand]:
    for i in range(n):
        header = _send_header(topic, i % _QUEUES)
        if props:
            header["i"] = props  # SendMessageRequestHeaderV2's properties
        yield RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)


def _pop_request(topic: str, group: str) -> RemotingCommand:
    header = hp.PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=32,
        invisible_time=60_000, poll_time=0, born_time=int(time.time() * 1000), init_mode=0,
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())


async def _pop_and_ack(
    channel: Channel, topic: str, group: str, total: int, concurrency: int, batch: bool
) -> tuple[float, int]:
    """POP until ``total`` messages were acked; (seconds, acked)."""
    acked = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120

    async def loop() -> None:
        nonlocal acked
        while acked < total and time.monotonic() < deadline:
            r = await channel.invoke(_pop_request(topic, group), _TIMEOUT_MS)
            if r.code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.001)
                continue
            result = decode_pop_response(r, "bench")
            handles = [ReceiptHandle.decode(m.properties[POP_CK]) for m in result.messages]
            if batch:
                await _batch_ack(channel, topic, group, handles)
            else:
                acks = [
                    RemotingCommand.request(
                        RequestCode.ACK_MESSAGE,
                        hp.AckMessageRequestHeader(
                            consumer_group=group,
                            topic=hd.real_topic(topic, group),
                            queue_id=hd.queue_id,
                            extra_info=hd.encode(),
                            offset=hd.queue_offset,
                        ).to_ext_fields(),
                    )
                    for hd in handles
                ]
                await asyncio.gather(*(channel.invoke_future(a, _TIMEOUT_MS) for a in acks))
            acked += len(handles)

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return time.perf_counter() - started, acked


async def _batch_ack(
    channel: Channel, topic: str, group: str, handles: list[ReceiptHandle]
) -> None:
    by_ck: dict[tuple[str, int, int, int], list[ReceiptHandle]] = {}
    for hd in handles:
        by_ck.setdefault((hd.retry_flag, hd.queue_id, hd.ck_start_offset, hd.pop_time), []).append(
            hd
        )
    acks = [
        BatchAck(
            group,
            topic,
            hs[0].retry_flag,
            hs[0].ck_start_offset,
            hs[0].queue_id,
            hs[0].revive_qid,
            hs[0].pop_time,
            hs[0].invisible_time,
            tuple(h.queue_offset - h.ck_start_offset for h in hs),
        )
        for hs in by_ck.values()
    ]
    body = BatchAckMessageRequestBody("bench", acks).encode()
    await channel.invoke(
        RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body), _TIMEOUT_MS
    )


async def _send_timers(
    channel: Channel, topic: str, due_of: Any, n: int, rate: float, concurrency: int
) -> float:
    """Send ``n`` timers at ``rate``/s (due time ``due_of(send ms)``); the sending seconds."""
    started = time.perf_counter()
    body = b"t" * 64
    inflight: set[asyncio.Future[RemotingCommand]] = set()
    for i in range(n):
        if rate > 0:
            ahead = i / rate - (time.perf_counter() - started)
            if ahead > 0.002:
                await asyncio.sleep(ahead)
        now = int(time.time() * 1000)
        header = _send_header(topic, i % _QUEUES)
        header["i"] = f"{TIMER_DELIVER_MS}\x01{due_of(now)}\x02"
        if len(inflight) >= concurrency:
            _done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)
        inflight.add(channel.invoke_future(request, _TIMEOUT_MS))
    if inflight:
        await asyncio.wait(inflight)
    return time.perf_counter() - started


async def _collect(channel: Channel, topic: str, n: int, timeout_s: float) -> list[tuple[int, int]]:
    """Read ``topic`` until ``n`` messages arrived; (requested time, store time) of each."""
    offsets = [0] * _QUEUES
    out: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        progressed = False
        for q in range(_QUEUES):
            header = {
                "consumerGroup": "bench_timer", "topic": topic, "queueId": str(q),
                "queueOffset": str(offsets[q]), "maxMsgNums": "32", "sysFlag": "4",
                "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
                "subscription": "*",
            }  # fmt: skip
            r = await channel.invoke(
                RemotingCommand.request(RequestCode.PULL_MESSAGE, header), _TIMEOUT_MS
            )
            if r.code == ResponseCode.SUCCESS and r.body:
                for m in decode_records(r.body):  # the warm-up messages have no due time
                    due = int(m.properties.get(TIMER_DELIVER_MS, "0"))
                    out.append((due, m.store_timestamp_ms))
                offsets[q] = int(r.ext_fields["nextBeginOffset"])
                progressed = True
        if not progressed:
            await asyncio.sleep(0.05)
    return out


def _lateness(pairs: list[tuple[int, int]], precision_ms: int) -> dict[str, Any]:
    if not pairs:
        return {"delivered": 0}
    late = np.array([stored - due for due, stored in pairs], dtype=np.float64)
    # the slot boundary a timer is due at: the first multiple of P at or after its time
    boundary = np.array([-(-due // precision_ms) * precision_ms for due, _ in pairs])
    beyond = np.array([stored for _, stored in pairs]) - boundary
    return {
        "delivered": len(pairs),
        "early": int((late < 0).sum()),
        "p50_late_ms": round(float(np.percentile(late, 50)), 1),
        "p99_late_ms": round(float(np.percentile(late, 99)), 1),
        "max_late_ms": round(float(late.max()), 1),
        "p50_beyond_slot_ms": round(float(np.percentile(beyond, 50)), 1),
        "p99_beyond_slot_ms": round(float(np.percentile(beyond, 99)), 1),
        "max_beyond_slot_ms": round(float(beyond.max()), 1),
    }


async def _bench(addr: str, opts: dict[str, Any]) -> dict[str, Any]:
    client = RemotingClient()
    channel = await client.get_channel(addr)
    stamp = int(time.time())
    topic = f"BenchPop{stamp}"
    n, size, conc = opts["messages"], opts["size"], opts["concurrency"]
    results: dict[str, Any] = {"messages": n, "size": size, "concurrency": conc}
    try:
        await _pipelined(channel, _sends(topic, b"w", _QUEUES), 1)  # creates the topic
        seconds, _failed = await _pipelined(channel, _sends(topic, b"b" * size, n), 256)
        results["send_msgs_per_s"] = round(n / seconds)
        await asyncio.sleep(0.5)
        per_queue = [1 + n // _QUEUES + (1 if q < n % _QUEUES else 0) for q in range(_QUEUES)]
        seconds, got = await _pull_all(channel, topic, per_queue)
        results["pull_msgs_per_s"] = round(got / seconds)
        total = n + _QUEUES
        seconds, acked = await _pop_and_ack(
            channel, topic, f"bench_pop_{stamp}", total, conc, False
        )
        results["pop_ack_msgs_per_s"] = round(acked / seconds)
        if opts["batch_ack"]:
            seconds, acked = await _pop_and_ack(
                channel, topic, f"bench_popb_{stamp}", total, conc, True
            )
            results["pop_batch_ack_msgs_per_s"] = round(acked / seconds)
        results["pop_vs_pull"] = round(
            results["pop_ack_msgs_per_s"] / results["pull_msgs_per_s"], 3
        )
        precision = opts["precision"]
        if opts["timers"]:
            timer_topic = f"BenchTimer{stamp}"
            await _pipelined(channel, _sends(timer_topic, b"w", _QUEUES), 1)
            delay = opts["timer_delay_ms"]
            seconds = await _send_timers(
                channel,
                timer_topic,
                lambda now: now + delay,
                opts["timers"],
                opts["timer_rate"],
                256,
            )
            results["timer_send_rate"] = round(opts["timers"] / seconds)
            pairs = await _collect(channel, timer_topic, opts["timers"] + _QUEUES, 120)
            pairs = [p for p in pairs if p[0] > 0]
            results["timers"] = _lateness(pairs, precision)
        if opts["burst"]:
            burst_topic = f"BenchBurst{stamp}"
            await _pipelined(channel, _sends(burst_topic, b"w", _QUEUES), 1)
            # due a lead after the last send is expected (at half the measured rate)
            rate = results.get("timer_send_rate") or results.get("send_msgs_per_s") or 10_000
            est = opts["burst"] / max(1000.0, rate * 0.5)
            lead = opts["burst_lead_ms"] / 1000
            due = int((time.time() + est + lead) * 1000) // 1000 * 1000 + 500
            seconds = await _send_timers(
                channel, burst_topic, lambda now: due, opts["burst"], 0, 256
            )
            sent_by = int(time.time() * 1000)
            pairs = await _collect(channel, burst_topic, opts["burst"] + _QUEUES, 180)
            pairs = [p for p in pairs if p[0] > 0]
            stats = _lateness(pairs, precision)
            stats["sent_before_due_ms"] = due - sent_by
            stats["send_s"] = round(seconds, 1)
            if pairs:
                stats["all_delivered_after_due_ms"] = max(s for _, s in pairs) - due
            results["burst"] = stats
    finally:
        await client.close()
    return results


@click.command("pop")
@click.option("--broker", "addr", default=None, help="HOST:PORT of a running broker.")
@click.option("-n", "--messages", type=COUNT, default=20_000, show_default=True)
@click.option("-s", "--size", type=BODY_BYTES, default=256, show_default=True, help="Body bytes.")
@click.option(
    "-c", "--concurrency", type=IN_FLIGHT, default=8, show_default=True, help="POPs in flight."
)
@click.option("--batch-ack", is_flag=True, help="Also measure BATCH_ACK_MESSAGE.")
@click.option(
    "--timers", type=OPTIONAL_COUNT, default=0, show_default=True,
    help="Timer messages to measure (0: skip).",
)  # fmt: skip
@click.option(
    "--timer-rate", type=RATE, default=10_000.0, show_default=True,
    help="Timers sent per second (0: as fast as possible).",
)  # fmt: skip
@click.option(
    "--timer-delay-ms", type=TIMER_DELAY_MS, default=3000, show_default=True,
    help="Each timer's delay.",
)  # fmt: skip
@click.option(
    "--burst", type=OPTIONAL_COUNT, default=0, show_default=True,
    help="Timers all due in one second (0: skip).",
)  # fmt: skip
@click.option(
    "--burst-lead-ms", type=click.IntRange(0, 3_600_000), default=2000, show_default=True,
    help="The burst is due this long after its sends are expected to end.",
)  # fmt: skip
@click.option(
    "--timer-precision-ms", "precision", type=click.IntRange(1, 60_000), default=1000,
    show_default=True,
    help="timerPrecisionMs of the broker started here (say what yours is with --broker).",
)  # fmt: skip
@click.option("-o", "overrides", multiple=True, help="key=value for the broker started here.")
@click.option("--json", "as_json", is_flag=True, help="End with one JSON object.")
def pop_bench(
    addr: str | None,
    messages: int,
    size: int,
    concurrency: int,
    batch_ack: bool,
    timers: int,
    timer_rate: float,
    timer_delay_ms: int,
    burst: int,
    burst_lead_ms: int,
    precision: int,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """POP receive+ack next to pulls, and timer lateness, against one broker."""
    opts = {
        "messages": messages, "size": size, "concurrency": concurrency, "batch_ack": batch_ack,
        "timers": timers, "timer_rate": timer_rate, "timer_delay_ms": timer_delay_ms,
        "burst": burst, "burst_lead_ms": burst_lead_ms, "precision": precision,
    }  # fmt: skip
    conf = (f"timerPrecisionMs={precision}", *overrides)
    with broker_child(addr, "ariane-bench-pop-", conf) as target:
        results = run(_bench(target, opts))
    if as_json:
        click.echo(json.dumps(results))
        return
    for key, value in results.items():
        click.echo(f"{key:>26}: {value}")
