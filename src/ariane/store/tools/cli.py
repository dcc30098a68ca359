"""``ariane store``: offline tools for a store directory."""

from __future__ import annotations

import sys

import click

from ariane.errors import StoreError
from ariane.store.tools.dump import dump
from ariane.store.tools.repair import repair
from ariane.store.tools.verify import verify

__all__ = ["store"]


@click.group("store")
def store() -> None:
    """Inspect a message store directory (run them on a stopped store)."""


@store.command("dump")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--from",
    "start",
    type=click.IntRange(0, 2**63 - 1),  # a CommitLog offset is an int64
    default=0,
    show_default=True,
    help="first physical offset",
)
@click.option(
    "--limit", type=click.IntRange(1), default=None, help="print at most this many records"
)
@click.option("--body", is_flag=True, help="also print message bodies")
def dump_cmd(directory: str, start: int, limit: int | None, body: bool) -> None:
    """Print CommitLog records with their offsets."""
    n = dump(directory, click.echo, start=start, limit=limit, show_body=body)
    click.echo(f"{n} record(s)")


@store.command("verify")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
def verify_cmd(directory: str) -> None:
    """Check CRCs and ConsumeQueue/CommitLog consistency; exit 1 on any damage."""
    problems, stats = verify(directory)
    for p in problems:
        click.echo(f"DAMAGE: {p}")
    click.echo(
        f"{stats['files']} CommitLog file(s), {stats['records']} record(s), "
        f"{stats['consume_queue_entries']} ConsumeQueue entrie(s): "
        + ("OK" if not problems else f"{len(problems)} problem(s)")
    )
    if problems:
        sys.exit(1)


@store.command("repair")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
def repair_cmd(directory: str) -> None:
    """Get a damaged store (one the broker refuses to start) loading again.

    What stops the start (a CommitLog file of the wrong size, a missing or overlapping one, a
    damaged checkpoint, ConsumeQueue entries pointing at the wrong records) is moved into
    DIRECTORY/repair-<time>/ (nothing is deleted), then the store is recovered in full: queues
    and index rebuilt from the CommitLog. Run it on a stopped store.
    """
    try:
        repair(directory, click.echo)
    except StoreError as exc:
        click.echo(f"ariane store repair: {exc}", err=True)
        sys.exit(1)
