"""Process set-up shared by the server launchers: logging and the open-file limit.

Logging: records go to stderr (foreground runs; ``--no-log-stderr`` turns that off, as
``ariane standalone`` does for its children) and to a size-rotated file under the server's
data directory (``<dir>/logs/<name>.log``, then ``.log.1`` ... ``.log.N``, RocketMQ's
``broker.log``/``namesrv.log`` roll the same way). The launchers call ``configure_logging``
first, so configuration problems are reported, then ``add_log_file`` once they know where
the data directory is.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import resource
import sys
from collections.abc import Callable
from typing import Any

import click

__all__ = [
    "DEFAULT_LOG_BACKUP_COUNT",
    "DEFAULT_LOG_MAX_BYTES",
    "LOG_FORMAT",
    "add_log_file",
    "configure_logging",
    "log_backup_count_option",
    "log_level_option",
    "log_max_bytes_option",
    "log_options",
    "open_log_file",
    "raise_open_file_limit",
]

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Rotation defaults: RocketMQ rolls its logs at 128 MiB and keeps 10.
DEFAULT_LOG_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_LOG_BACKUP_COUNT = 10
_HANDLER_MARK = "_ariane_handler"


def _mark(handler: logging.Handler) -> logging.Handler:
    setattr(handler, _HANDLER_MARK, True)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def configure_logging(level: str, log_file: str | None = None, *, stderr: bool = True) -> None:
    """Log at ``level`` to stderr (unless ``stderr`` is false) and, when given, to
    ``log_file`` (appending, rotated with the defaults). Replaces handlers installed by an
    earlier call."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level.upper())
    if stderr:
        root.addHandler(_mark(logging.StreamHandler(sys.stderr)))
    if log_file:
        add_log_file(log_file)


def add_log_file(
    path: str,
    max_bytes: int = DEFAULT_LOG_MAX_BYTES,
    backup_count: int = DEFAULT_LOG_BACKUP_COUNT,
) -> None:
    """Also log to ``path``, rolled over at ``max_bytes`` (0: never) keeping
    ``backup_count`` old files; creates the directory.

    Raises:
        OSError: the directory or file cannot be created.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8"
    )
    logging.getLogger().addHandler(_mark(handler))


def open_log_file(
    prog: str, log_file: str | None, default: str, max_bytes: int, backup_count: int
) -> None:
    """Start logging to ``log_file`` (``default`` when None, nothing when empty); a file that
    cannot be opened ends the process with status 2 and one line on stderr."""
    path = default if log_file is None else log_file
    if not path:
        return
    try:
        add_log_file(path, max_bytes, backup_count)
    except OSError as exc:
        click.echo(f"{prog}: cannot open log file {path}: {exc}", err=True)
        sys.exit(2)


def raise_open_file_limit() -> None:
    """Lift the soft descriptor limit to the hard one so many clients can connect."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        logger.info("cannot raise the open file limit: %s", exc)


def log_level_option(help_text: str) -> Callable[[Any], Any]:
    """The ``--log-level`` click option every server launcher takes."""
    return click.option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        default="INFO",
        show_default=True,
        help=help_text,
    )


def log_max_bytes_option() -> Callable[[Any], Any]:
    """``--log-max-bytes``: the size at which log files roll over."""
    return click.option(
        "--log-max-bytes",
        type=click.IntRange(min=0),
        default=DEFAULT_LOG_MAX_BYTES,
        show_default=True,
        help="Roll the log file over at this size (0: never).",
    )


def log_backup_count_option() -> Callable[[Any], Any]:
    """``--log-backup-count``: how many rolled-over log files are kept."""
    return click.option(
        "--log-backup-count",
        type=click.IntRange(min=0),
        default=DEFAULT_LOG_BACKUP_COUNT,
        show_default=True,
        help="Rolled-over log files kept.",
    )


def log_options(default_file: str) -> Callable[[Any], Any]:
    """``--log-level``, ``--log-file``, ``--log-max-bytes``, ``--log-backup-count`` and
    ``--log-stderr/--no-log-stderr`` for a server launcher.

    Args:
        default_file: how the help text names the default log file.
    """
    options = [
        log_level_option("Logging threshold."),
        click.option(
            "--log-file",
            type=click.Path(dir_okay=False),
            default=None,
            help=f"Log file, rotated by size (default {default_file}; '' for none).",
        ),
        log_max_bytes_option(),
        log_backup_count_option(),
        click.option(
            "--log-stderr/--no-log-stderr",
            default=True,
            show_default=True,
            help="Also log to stderr (foreground runs).",
        ),
    ]

    def decorate(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate
