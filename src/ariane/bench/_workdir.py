"""Where a benchmark puts its data: a fresh directory under ``--dir`` (created when missing).

A bad ``--dir`` (a file, an unwritable place) ends the command with one line, never a traceback.
"""

from __future__ import annotations

import os
import tempfile

import click

__all__ = ["make_work_dir"]


def make_work_dir(prefix: str, directory: str | None) -> str:
    """Create and return a fresh directory named PREFIX... under DIRECTORY (or the temp dir).

    Raises:
        click.UsageError: DIRECTORY is a file or cannot be created or written (one line).
    """
    if directory is not None:
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise click.UsageError(f"--dir {directory}: is a file, not a directory")
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise click.UsageError(
                f"--dir {directory}: cannot create it: {exc.strerror or exc}"
            ) from None
    try:
        return tempfile.mkdtemp(prefix=prefix, dir=directory)
    except OSError as exc:
        where = directory if directory is not None else tempfile.gettempdir()
        raise click.UsageError(
            f"--dir {where}: cannot write there: {exc.strerror or exc}"
        ) from None
