"""Crash-safe small-file writes shared by the NameServer and the broker (RocketMQ
``MixAll.string2File`` / ``ConfigManager.persist``).

The one I/O helper in ``ariane.common``: metadata files (kvConfig.json, topics.json,
consumerOffset.json...) are replaced atomically, so a crash leaves the old or the new content,
never a torn file.
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["write_file_atomically"]


def write_file_atomically(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, then
    fsync the directory.

    Raises:
        OSError: the directory is not writable, the disk is full...
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
