"""Process set-up shared by the server launchers: logging and the open-file limit."""

from __future__ import annotations

import logging
import resource
import sys
from collections.abc import Callable
from typing import Any

import click

__all__ = ["configure_logging", "log_level_option", "raise_open_file_limit"]

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, log_file: str | None = None) -> None:
    """Log at ``level`` to ``log_file`` (appending) or, without one, to stderr."""
    if log_file:
        logging.basicConfig(level=level.upper(), format=LOG_FORMAT, filename=log_file)
    else:
        logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)


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
