"""``ariane bench semantics``: delay delivery, transactions and filtered pulls on a broker.

Starts ``ariane broker`` in a child process (temporary store, every delay level 1 s,
``enablePropertyFilter=true``) unless ``--broker`` names a running one configured alike.
One connection, ``--concurrency`` requests in flight:

1. **delay**: ``--messages`` sends with ``DELAY=1``; then the time until all of them are in
   their topic, the delivery rate from the first due time on, and how late each one came
   (its store time in the real topic minus its send time minus the 1 s delay);
2. **transactions**: ``--messages`` half messages, then as many END_TRANSACTION commits;
   the rates and the commit-to-visible time of the last one;
3. **filtered pulls**: ``--messages`` messages with a property and a tag, read back with
   ``*``, a TAG expression matching half of them (hash plus exact check) and a SQL92
   expression matching half of them: messages scanned per second for each.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import click

from ariane.bench._child import broker_child
from ariane.bench.broker import _pipelined
from ariane.common.cli_bounds import COUNT, IN_FLIGHT
from ariane.common.message import MessageExt
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import encode_properties
from ariane.common.record import iter_records
from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient
from ariane.remoting.eventloop import run
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["semantics_bench"]

_TIMEOUT_MS = 30_000
_GROUP = "bench_semantics_producer"


def _send(topic: str, queue_id: int, props: dict[str, str], body: bytes) -> RemotingCommand:
    header = h.SendMessageRequestHeaderV2(
        producer_group=_GROUP, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties(props),
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)


def _pull(topic: str, offset: int, expression: str, kind: str) -> RemotingCommand:
    header = h.PullMessageRequestHeader(
        consumer_group="bench_semantics_consumer", topic=topic, queue_id=0, queue_offset=offset,
        max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
        sub_version=0, subscription=expression, expression_type=kind,
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


async def _max_offset(channel: Channel, topic: str) -> int:
    r = await channel.invoke(
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}),
        _TIMEOUT_MS,
    )
    return int(r.ext_fields.get("offset", "0"))


async def _wait_offset(channel: Channel, topic: str, n: int, timeout_s: float) -> None:
    """Poll until queue 0 of ``topic`` holds ``n`` messages (or the time is up)."""
    deadline = time.monotonic() + timeout_s
    for _ in range(10_000_000):
        if await _max_offset(channel, topic) >= n or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.001)


async def _read_all(
    channel: Channel, topic: str, expression: str, kind: str
) -> tuple[float, list[Any]]:
    """Pull queue 0 to its end; (seconds, records)."""
    end = await _max_offset(channel, topic)
    offset = 0
    records: list[MessageExt] = []
    started = time.perf_counter()
    while offset < end:
        r = await channel.invoke(_pull(topic, offset, expression, kind), _TIMEOUT_MS)
        if r.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            raise click.ClickException(f"pull {topic}@{offset}: {r.code} {r.remark}")
        records.extend(iter_records(r.body or b""))
        offset = int(r.ext_fields["nextBeginOffset"])
    return time.perf_counter() - started, records


async def _delay(channel: Channel, n: int, concurrency: int) -> dict[str, Any]:
    topic = f"BenchDelay{int(time.time())}"
    body = b"d" * 64
    sent_at = time.time()
    reqs = (_send(topic, 0, {"DELAY": "1"}, body) for _ in range(n))
    seconds, failed = await _pipelined(channel, reqs, concurrency)
    if failed:
        raise click.ClickException(f"{failed} of {n} delayed sends failed")
    await _wait_offset(channel, topic, n, 120)
    all_in = time.time() - sent_at
    _, records = await _read_all(channel, topic, "*", "TAG")
    late = sorted(m.store_timestamp_ms - m.born_timestamp_ms - 1000 for m in records)
    stored = sorted(m.store_timestamp_ms for m in records)
    span_s = max((stored[-1] - stored[0]) / 1000, 0.001) if stored else 0.0
    return {
        "delay_send_msgs_per_s": round(n / seconds),
        "delay_send_failures": failed,
        "delay_delivered": len(records),
        "delay_all_delivered_after_s": round(all_in, 2),
        "delay_delivery_msgs_per_s": round(len(records) / span_s) if records else 0,
        "delay_late_ms_median": statistics.median(late) if late else None,
        "delay_late_ms_max": late[-1] if late else None,
    }


async def _transactions(channel: Channel, n: int, concurrency: int) -> dict[str, Any]:
    topic = f"BenchTx{int(time.time())}"
    body = b"t" * 64
    halves: list[RemotingCommand] = []

    async def send_halves() -> None:
        inflight: list[asyncio.Future[RemotingCommand]] = []
        for _ in range(n):
            props = {"TRAN_MSG": "true", "PGROUP": _GROUP}
            inflight.append(channel.invoke_future(_send(topic, 0, props, body), _TIMEOUT_MS))
            if len(inflight) >= concurrency:
                halves.extend(await asyncio.gather(*inflight))
                inflight = []
        halves.extend(await asyncio.gather(*inflight))

    started = time.perf_counter()
    await send_halves()
    half_s = time.perf_counter() - started
    refused = [r for r in halves if r.code != ResponseCode.SUCCESS]
    if refused:
        raise click.ClickException(f"{len(refused)} half messages refused: {refused[0].remark}")

    def end(r: RemotingCommand) -> RemotingCommand:
        header = h.EndTransactionRequestHeader(
            producer_group=_GROUP, tran_state_table_offset=int(r.ext_fields["queueOffset"]),
            commit_log_offset=decode_offset_msg_id(r.ext_fields["msgId"]).phys_offset,
            commit_or_rollback=8, msg_id=r.ext_fields["transactionId"],
        )  # fmt: skip
        return RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())

    commit_s, failed = await _pipelined(channel, (end(r) for r in halves), concurrency)
    committed_at = time.perf_counter()
    await _wait_offset(channel, topic, n, 60)
    return {
        "tx_half_msgs_per_s": round(n / half_s),
        "tx_commits_per_s": round(n / commit_s),
        "tx_commit_failures": failed,
        "tx_last_visible_after_commits_ms": round((time.perf_counter() - committed_at) * 1000, 1),
    }


async def _filters(channel: Channel, n: int, concurrency: int) -> dict[str, Any]:
    topic = f"BenchFilter{int(time.time())}"
    body = b"f" * 64
    reqs = (
        _send(topic, 0, {"TAGS": "even" if i % 2 == 0 else "odd", "n": str(i)}, body)
        for i in range(n)
    )
    _, failed = await _pipelined(channel, reqs, concurrency)
    if failed:
        raise click.ClickException(f"{failed} of {n} sends failed")
    await _wait_offset(channel, topic, n, 60)
    out: dict[str, Any] = {}
    for name, expression, kind in (
        ("all", "*", "TAG"),
        ("tag", "even", "TAG"),
        ("sql92", "n >= 0 AND TAGS = 'even'", "SQL92"),
    ):
        seconds, records = await _read_all(channel, topic, expression, kind)
        out[f"pull_{name}_scanned_msgs_per_s"] = round(n / seconds)
        out[f"pull_{name}_delivered"] = len(records)
    return out


async def _bench(addr: str, messages: int, concurrency: int) -> dict[str, Any]:
    client = RemotingClient()
    channel = await client.get_channel(addr)
    results: dict[str, Any] = {"messages": messages, "concurrency": concurrency}
    try:
        results.update(await _delay(channel, messages, concurrency))
        results.update(await _transactions(channel, messages, concurrency))
        results.update(await _filters(channel, messages, concurrency))
    finally:
        await client.close()
    return results


@click.command("semantics")
@click.option(
    "--broker", "addr", default=None, help="HOST:PORT of a running broker (default: start one)."
)
@click.option(
    "--messages", type=COUNT, default=20_000, show_default=True, help="Messages per phase."
)
@click.option(
    "--concurrency", type=IN_FLIGHT, default=256, show_default=True, help="Requests in flight."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def semantics_bench(addr: str | None, messages: int, concurrency: int, as_json: bool) -> None:
    """Delay delivery, transaction and filtered-pull throughput against a broker."""
    levels = " ".join(["1s"] * 18)
    overrides = [f"messageDelayLevel={levels}", "enablePropertyFilter=true"]
    with broker_child(addr, "ariane-bench-semantics-", overrides) as target:
        results = run(_bench(target, messages, concurrency))
    if as_json:
        click.echo(json.dumps(results))
        return
    for key, value in results.items():
        click.echo(f"{key:>36}: {value}")
