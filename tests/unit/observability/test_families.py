"""Metric families: common labels, the cardinality limit, metricsLabel parsing and the
collector that builds families on an event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ariane.common.histogram import Histogram
from ariane.observability.exporter import LoopCollector, new_registry
from ariane.observability.families import Families, parse_metrics_label


def test_parse_metrics_label_skips_malformed_pairs() -> None:
    assert parse_metrics_label("") == {}
    assert parse_metrics_label("env:prod, dc:eu-1,bad,:x,y:,a:b:c") == {"env": "prod", "dc": "eu-1"}


def test_families_add_common_labels_and_cap_series() -> None:
    fam = Families({"cluster": "C", "node_id": "b"}, limit=2)
    gauge = fam.gauge("ariane_test_gauge", "doc", ["topic"])
    for topic in ("a", "b", "c", "d"):
        gauge.add([topic], 1)
    hist = fam.histogram("ariane_test_seconds", "doc")
    h = Histogram([0.1, 1])
    h.observe(0.5)
    hist.add([], h)
    fam.counter("ariane_test_total", "doc").add([], 3)
    metrics = {m.name: m for m in fam.finish()}
    assert [s.labels for s in metrics["ariane_test_gauge"].samples] == [
        {"cluster": "C", "node_id": "b", "topic": "a"},
        {"cluster": "C", "node_id": "b", "topic": "b"},
    ]
    dropped = metrics["ariane_metrics_series_dropped"].samples
    assert [(s.labels["metric"], s.value) for s in dropped] == [("ariane_test_gauge", 2)]
    buckets = [(s.labels.get("le"), s.value) for s in metrics["ariane_test_seconds"].samples]
    assert buckets[:3] == [("0.1", 0.0), ("1.0", 1.0), ("+Inf", 1.0)]
    assert metrics["ariane_test"].samples[0].name == "ariane_test_total"


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_loop_collector_builds_on_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    seen: list[int] = []

    def build() -> list[object]:
        seen.append(threading.get_ident())
        fam = Families({}, 10)
        fam.gauge("ariane_built", "doc").add([], 1)
        return fam.finish()  # type: ignore[return-value]

    registry = new_registry(LoopCollector(loop, build))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"ariane_built", "process_cpu_seconds", "python_info"} <= names
    assert seen
    assert seen[0] != threading.get_ident()


def test_a_stuck_loop_fails_the_scrape(loop: asyncio.AbstractEventLoop) -> None:
    release = threading.Event()
    loop.call_soon_threadsafe(lambda: release.wait(5))  # blocks the loop
    collector = LoopCollector(loop, list, timeout_s=0.1)
    with pytest.raises(TimeoutError):
        list(collector.collect())
    release.set()
