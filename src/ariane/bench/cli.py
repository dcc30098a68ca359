"""``ariane bench``: the benchmark commands."""

from __future__ import annotations

import click

from ariane.cli import LazyGroup

__all__ = ["bench"]

BENCHMARKS: dict[str, str] = {
    "store": "ariane.bench.store:store_bench",
    "remoting": "ariane.bench.remoting:remoting_bench",
    "filter": "ariane.bench.filter:filter_bench",
    "broker": "ariane.bench.broker:broker_bench",
    "semantics": "ariane.bench.semantics:semantics_bench",
    "producer": "ariane.bench.producer:producer_bench",
    "consumer": "ariane.bench.consumer:consumer_bench",
    "spark": "ariane.bench.spark:spark_bench",
    # the Spark source's record-to-Arrow decode, no Spark or broker (issue 19)
    "spark-decode": "ariane.bench.spark_decode:spark_decode_bench",
    "grpc": "ariane.bench.grpc:grpc_bench",
    # POP receive+ack next to pulls, timer accuracy (issue 16)
    "pop": "ariane.bench.pop:pop_bench",
    # the web dashboard at 1,000 topics / 10,000 groups (issue 17)
    "dashboard": "ariane.bench.dashboard:dashboard_bench",
    # master/slave replication: SYNC vs ASYNC_MASTER throughput, slave lag (issue 13)
    "ha": "ariane.bench.ha:ha_bench",
    # abnormal and normal start of a large CommitLog (issue 12)
    "recovery": "ariane.bench.recovery:recovery_bench",
    # broker RSS at 1,000 topics x 8 queues and 10,000 groups (issue 18)
    "memory": "ariane.bench.memory:memory_bench",
    # DLedger group vs single broker, failover time over leader kills (issue 14)
    "dledger": "ariane.bench.dledger:dledger_bench",
    # in-process per-message steps (codecs, ACL, trace hooks), compiled and pure twins
    "micro": "ariane.bench.micro:micro_bench",
}


@click.group(cls=LazyGroup, lazy_commands=BENCHMARKS)
def bench() -> None:
    """Benchmarks that print throughput and latency numbers."""
