"""``ariane bench consumer``: consume throughput and end-to-end latency of
``ariane.client.PushConsumer`` (modelled on RocketMQ's ``benchmark/consumer.sh``,
``org.apache.rocketmq.example.benchmark.Consumer``).

Two workloads:

* backlog (default): ``--preload N`` first stores N messages of ``--size`` bytes (batched
  sends), then a new consumer group reads the topic from the first offset as fast as it can
  (without ``--preload``, whatever the topic already holds);
  ``msgs_per_s`` is messages over the time from the first to the last callback;
* fixed rate: ``--produce-rate R`` sends R messages per second from the same process while
  the consumer runs, for ``--duration`` seconds or ``--messages`` messages. Each body starts
  with its send time (nanoseconds), so RT is **born → callback** with sub-millisecond
  precision: what an application waits between ``send`` and its listener seeing the message.

``--threads`` uses a plain-function listener (run in ``--concurrency`` worker threads, as
``SyncPushConsumer`` does) instead of a coroutine.

For messages without that stamp (someone else's backlog) RT is store time → callback
(millisecond resolution). Fixed-rate runs also report ``p50/p99_store_to_callback_ms``, the
part after the broker stored the message (store time has millisecond resolution). Every ``--report-interval`` seconds one line shows TPS, MB/s,
average and max RT; ``--json`` ends with one JSON object (``msgs_per_s``, ``mb_per_s``,
``avg_rt_ms``, ``max_rt_ms``, ``p99_rt_ms``, ``failed``, ``rt``...). ``client_cpu_us_per_msg`` is
this process's CPU per consumed message; ``--broker-pid PID`` adds ``broker_cpu_us_per_msg``,
the user + system CPU of process PID (the broker) over the same span.

The peer harness's consume phase (issue 18) is ``--batch-max 32 --pull-batch 32`` on a
backlog of 100,000 x 1 KiB (``--preload 100000 --messages 100000``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import struct
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

import click
import numpy as np

from ariane.acl.credentials import SessionCredentials
from ariane.bench._child import proc_cpu_seconds
from ariane.bench._trace_modes import TRACE_OPTIONS, echo_results, run_trace_modes, trace_fields
from ariane.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from ariane.common.cli_bounds import COUNT, MAX_BODY_BYTES, OPTIONAL_COUNT, RATE, SECONDS
from ariane.remoting.eventloop import run

__all__ = ["consumer_bench"]

#: Body prefix of messages sent by the fixed-rate producer: magic + send time (ns).
_STAMP = struct.Struct(">4sq")
_MAGIC = b"ABT1"
_OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_WARM_UP = b"warm-up"


@dataclass
class _Stats:
    consumed: int = 0
    bytes: int = 0
    failed: int = 0
    rts: array[float] = field(default_factory=lambda: array("d"))
    #: store time -> callback of stamped messages (the broker's stamp has ms resolution)
    store_rts: array[float] = field(default_factory=lambda: array("d"))
    interval_max_ms: float = 0.0
    first_s: float = 0.0
    last_s: float = 0.0
    stamped: int = 0

    def record(self, msgs: list[MessageExt]) -> None:
        now_ns = time.time_ns()
        rts = self.rts
        worst = self.interval_max_ms
        count = 0
        for msg in msgs:
            body = msg.body
            if body == _WARM_UP:
                continue
            count += 1
            if body[:4] == _MAGIC:
                rt = (now_ns - _STAMP.unpack_from(body)[1]) / 1e6
                self.store_rts.append(now_ns / 1e6 - msg.store_timestamp_ms)
                self.stamped += 1
            else:
                rt = now_ns / 1e6 - msg.store_timestamp_ms
            rts.append(rt)
            if rt > worst:
                worst = rt
            self.bytes += len(body)
        self.interval_max_ms = worst
        self.consumed += count
        self.last_s = time.perf_counter()
        if not self.first_s:
            self.first_s = self.last_s


async def _preload(producer: Producer, topic: str, size: int, count: int) -> None:
    body = os.urandom(size)
    batch = max(1, min(64, (3 * 1024 * 1024) // max(size, 1)))
    pending: set[asyncio.Future[Any]] = set()
    sent = 0
    while sent < count:
        n = min(batch, count - sent)
        pending.add(producer.send_batch_async([Message(topic, body) for _ in range(n)]))
        sent += n
        if len(pending) >= 16:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for f in done:
                f.result()
    for f in pending:
        await f


async def _produce_at_rate(
    producer: Producer, topic: str, size: int, rate: float, stop: asyncio.Event, limit: int | None
) -> int:
    filler = os.urandom(max(size - _STAMP.size, 0))
    started = time.perf_counter()
    sent = 0
    while not stop.is_set() and (limit is None or sent < limit):
        due = int((time.perf_counter() - started) * rate) + 1
        if limit is not None:
            due = min(due, limit)
        while sent < due:
            body = _STAMP.pack(_MAGIC, time.time_ns()) + filler
            producer.send_async(Message(topic, body)).add_done_callback(_ignore)
            sent += 1
        # sleep until the next message is due (a timer fires no sooner than ~1 ms anyway;
        # shorter sleeps only spin and take CPU from the consumer and the broker)
        next_at = started + sent / rate
        await asyncio.sleep(max(next_at - time.perf_counter(), 0.001))
    return sent


def _ignore(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _report(stats: _Stats, interval_s: float, as_json: bool) -> None:
    last_n, last_b, last_rts = 0, 0, 0
    last = time.perf_counter()
    while True:
        await asyncio.sleep(interval_s)
        now = time.perf_counter()
        elapsed = now - last
        n = stats.consumed - last_n
        rts = stats.rts[last_rts:]
        avg = sum(rts) / len(rts) if rts else 0.0
        click.echo(
            f"Consume TPS: {n / elapsed:,.0f}  MB/s: {(stats.bytes - last_b) / elapsed / 1e6:.1f}  "
            f"Avg RT(ms): {avg:.3f}  Max RT(ms): {stats.interval_max_ms:.3f}  "
            f"Consume Failed: {stats.failed}",
            err=as_json,
        )
        last_n, last_b, last_rts, last = stats.consumed, stats.bytes, len(stats.rts), now
        stats.interval_max_ms = 0.0


@dataclass(frozen=True)
class _Plan:
    namesrv: str
    topic: str
    group: str
    size: int
    messages: int | None
    duration_s: float
    concurrency: int
    batch_max: int
    pull_batch: int
    preload: int
    produce_rate: float
    interval_s: float
    as_json: bool
    threads: bool
    credentials: SessionCredentials | None = None
    trace: bool = False
    trace_topic: str | None = None
    broker_pid: int | None = None


async def _bench(plan: _Plan) -> dict[str, Any]:
    stats = _Stats()
    target = plan.messages if plan.messages is not None else plan.preload or None

    reached = asyncio.Event()

    loop = asyncio.get_running_loop()

    # deliveries after the target (in flight while the consumer stops) are not measured
    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
        if reached.is_set():
            return _OK
        stats.record(msgs)
        if target is not None and stats.consumed >= target:
            reached.set()
        return _OK

    def threaded_listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
        with lock:
            if target is not None and stats.consumed >= target:
                return _OK
            stats.record(msgs)
            if target is not None and stats.consumed >= target:
                loop.call_soon_threadsafe(reached.set)
        return _OK

    lock = threading.Lock()

    async with Producer(
        f"{plan.group}_producer", namesrv_addr=plan.namesrv, credentials=plan.credentials
    ) as producer:
        await producer.send(Message(plan.topic, _WARM_UP))
        for _ in range(200):  # an auto-created topic reaches the NameServer a moment later
            if await producer.instance.api.get_topic_route(plan.topic) is not None:
                break
            await asyncio.sleep(0.05)
        if plan.preload:
            click.echo(f"preloading {plan.preload} messages...", err=plan.as_json)
            await _preload(producer, plan.topic, plan.size, plan.preload)
        consumer = PushConsumer(
            plan.group,
            namesrv_addr=plan.namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            if plan.produce_rate
            else ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_thread_nums=plan.concurrency,
            consume_message_batch_max_size=plan.batch_max,
            pull_batch_size=plan.pull_batch,
            credentials=plan.credentials,
            enable_trace=plan.trace,
            trace_topic=plan.trace_topic,
        )
        consumer.subscribe(plan.topic)
        consumer.register_message_listener(threaded_listener if plan.threads else listener)
        reporter = asyncio.create_task(_report(stats, plan.interval_s, plan.as_json))
        stop = asyncio.Event()
        async with consumer:
            cpu = time.process_time()
            broker_cpu = proc_cpu_seconds(plan.broker_pid) if plan.broker_pid else 0.0
            # long-lived objects (routes, connections, modules) out of the collector's way:
            # a full collection otherwise lands in the latency tail
            gc.collect()
            gc.freeze()
            if plan.produce_rate:
                await asyncio.sleep(0.5)  # queues assigned, first pulls parked at the broker
                stats.rts, stats.store_rts = array("d"), array("d")
                stats.consumed, stats.first_s, stats.stamped = 0, 0.0, 0
                sender = asyncio.create_task(
                    _produce_at_rate(
                        producer, plan.topic, plan.size, plan.produce_rate, stop, target
                    )
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reached.wait(), plan.duration_s)
            stop.set()
            if plan.produce_rate:
                await sender
            reporter.cancel()
            if plan.broker_pid:
                broker_cpu = proc_cpu_seconds(plan.broker_pid) - broker_cpu
            cpu = time.process_time() - cpu
    seconds = (stats.last_s - stats.first_s) if stats.consumed > 1 else 0.0
    rts = np.frombuffer(stats.rts, dtype=np.float64) if stats.rts else np.zeros(1)
    return {
        "mode": "fixed-rate" if plan.produce_rate else "backlog",
        "listener": "thread" if plan.threads else "coroutine",
        "topic": plan.topic,
        "size": plan.size,
        "concurrency": plan.concurrency,
        "batch_max": plan.batch_max,
        "produce_rate": plan.produce_rate,
        "consumed": stats.consumed,
        "failed": stats.failed,
        "seconds": round(seconds, 3),
        "msgs_per_s": round(stats.consumed / seconds) if seconds else 0,
        "mb_per_s": round(stats.bytes / seconds / 1e6, 2) if seconds else 0.0,
        "rt": "born->callback" if stats.stamped == stats.consumed else "store->callback",
        "avg_rt_ms": round(float(rts.mean()), 3),
        "p50_rt_ms": round(float(np.percentile(rts, 50)), 3),
        "p99_rt_ms": round(float(np.percentile(rts, 99)), 3),
        "max_rt_ms": round(float(rts.max()), 3),
        **_store_split(stats),
        "client_cpu_us_per_msg": round(cpu * 1e6 / stats.consumed, 2) if stats.consumed else 0.0,
        **_broker_cpu(plan.broker_pid, broker_cpu, stats.consumed),
        **trace_fields(consumer.tracer.dispatcher.stats if consumer.tracer else None),
    }


def _broker_cpu(pid: int | None, cpu_s: float, consumed: int) -> dict[str, Any]:
    """``broker_cpu_us_per_msg``: the process ``pid``'s user + system CPU from the consumer's
    start to the last message, per message consumed (when a broker PID was given)."""
    if not pid:
        return {}
    return {
        "broker_pid": pid,
        "broker_cpu_us_per_msg": round(cpu_s * 1e6 / consumed, 2) if consumed else 0.0,
    }


def _store_split(stats: _Stats) -> dict[str, float]:
    """Where the fixed-rate RT goes: after the broker stored the message (its pull wake-up,
    the transfer, decoding and dispatch here) versus before (the send)."""
    if not stats.store_rts:
        return {}
    after = np.frombuffer(stats.store_rts, dtype=np.float64)
    return {
        "p50_store_to_callback_ms": round(float(np.percentile(after, 50)), 3),
        "p99_store_to_callback_ms": round(float(np.percentile(after, 99)), 3),
    }


@click.command("consumer")
@click.option(
    "-n",
    "--namesrv",
    default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
    show_default="$NAMESRV_ADDR or 127.0.0.1:9876",
    help="NameServer address(es), host:port;host:port.",
)
@click.option("-t", "--topic", default="BenchmarkTest", show_default=True)
@click.option("-g", "--group", default=None, help="Consumer group (default: a new one per run).")
@click.option(
    "-s",
    "--size",
    type=click.IntRange(_STAMP.size, MAX_BODY_BYTES),  # room for the send-time stamp
    default=1024,
    show_default=True,
    help="Body bytes (produced here).",
)
@click.option("--messages", type=COUNT, default=None, help="Stop after consuming this many.")
@click.option("--duration", type=SECONDS, default=30.0, show_default=True, help="Maximum seconds.")
@click.option(
    "-c",
    "--concurrency",
    type=click.IntRange(1, 1000),  # the PushConsumer's consume_thread_nums range
    default=20,
    show_default=True,
    help="consume_thread_nums.",
)
@click.option(
    "--batch-max",
    type=click.IntRange(1, 1024),  # consume_message_batch_max_size
    default=1,
    show_default=True,
    help="Messages per listener call.",
)
@click.option(
    "--pull-batch",
    type=click.IntRange(1, 1024),  # pull_batch_size
    default=32,
    show_default=True,
    help="Messages per pull.",
)
@click.option(
    "--preload",
    type=OPTIONAL_COUNT,
    default=0,
    show_default=True,
    help="Store N messages first, then read them (0: none).",
)
@click.option(
    "--produce-rate", type=RATE, default=0.0, help="Also produce R msgs/s here (0: none)."
)
@click.option("--threads", is_flag=True, help="A plain-function listener (runs in worker threads).")
@click.option(
    "--report-interval", type=SECONDS, default=5.0, show_default=True, help="Seconds between lines."
)
@click.option("--json", "as_json", is_flag=True, help="End with one JSON summary line.")
@click.option("--access-key", default=None, help="ACL account that signs every request.")
@click.option("--secret-key", default=None, help="That account's secret.")
@click.option(
    "--broker-pid",
    type=click.IntRange(1),
    default=None,
    help="Also report this process's CPU per message (broker_cpu_us_per_msg, /proc/PID/stat).",
)
@TRACE_OPTIONS[0]
@TRACE_OPTIONS[1]
@TRACE_OPTIONS[2]
def consumer_bench(
    namesrv: str,
    topic: str,
    group: str | None,
    size: int,
    messages: int | None,
    duration: float,
    concurrency: int,
    batch_max: int,
    pull_batch: int,
    preload: int,
    produce_rate: float,
    threads: bool,
    report_interval: float,
    as_json: bool,
    access_key: str | None,
    secret_key: str | None,
    trace: str,
    trace_rounds: int,
    trace_topic: str | None,
    broker_pid: int | None,
) -> None:
    """Consume messages with a PushConsumer; print TPS and end-to-end RT (``--trace both``:
    untraced and traced runs, each with a new group, and their throughput ratio)."""
    if bool(access_key) != bool(secret_key):
        raise click.BadParameter("give both --access-key and --secret-key")
    credentials = SessionCredentials(access_key, secret_key) if access_key and secret_key else None
    base_group = group or f"benchmark_consumer_{os.getpid()}_{int(time.time())}"

    def one(traced: bool, index: int) -> dict[str, Any]:
        plan = _Plan(
            namesrv,
            topic,
            base_group if trace != "both" else f"{base_group}_{index}",
            size,
            messages,
            duration,
            concurrency,
            batch_max,
            pull_batch,
            preload,
            produce_rate,
            report_interval,
            as_json,
            threads,
            credentials,
            traced,
            trace_topic,
            broker_pid,
        )
        return run(_bench(plan))

    echo_results(run_trace_modes(trace, trace_rounds, one, as_json), as_json, 24)
