"""Persistence of the broker's metadata files (RocketMQ ``ConfigManager``).

How it works: each manager (topics, subscription groups, consumer offsets) owns a
:class:`MetadataFile` that knows the path and how to encode the current state. Writes are
atomic (temp file, fsync, rename, directory fsync), run in a worker thread so the event loop
never waits on the disk, and are coalesced: while one write is in progress, further requests
only mark the state dirty and one more write follows. ``persist()`` returns once a write that
started after the call has finished, so an admin request can answer after its change is on
disk. Reading falls back to ``<file>.bak`` (RocketMQ keeps one) when the file is missing or
empty; a file that exists but does not parse stops the broker instead of being overwritten.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TypeVar

from ariane.common.fileio import write_file_atomically
from ariane.errors import ConfigError, RemoteProtocolError, RequestError
from ariane.remoting.protocol.codes import ResponseCode

__all__ = ["MetadataFile", "over_limit"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class MetadataFile:
    """One JSON metadata file.

    Args:
        path: the file.
        encode: returns the current state as bytes; called on the caller's thread (the loop),
            so it sees a consistent snapshot.
    """

    def __init__(self, path: str, encode: Callable[[], bytes]) -> None:
        self.path = path
        self._encode = encode
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        self.last_error: OSError | None = None
        self.writes = 0

    def read(self) -> bytes | None:
        """The file's content, else the ``.bak`` copy's; ``None`` if neither has content.

        Raises:
            OSError: the file exists but cannot be read.
        """
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            if data.strip():
                return data
        return None

    def load(self, decode: Callable[[bytes], T], what: str) -> T | None:
        """Read and decode the file (or its ``.bak``); ``None`` when there is none.

        Raises:
            ConfigError: the file exists but cannot be read or decoded (names the file).
        """
        try:
            data = self.read()
        except OSError as exc:
            raise ConfigError(self.path, f"cannot read: {exc}") from None
        if data is None:
            return None
        try:
            return decode(data)
        except RemoteProtocolError as exc:
            raise ConfigError(self.path, f"not a {what} file: {exc}") from None

    def write_now(self) -> None:
        """Write the current state synchronously (start-up, shutdown, tests).

        Raises:
            OSError: the file cannot be written.
        """
        self._dirty = False
        write_file_atomically(self.path, self._encode())
        self.writes += 1

    def persist_soon(self) -> None:
        """Write the current state soon, in the background (coalesced with other requests).

        Without a running event loop the write happens at once.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            try:
                self.write_now()
            except OSError as exc:
                self.last_error = exc
                logger.error("cannot write %s: %s", self.path, exc)
            return
        self._dirty = True
        if self._task is None or self._task.done():
            self._task = loop.create_task(
                self._run(), name=f"persist-{os.path.basename(self.path)}"
            )

    async def persist(self) -> None:
        """Write the current state and wait until it is on disk.

        Raises:
            OSError: the write failed.
        """
        self.persist_soon()
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
        if self.last_error is not None:
            raise self.last_error

    async def _run(self) -> None:
        while self._dirty:
            self._dirty = False
            data = self._encode()
            try:
                await asyncio.to_thread(write_file_atomically, self.path, data)
            except OSError as exc:
                self.last_error = exc
                logger.error("cannot write %s: %s", self.path, exc)
            else:
                self.last_error = None
                self.writes += 1


_over_limit_counts: dict[str, int] = {}


def over_limit(kind: str, name: str, count: int, limit: int) -> RequestError:
    """The refusal of auto-creating one more ``kind`` past its limit (``autoCreateTopicLimit``,
    ``autoCreateSubscriptionGroupLimit``); logged the first time and every 1000th after."""
    seen = _over_limit_counts[kind] = _over_limit_counts.get(kind, 0) + 1
    if seen % 1000 == 1:
        logger.warning(
            "refused to auto-create %s %s (%d refused so far): the broker holds %d, the limit",
            kind, name, seen, count,
        )  # fmt: skip
    code = (
        ResponseCode.TOPIC_NOT_EXIST
        if kind == "topic"
        else ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    )
    key = "autoCreateTopicLimit" if kind == "topic" else "autoCreateSubscriptionGroupLimit"
    return RequestError(
        code,
        f"the {kind} {name} does not exist and is not auto-created: the broker already holds "
        f"{count} ({key}={limit}); create it explicitly (mqadmin update"
        f"{'Topic' if kind == 'topic' else 'SubGroup'}) or raise the limit",
    )
