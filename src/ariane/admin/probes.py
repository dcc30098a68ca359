"""Send-latency probes (RocketMQ ``CheckMsgSendRTCommand``, ``CLusterSendMsgRTCommand`` and
``SendMsgStatusCommand``): checkMsgSendRT, clusterRT, sendMsgStatus.

How it works: each probe sends real messages with a normal producer, one at a time, and times
every send (wall clock, milliseconds). The first send of a run pays for route lookup and
connection setup, so the averages leave it out, as RocketMQ's tools do. checkMsgSendRT walks
the topic's writable queues in turn; clusterRT and sendMsgStatus send to the topic named
after each broker (every broker hosts one, ``brokerTopicEnable``), so each broker is measured
on its own. These are probes for people, not benchmarks (``ariane bench producer`` is).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from ariane.admin.command import AdminContext, CommandFailed, admin_command
from ariane.admin.output import Table, View

__all__ = ["check_msg_send_rt", "cluster_rt", "send_msg_status"]

_MAX_BODY = 4 * 1024 * 1024


async def _timed_send(producer: Any, msg: Any, **kwargs: Any) -> tuple[Any, float, str | None]:
    """(result or None, milliseconds, error text or None) of one send."""
    from ariane.errors import ArianeError

    start = time.perf_counter()
    try:
        result = await producer.send(msg, **kwargs)
    except ArianeError as exc:
        return None, (time.perf_counter() - start) * 1000, str(exc)
    return result, (time.perf_counter() - start) * 1000, None


def _average(rts: list[float]) -> float:
    """Mean of the send times without the first one (with one send, that one)."""
    rest = rts[1:] or rts
    return sum(rest) / len(rest) if rest else 0.0


def _body(size: int) -> bytes:
    return b"a" * size


@admin_command("checkMsgSendRT", "Time sends to a topic, queue by queue.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--amount", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option(
    "-s", "--size", type=click.IntRange(1, _MAX_BODY), default=128, show_default=True,
    help="Body bytes.",
)  # fmt: skip
async def check_msg_send_rt(ctx: AdminContext, topic: str, amount: int, size: int) -> View:
    """Send AMOUNT messages of SIZE bytes to TOPIC, one at a time, walking its writable
    queues in turn; print each send's broker, queue, outcome and time, and the average time
    without the first send."""
    from ariane.client import Message
    from ariane.errors import ArianeError

    rows: list[dict[str, Any]] = []
    async with ctx.producer(f"mqadmin_rt_{time.time_ns()}") as producer:
        try:
            queues = sorted(
                await producer.fetch_publish_message_queues(topic),
                key=lambda q: (q.broker_name, q.queue_id),
            )
        except ArianeError as exc:
            raise CommandFailed(f"cannot send to {topic!r}: {exc}") from None
        if not queues:
            raise CommandFailed(f"topic {topic!r} has no writable queue")
        for i in range(amount):
            mq = queues[i % len(queues)]
            _, rt, err = await _timed_send(producer, Message(topic, _body(size)), queue=mq)
            rows.append(
                {
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "ok": err is None,
                    "rtMs": round(rt, 3),
                    "error": err,
                }
            )
    avg = _average([r["rtMs"] for r in rows])
    table = Table(
        ("Broker Name", "QID", "Send Result", "RT(ms)", "Error"),
        [(r["brokerName"], r["queueId"], r["ok"], r["rtMs"], r["error"]) for r in rows],
        numeric=frozenset({"QID", "RT(ms)"}),
    )
    failed = sum(not r["ok"] for r in rows)
    data = {"topic": topic, "size": size, "sends": rows, "avgRtMs": round(avg, 3)}
    data["failed"] = failed
    return View(data, [table], [f"Avg RT: {avg:.2f} ms ({failed} failed)"])


async def _broker_rt(producer: Any, broker: str, amount: int, size: int) -> dict[str, Any]:
    from ariane.client import Message

    rts: list[float] = []
    ok = 0
    last_error = None
    for _ in range(amount):
        _, rt, err = await _timed_send(producer, Message(broker, _body(size)))
        rts.append(rt)
        ok += err is None
        last_error = err or last_error
    return {
        "rtMs": round(_average(rts), 3),
        "successCount": ok,
        "failCount": amount - ok,
        "lastError": last_error,
    }


async def _cluster_round(
    ctx: AdminContext, producer: Any, cluster: str | None, amount: int, size: int
) -> list[dict[str, Any]]:
    info = await ctx.admin.cluster_info()
    if cluster is not None and cluster not in info.cluster_addr_table:
        raise CommandFailed(f"cluster {cluster!r} does not exist")
    names = [cluster] if cluster is not None else sorted(info.cluster_addr_table)
    rows = []
    for name in names:
        for broker in sorted(info.cluster_addr_table[name]):
            rows.append({"cluster": name, "brokerName": broker}
                        | await _broker_rt(producer, broker, amount, size))  # fmt: skip
    return rows


def _cluster_view(rows: list[dict[str, Any]], tlog: bool, room: str) -> View:
    if tlog:  # RocketMQ's "tlog" lines: time|machine room|cluster|broker|rt
        now = time.strftime("%Y-%m-%d %H:%M:%S")
        lines = [f"{now}|{room}|{r['cluster']}|{r['brokerName']}|{round(r['rtMs'])}" for r in rows]
        return View({"machineRoom": room, "brokers": rows}, lines=lines)
    table = Table(
        ("Cluster Name", "Broker Name", "RT(ms)", "Success", "Failed", "Last Error"),
        [
            (
                r["cluster"],
                r["brokerName"],
                r["rtMs"],
                r["successCount"],
                r["failCount"],
                r["lastError"],
            )
            for r in rows
        ],
        numeric=frozenset({"RT(ms)", "Success", "Failed"}),
    )
    return View({"machineRoom": room, "brokers": rows}, [table])


@admin_command("clusterRT", "Time sends to every broker of the clusters.")
@click.option("-a", "--amount", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option(
    "-s", "--size", type=click.IntRange(1, _MAX_BODY), default=128, show_default=True,
    help="Body bytes.",
)  # fmt: skip
@click.option("-c", "--cluster", help="Only this cluster (default: all).")
@click.option(
    "-p", "--printLog", "tlog", type=click.BOOL, default=False,
    help="Print time|room|cluster|broker|rt lines (RocketMQ's tlog form).",
)  # fmt: skip
@click.option("-m", "--machineRoom", "room", default="noname", show_default=True)
@click.option(
    "-i",
    "--interval",
    type=click.IntRange(1, 86_400),
    help="Repeat every INTERVAL seconds (Ctrl-C).",
)
async def cluster_rt(
    ctx: AdminContext,
    amount: int,
    size: int,
    cluster: str | None,
    tlog: bool,
    room: str,
    interval: int | None,
) -> View:
    """For every broker of every cluster (or of -c), send AMOUNT messages of SIZE bytes to
    the topic named after the broker and print the average send time (without the first
    send) with the counts of successes and failures."""
    async with ctx.producer(f"mqadmin_cluster_rt_{time.time_ns()}") as producer:
        view = _cluster_view(await _cluster_round(ctx, producer, cluster, amount, size), tlog, room)
        while interval is not None:
            from ariane.admin.output import render_text

            render_text(view)
            await asyncio.sleep(interval)
            rows = await _cluster_round(ctx, producer, cluster, amount, size)
            view = _cluster_view(rows, tlog, room)
    return view


@admin_command("sendMsgStatus", "Time sends to one broker.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option(
    "-s", "--messageSize", "size", type=click.IntRange(1, _MAX_BODY), default=128,
    show_default=True,
)  # fmt: skip
@click.option("-c", "--count", type=click.IntRange(1, 100_000), default=50, show_default=True)
async def send_msg_status(ctx: AdminContext, broker_name: str, size: int, count: int) -> View:
    """Send one small warm-up message, then COUNT messages of SIZE bytes, to the topic named
    after BROKER_NAME; print each send's time and result."""
    from ariane.client import Message

    if broker_name not in (await ctx.admin.cluster_info()).broker_addr_table:
        # else the send would auto-create a topic of that name on some other broker
        raise CommandFailed(f"broker {broker_name!r} is not registered with the NameServer")
    rows: list[dict[str, Any]] = []
    async with ctx.producer("PID_SMSC") as producer:
        _, _, err = await _timed_send(producer, Message(broker_name, _body(16)))
        if err is not None:
            raise CommandFailed(f"cannot send to broker {broker_name!r}: {err}")
        for _ in range(count):
            result, rt, err = await _timed_send(producer, Message(broker_name, _body(size)))
            row: dict[str, Any] = {"rtMs": round(rt, 3), "error": err}
            if result is not None:
                row.update(
                    sendStatus=result.status.name,
                    msgId=result.msg_id,
                    brokerName=result.message_queue.broker_name,
                    queueId=result.message_queue.queue_id,
                    queueOffset=result.queue_offset,
                )
            rows.append(row)
    table = Table(
        ("RT(ms)", "Send Status", "Broker Name", "QID", "Queue Offset", "Msg Id", "Error"),
        [
            (
                r["rtMs"],
                r.get("sendStatus"),
                r.get("brokerName"),
                r.get("queueId"),
                r.get("queueOffset"),
                r.get("msgId"),
                r["error"],
            )
            for r in rows
        ],
        numeric=frozenset({"RT(ms)", "QID", "Queue Offset"}),
    )
    avg = sum(r["rtMs"] for r in rows) / len(rows)
    data = {"brokerName": broker_name, "size": size, "sends": rows, "avgRtMs": round(avg, 3)}
    return View(data, [table], [f"Avg RT: {avg:.2f} ms"])
