"""Small-file I/O shared by the NameServer and the broker (RocketMQ ``MixAll.string2File`` /
``ConfigManager.persist``, and the reads of ``FileWatchService``).

The one I/O module in ``ariane.common``: metadata files (kvConfig.json, topics.json,
consumerOffset.json...) are replaced atomically, so a crash leaves the old or the new content,
never a torn file; ``read_file_tree`` reads a set of small configuration files (the ACL files)
whole, for servers that watch them.
"""

from __future__ import annotations

import os
import tempfile

from ariane.common import faults

__all__ = ["read_file_tree", "write_file_atomically"]


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
        faults.point("metadata.before_rename")
        os.replace(tmp, path)
        faults.point("metadata.after_rename")
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


def read_file_tree(
    files: list[str], dirs: list[str], suffixes: tuple[str, ...], max_bytes: int = 4 << 20
) -> tuple[dict[str, bytes], dict[str, str]]:
    """Read ``files`` and every file under ``dirs`` (recursively) whose name ends with one of
    ``suffixes``; missing files and directories are skipped.

    Returns:
        (path -> content, path -> why it could not be read); paths are absolute.
    """
    found: list[str] = [os.path.abspath(f) for f in files if os.path.isfile(f)]
    for directory in dirs:
        for root, subdirs, names in os.walk(directory):
            subdirs.sort()
            found.extend(
                os.path.abspath(os.path.join(root, n))
                for n in sorted(names)
                if n.endswith(suffixes)
            )
    contents: dict[str, bytes] = {}
    errors: dict[str, str] = {}
    for path in dict.fromkeys(found):
        try:
            if os.path.getsize(path) > max_bytes:
                errors[path] = f"larger than {max_bytes} bytes"
                continue
            with open(path, "rb") as f:
                contents[path] = f.read()
        except OSError as exc:
            errors[path] = exc.strerror or str(exc)
    return contents, errors
