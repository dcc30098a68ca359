"""The pipeline commands: archive -> replay round trip, and the lag report."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from ariane.cli import main
from ariane.client import SyncAdmin, SyncProducer
from ariane.spark._cluster import ClusterOffsets
from ariane.spark.options import SourceOptions
from ariane.spark.pipelines import lag_report
from tests.spark.conftest import create_topic, read, read_written, send_to_queues
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("spark")]


def _content(rows: list) -> list[tuple[bytes, str | None, str | None, tuple]]:  # type: ignore[type-arg]
    return sorted(
        (r.body, r.keys, r.tags, tuple(sorted((r.properties or {}).items()))) for r in rows
    )


def test_archive_then_replay_round_trips(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, src, dst = spark_cluster.namesrv_addr, "SparkArchiveSrc", "SparkArchiveDst"
    create_topic(admin, src)
    create_topic(admin, dst)
    send_to_queues(producer, src, 24, region="eu", note="a=b;c\u00e9")
    archive_dir = tmp_path / "archive"
    runner = CliRunner()
    args = ["pipeline", "archive", "-n", ns, "--topic", src, "--to", str(archive_dir)]
    result = runner.invoke(main, [*args, "--master", "local[2]"])
    assert result.exit_code == 0, result.output
    assert "archived 24 messages" in result.output
    assert any(p.name.startswith("date=") for p in archive_dir.iterdir())
    send_to_queues(producer, src, 6, start=24)
    again = runner.invoke(main, args)
    assert again.exit_code == 0, again.output
    assert "archived 6 messages" in again.output
    replayed = runner.invoke(
        main,
        ["pipeline", "replay", "-n", ns, "--from", str(archive_dir), "--topic", dst, "--ordered"],
    )
    assert replayed.exit_code == 0, replayed.output
    assert "replayed 30 messages" in replayed.output
    original = read(spark, ns, topic=src)
    copy = read_written(spark, spark_cluster, topic=dst)
    assert len(copy) == 30
    assert _content(copy) == _content(original)


def test_lag_report_numbers_and_chart(
    spark: SparkSession,
    spark_cluster: Cluster,
    admin: SyncAdmin,
    producer: SyncProducer,
    tmp_path: Path,
) -> None:
    ns, topic, group = spark_cluster.namesrv_addr, "SparkLag", "spark_lag_group"
    create_topic(admin, topic, queues=2)
    send_to_queues(producer, topic, 10, queues=2)
    cluster = ClusterOffsets(SourceOptions.parse({"nameserver": ns, "topic": topic}))
    cluster.queues()
    cluster.commit_to_group(group, {(topic, "broker-a", 0): 2, (topic, "broker-a", 1): 5})
    lags = {q.queue_id: q for q in lag_report(spark, ns, groups=[group], topics=[topic])}
    assert (lags[0].backlog, lags[0].consumer_offset, lags[0].broker_offset) == (3, 2, 5)
    assert (lags[1].backlog, lags[1].oldest_unconsumed_ms) == (0, None)
    stored = {
        r.queueOffset: int(r.storeTimestamp.timestamp() * 1000)
        for r in read(spark, ns, topic=topic)
        if r.queueId == 0
    }
    assert lags[0].oldest_unconsumed_ms == stored[2]
    png = tmp_path / "lag.png"
    result = CliRunner().invoke(
        main,
        ["pipeline", "lag-report", "-n", ns, "--group", group, "--topic", topic, "--png", str(png)],
    )
    assert result.exit_code == 0, result.output
    assert "spark_lag_group" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
