"""``ariane bench producer``: send throughput and latency of ``ariane.client.Producer``
(modelled on RocketMQ's ``benchmark/producer.sh``, ``org.apache.rocketmq.example.benchmark.
Producer``).

Two ways to keep the broker busy:

* default: ``--concurrency`` senders, each awaiting ``send()`` (RocketMQ's ``-w`` threads);
* ``--async``: ``--concurrency`` sends in flight through ``send_async()``; each completion
  starts the next send from its callback, so no task per message exists.

``--batch K`` sends lists of K messages (``send_batch`` / ``send_batch_async``); ``--rate R``
holds R messages per second (requests wait for their turn). Every
``--report-interval`` seconds one line shows TPS, MB/s, average and max RT and failures; the
end prints a summary (``--json``: one JSON object as the last line, with ``msgs_per_s``,
``mb_per_s``, ``avg_rt_ms``, ``max_rt_ms``, ``p99_rt_ms``, ``failed``...). RT is per request.
``client_cpu_us_per_msg`` is this process's CPU per message; ``--broker-pid PID`` adds
``broker_cpu_us_per_msg``, the user + system CPU of process PID (the broker; under ``ariane
standalone`` the broker child, not the launcher) read from ``/proc/PID/stat`` at the start and
end of the measured run, per message sent.
``--trace on`` traces every send (``enable_trace``); ``--trace both`` measures the cost of
message trace (see ``ariane.bench._trace_modes``).
"""

from __future__ import annotations

import asyncio
import os
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click
import numpy as np

from ariane.acl.credentials import SessionCredentials
from ariane.bench._child import proc_cpu_seconds
from ariane.bench._trace_modes import TRACE_OPTIONS, echo_results, run_trace_modes, trace_fields
from ariane.client import Message, Producer
from ariane.common.cli_bounds import BATCH, BODY_BYTES, COUNT, IN_FLIGHT, RATE, SECONDS
from ariane.errors import ArianeError
from ariane.remoting.eventloop import run
from ariane.store.config import DEFAULT_DELAY_LEVELS, parse_delay_levels

__all__ = ["producer_bench"]

#: the levels of the broker's default ``messageDelayLevel`` ("1s 5s ... 2h": 18); a broker
#: delivers a level above its highest at its highest
DELAY_LEVELS = len(parse_delay_levels(DEFAULT_DELAY_LEVELS))


@dataclass
class _Stats:
    """Counters shared by the senders; RTs are kept per request in milliseconds."""

    ok_msgs: int = 0
    failed: int = 0
    rts: array[float] = field(default_factory=lambda: array("d"))
    interval_max_ms: float = 0.0
    first_error: str | None = None

    def record(self, started: float, msgs: int, error: BaseException | None) -> None:
        rt = (time.perf_counter() - started) * 1000
        if error is None:
            self.ok_msgs += msgs
            self.rts.append(rt)
            if rt > self.interval_max_ms:
                self.interval_max_ms = rt
        else:
            self.failed += msgs
            if self.first_error is None:
                self.first_error = repr(error)


@dataclass(frozen=True)
class _Plan:
    topic: str
    size: int
    batch: int
    keys: bool
    tags: str | None
    delay_level: int
    messages: int | None
    duration_s: float
    concurrency: int
    #: messages per second to aim at (0: as fast as the cluster takes them)
    rate: float = 0.0


class _Source:
    """Makes the messages (or batches) of one request."""

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan
        self.body = os.urandom(plan.size)
        self.issued = 0

    def next_request(self) -> list[Message]:
        plan = self.plan
        count = plan.batch
        if plan.messages is not None:
            count = min(count, plan.messages - self.issued)
        out = []
        for _ in range(count):
            self.issued += 1
            out.append(
                Message(
                    plan.topic,
                    self.body,
                    tags=plan.tags,
                    keys=f"k{self.issued}" if plan.keys else None,
                    delay_level=plan.delay_level,
                )
            )
        return out


class _Runner:
    def __init__(self, producer: Producer, plan: _Plan, stats: _Stats) -> None:
        self.producer = producer
        self.plan = plan
        self.stats = stats
        self.source = _Source(plan)
        self.started = time.perf_counter()
        self.deadline = self.started + plan.duration_s
        self.limit = plan.messages

    def delay(self) -> float:
        """Seconds to wait before the next request to hold ``--rate`` (0: go now)."""
        rate = self.plan.rate
        if rate <= 0:
            return 0.0
        due = self.started + self.source.issued / rate
        return max(0.0, due - time.perf_counter())

    def more(self) -> bool:
        if self.limit is not None:
            return self.source.issued < self.limit
        return time.perf_counter() < self.deadline

    async def run_sync(self) -> None:
        async def sender() -> None:
            batch = self.plan.batch > 1
            while self.more():
                wait = self.delay()
                if wait:
                    await asyncio.sleep(wait)
                msgs = self.source.next_request()
                started = time.perf_counter()
                try:
                    if batch:
                        await self.producer.send_batch(msgs)
                    else:
                        await self.producer.send(msgs[0])
                except Exception as exc:
                    self.stats.record(started, len(msgs), exc)
                else:
                    self.stats.record(started, len(msgs), None)

        await asyncio.gather(*(sender() for _ in range(self.plan.concurrency)))

    async def run_async(self) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        inflight = 0
        batch = self.plan.batch > 1
        producer = self.producer
        stats = self.stats

        def launch() -> None:
            nonlocal inflight
            msgs = self.source.next_request()
            started = time.perf_counter()
            try:
                future = producer.send_batch_async(msgs) if batch else producer.send_async(msgs[0])
            except Exception as exc:
                stats.record(started, len(msgs), exc)
                loop.call_soon(finished, None)
                return
            inflight += 1
            future.add_done_callback(_completion(started, len(msgs), finished))

        def finished(error_and_count: tuple[float, int, BaseException | None] | None) -> None:
            nonlocal inflight
            if error_and_count is not None:
                inflight -= 1
                stats.record(*error_and_count)
            if self.more():
                wait = self.delay()
                if wait:
                    loop.call_later(wait, launch_if_more)
                else:
                    launch()
            elif inflight == 0 and not done.done():
                done.set_result(None)

        def launch_if_more() -> None:
            if self.more():
                launch()
            elif inflight == 0 and not done.done():
                done.set_result(None)

        for _ in range(self.plan.concurrency):
            if not self.more():
                break
            launch()
        if inflight == 0:
            return
        await done


def _completion(
    started: float, count: int, then: Callable[[tuple[float, int, BaseException | None]], None]
) -> Callable[[asyncio.Future[Any]], None]:
    def callback(future: asyncio.Future[Any]) -> None:
        error = None if future.cancelled() else future.exception()
        then((started, count, error))

    return callback


async def _report(stats: _Stats, interval_s: float, size: int, as_json: bool) -> None:
    last_ok, last_failed, last_rts = 0, 0, 0
    last = time.perf_counter()
    while True:
        await asyncio.sleep(interval_s)
        now = time.perf_counter()
        elapsed = now - last
        ok = stats.ok_msgs - last_ok
        rts = stats.rts[last_rts:]
        avg = sum(rts) / len(rts) if rts else 0.0
        line = (
            f"Send TPS: {ok / elapsed:,.0f}  MB/s: {ok * size / elapsed / 1e6:.1f}  "
            f"Avg RT(ms): {avg:.3f}  Max RT(ms): {stats.interval_max_ms:.3f}  "
            f"Send Failed: {stats.failed - last_failed}"
        )
        click.echo(line, err=as_json)
        last_ok, last_failed, last_rts, last = stats.ok_msgs, stats.failed, len(stats.rts), now
        stats.interval_max_ms = 0.0


async def _bench(
    namesrv: str,
    plan: _Plan,
    use_async: bool,
    group: str,
    interval_s: float,
    as_json: bool,
    fault: bool,
    credentials: SessionCredentials | None = None,
    trace: bool = False,
    trace_topic: str | None = None,
    broker_pid: int | None = None,
) -> dict[str, Any]:
    stats = _Stats()
    producer = Producer(
        group,
        namesrv_addr=namesrv,
        send_latency_fault_enable=fault,
        send_timeout_ms=10_000,
        credentials=credentials,
        enable_trace=trace,
        trace_topic=trace_topic,
    )
    async with producer:
        # route and connection first, so the measurement starts warm
        try:
            await producer.send(Message(plan.topic, b"warm-up"))
        except ArianeError as exc:
            raise click.ClickException(f"the warm-up send to {plan.topic} failed: {exc}") from exc
        runner = _Runner(producer, plan, stats)
        reporter = asyncio.create_task(_report(stats, interval_s, plan.size, as_json))
        started = time.perf_counter()
        cpu = time.process_time()
        broker_cpu = proc_cpu_seconds(broker_pid) if broker_pid else 0.0
        try:
            await (runner.run_async() if use_async else runner.run_sync())
        finally:
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu
            if broker_pid:
                broker_cpu = proc_cpu_seconds(broker_pid) - broker_cpu
            reporter.cancel()
    rts = np.frombuffer(stats.rts, dtype=np.float64) if stats.rts else np.zeros(1)
    return {
        "mode": ("async" if use_async else "sync")
        + (f"-batch{plan.batch}" if plan.batch > 1 else ""),
        "topic": plan.topic,
        "size": plan.size,
        "batch": plan.batch,
        "concurrency": plan.concurrency,
        "seconds": round(seconds, 3),
        "sent": stats.ok_msgs,
        "failed": stats.failed,
        "msgs_per_s": round(stats.ok_msgs / seconds) if seconds else 0,
        "mb_per_s": round(stats.ok_msgs * plan.size / seconds / 1e6, 2) if seconds else 0.0,
        "avg_rt_ms": round(float(rts.mean()), 3),
        "p50_rt_ms": round(float(np.percentile(rts, 50)), 3),
        "p99_rt_ms": round(float(np.percentile(rts, 99)), 3),
        "max_rt_ms": round(float(rts.max()), 3),
        "first_error": stats.first_error,
        "client_cpu_us_per_msg": round(cpu * 1e6 / stats.ok_msgs, 2) if stats.ok_msgs else 0.0,
        **_broker_cpu_fields(broker_pid, broker_cpu, stats.ok_msgs),
        **trace_fields(producer.trace_dispatcher.stats if producer.trace_dispatcher else None),
    }


def _broker_cpu_fields(pid: int | None, cpu_s: float, sent: int) -> dict[str, Any]:
    """``broker_cpu_us_per_msg`` (the process ``pid``'s user + system CPU over the run,
    from ``/proc/PID/stat``, per message sent) when a broker PID was given."""
    if not pid:
        return {}
    return {
        "broker_pid": pid,
        "broker_cpu_us_per_msg": round(cpu_s * 1e6 / sent, 2) if sent else 0.0,
    }


@click.command("producer")
@click.option(
    "-n",
    "--namesrv",
    default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
    show_default="$NAMESRV_ADDR or 127.0.0.1:9876",
    help="NameServer address(es), host:port;host:port.",
)
@click.option("-t", "--topic", default="BenchmarkTest", show_default=True)
@click.option(
    "-s", "--size", type=BODY_BYTES, default=128, show_default=True, help="Body bytes per message."
)
@click.option("--messages", type=COUNT, default=None, help="Stop after this many messages.")
@click.option(
    "--duration",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help="Seconds (without --messages).",
)
@click.option(
    "-b", "--batch", type=BATCH, default=1, show_default=True, help="Messages per request."
)
@click.option("--async", "use_async", is_flag=True, help="Pipelined sends via send_async.")
@click.option(
    "-c",
    "--concurrency",
    "-w",
    type=IN_FLIGHT,
    default=64,
    show_default=True,
    help="Senders (sync) or requests in flight (--async).",
)
@click.option("-g", "--group", default="benchmark_producer", show_default=True)
@click.option("-k", "--keys", is_flag=True, help="Give every message a key (index entry).")
@click.option("--tags", default=None, help="Tag of every message.")
@click.option(
    "--delay-level",
    type=click.IntRange(0, DELAY_LEVELS),
    default=0,
    show_default=True,
    help=f"Delay level of every message (0: none; 1..{DELAY_LEVELS}: the broker's default levels).",
)
@click.option("--latency-fault", is_flag=True, help="sendLatencyFaultEnable.")
@click.option(
    "--report-interval", type=SECONDS, default=5.0, show_default=True, help="Seconds between lines."
)
@click.option("--json", "as_json", is_flag=True, help="End with one JSON summary line.")
@click.option(
    "--rate",
    type=RATE,
    default=0.0,
    help="Messages per second (0: as fast as possible).",
)
@click.option("--access-key", default=None, help="ACL account that signs every send.")
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
def producer_bench(
    namesrv: str,
    topic: str,
    size: int,
    messages: int | None,
    duration: float,
    batch: int,
    use_async: bool,
    concurrency: int,
    group: str,
    keys: bool,
    tags: str | None,
    delay_level: int,
    latency_fault: bool,
    report_interval: float,
    as_json: bool,
    rate: float,
    access_key: str | None,
    secret_key: str | None,
    broker_pid: int | None,
    trace: str,
    trace_rounds: int,
    trace_topic: str | None,
) -> None:
    """Send messages as fast as the cluster takes them; print TPS and RT (``--trace both``:
    untraced and traced runs and their throughput ratio)."""
    if bool(access_key) != bool(secret_key):
        raise click.BadParameter("give both --access-key and --secret-key")
    creds = SessionCredentials(access_key, secret_key) if access_key and secret_key else None
    plan = _Plan(topic, size, batch, keys, tags, delay_level, messages, duration, concurrency, rate)

    def one(traced: bool, index: int) -> dict[str, Any]:
        return run(
            _bench(
                namesrv,
                plan,
                use_async,
                group,
                report_interval,
                as_json,
                latency_fault,
                creds,
                traced,
                trace_topic,
                broker_pid,
            )
        )

    echo_results(run_trace_modes(trace, trace_rounds, one, as_json), as_json, 18)
