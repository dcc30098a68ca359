"""``ariane pipeline``: Spark jobs on topics (archive, replay, lag-report).

Spark is imported only when a command runs, so ``ariane pipeline --help`` works without the
``spark`` extra.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ariane.common.cli_bounds import SECONDS

if TYPE_CHECKING:
    from ariane.acl.credentials import SessionCredentials

__all__ = ["pipeline"]

_master = click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master URL; the ariane package is shipped to non-local executors.",
)
_nameserver = click.option(
    "--nameserver",
    "-n",
    default="127.0.0.1:9876",
    show_default=True,
    envvar="NAMESRV_ADDR",
    help="NameServer address(es), host:port[;host:port].",
)
_conf = click.option(
    "--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Extra Spark setting (repeatable)."
)


def _acl(command: Callable[..., None]) -> Callable[..., None]:
    """``--access-key``/``--secret-key``: the ACL account that signs every request."""
    command = click.option(
        "--secret-key",
        envvar="ARIANE_SECRET_KEY",
        default=None,
        help="Its secret (env ARIANE_SECRET_KEY).",
    )(command)
    return click.option(
        "--access-key",
        envvar="ARIANE_ACCESS_KEY",
        default=None,
        help="ACL account that signs every request (env ARIANE_ACCESS_KEY).",
    )(command)


def _credentials(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("--access-key and --secret-key go together")
    from ariane.acl.credentials import SessionCredentials

    return SessionCredentials(access_key, secret_key) if access_key and secret_key else None


def _session(master: str, app: str, confs: tuple[str, ...]) -> object:
    from ariane.spark.session import spark_session

    conf = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
        conf[key.strip()] = value.strip()
    return spark_session(master, app, conf)


@click.group()
def pipeline() -> None:
    """Spark pipelines on topics (needs the 'spark' extra and Java 17)."""


@pipeline.command("archive")
@_nameserver
@click.option("--topic", "-t", required=True, help="Topic (or comma list) to archive.")
@click.option(
    "--to",
    "dest",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Archive directory (Parquet, partitioned by date=YYYY-MM-DD).",
)
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoint directory [default: DIR/_checkpoint].",
)
@click.option(
    "--available-now/--continuous",
    default=True,
    show_default=True,
    help="Archive what is there and stop, or keep running.",
)
@click.option(
    "--trigger-seconds",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help="Micro-batch interval.",
)
@click.option(
    "--max-offsets-per-trigger",
    type=click.IntRange(1, 2**63 - 1),  # Spark's ReadMaxRows is a long
    default=None,
    help="Rate limit per batch.",
)
@click.option(
    "--starting-offsets",
    default="earliest",
    show_default=True,
    help="Where a new archive starts: earliest, latest or JSON.",
)
@_master
@_conf
@_acl
def archive_cmd(
    nameserver: str,
    topic: str,
    dest: Path,
    checkpoint: Path | None,
    available_now: bool,
    trigger_seconds: float,
    max_offsets_per_trigger: int | None,
    starting_offsets: str,
    master: str,
    confs: tuple[str, ...],
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Archive a topic into Parquet, incrementally (rerun to continue)."""
    from ariane.spark.pipelines import archive

    credentials = _credentials(access_key, secret_key)
    spark = _session(master, f"ariane-archive-{topic}", confs)
    rows = archive(
        spark,  # type: ignore[arg-type]
        nameserver,
        topic,
        dest,
        checkpoint=checkpoint,
        available_now=available_now,
        trigger_s=trigger_seconds,
        max_offsets_per_trigger=max_offsets_per_trigger,
        starting_offsets=starting_offsets,
        credentials=credentials,
    )
    click.echo(f"archived {rows} messages of {topic} into {dest}")


@pipeline.command("replay")
@_nameserver
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Archive directory written by 'ariane pipeline archive'.",
)
@click.option("--topic", "-t", required=True, help="Topic to write into.")
@click.option("--where", default=None, help="Spark SQL condition on the archive's columns.")
@click.option("--ordered", is_flag=True, help="Keep each original queue's order.")
@click.option("--id-namespace", default=None, help="Namespace of the derived message ids.")
@_master
@_conf
@_acl
def replay_cmd(
    nameserver: str,
    source: Path,
    topic: str,
    where: str | None,
    ordered: bool,
    id_namespace: str | None,
    master: str,
    confs: tuple[str, ...],
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Write an archive back into a topic (bodies, tags, keys and properties kept)."""
    if next(source.rglob("*.parquet"), None) is None:
        raise click.UsageError(
            f"--from {source}: no Parquet archive there (write one with 'ariane pipeline archive')"
        )
    from ariane.spark.pipelines import replay

    credentials = _credentials(access_key, secret_key)
    spark = _session(master, f"ariane-replay-{topic}", confs)
    rows = replay(
        spark,  # type: ignore[arg-type]
        nameserver,
        source,
        topic,
        ordered=ordered,
        where=where,
        id_namespace=id_namespace,
        credentials=credentials,
    )
    click.echo(f"replayed {rows} messages from {source} into {topic}")


@pipeline.command("lag-report")
@_nameserver
@click.option("--group", "-g", "groups", multiple=True, help="Consumer group (repeatable).")
@click.option("--topic", "-t", "topics", multiple=True, help="Topic (repeatable).")
@click.option(
    "--png",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("lag-report.png"),
    show_default=True,
    help="Where to write the chart.",
)
@_master
@_conf
@_acl
def lag_report_cmd(
    nameserver: str,
    groups: tuple[str, ...],
    topics: tuple[str, ...],
    png: Path,
    master: str,
    confs: tuple[str, ...],
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Backlog and age of the oldest unconsumed message, per group and queue."""
    from rich.console import Console
    from rich.table import Table

    from ariane.spark.pipelines import lag_report, render_lag_png

    if not groups and not topics:
        raise click.UsageError("name at least one --group or --topic")
    credentials = _credentials(access_key, secret_key)
    spark = _session(master, "ariane-lag-report", confs)
    lags = lag_report(
        spark,  # type: ignore[arg-type]
        nameserver,
        groups=groups,
        topics=topics,
        credentials=credentials,
    )
    now = int(time.time() * 1000)
    table = Table("group", "topic", "broker", "queue", "broker offset", "consumer offset",
                  "backlog", "oldest age (s)")  # fmt: skip
    for q in lags:
        age = q.age_s(now)
        table.add_row(
            q.group, q.topic, q.broker, str(q.queue_id), str(q.broker_offset),
            str(q.consumer_offset), str(q.backlog), "-" if age is None else f"{age:.1f}",
        )  # fmt: skip
    Console(width=140).print(table)
    render_lag_png(lags, png, now)
    click.echo(f"chart written to {png}")
