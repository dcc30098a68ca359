"""The broker's ACL shell (RocketMQ ``BrokerController.initialAcl`` plus the file watching and
persistence of ``PlainPermissionManager``): it feeds the pure core in ``ariane.acl``.

How it works: with ``aclEnable=true`` the broker reads ``{rocketmqHome}/conf/plain_acl.yml`` and
every ``*.yml``/``*.yaml`` under ``{rocketmqHome}/conf/acl`` at start, registers an ``AclHook``
in front of every processor, and re-reads the files every ``aclWatchIntervalMs`` (500 ms) in a
worker thread: an edit takes effect within a second, a file that fails to load keeps its old
rules and is logged once, a new file is picked up, a deleted file's accounts go away. Refusals
are logged per (client IP, reason) at most once a minute, with a count.

The ACL admin requests edit the files through the same path: re-read (so edits made by hand
are not lost), edit the document (``ariane.acl.plain``), write it atomically, reload at once,
so the request's answer is only sent once the new rules are in force.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ariane.acl.files import ACL_SUFFIXES, AclFileSet, AclPaths, RefreshReport
from ariane.acl.hook import AclHook, throttled_refusal_log
from ariane.acl.plain import (
    AclDocument,
    PlainAccessConfig,
    delete_account,
    dump_document,
    set_global_white,
    update_account,
)
from ariane.common.clock import Clock
from ariane.common.fileio import read_file_tree, write_file_atomically
from ariane.errors import AclError, ConfigError
from ariane.remoting.eventloop import cancel_and_wait

__all__ = ["BrokerAcl"]

logger = logging.getLogger(__name__)


class BrokerAcl:
    """The ACL files, hook and watcher of a broker.

    Args:
        home: ``rocketmqHome``.
        clock: time source (refusal log throttling, data versions).
        watch_interval_ms: how often the files are re-read.
        codes: the request codes checked (None: every code).
        what: the server's name in log lines.
    """

    def __init__(
        self,
        home: str,
        clock: Clock,
        *,
        watch_interval_ms: int = 500,
        codes: frozenset[int] | None = None,
        what: str = "broker",
    ) -> None:
        if not home:
            raise ConfigError(
                "rocketmqHome",
                "aclEnable=true needs rocketmqHome (or the ROCKETMQ_HOME environment variable): "
                "the rules are read from {rocketmqHome}/conf/plain_acl.yml",
            )
        self.paths = AclPaths.of(home)
        self.clock = clock
        self.watch_interval_ms = watch_interval_ms
        self.what = what
        self.files = AclFileSet(self.paths)
        self.hook = AclHook(
            self.files.rules, codes=codes, on_refused=throttled_refusal_log(_warn, clock.now_ms)
        )
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # -- loading -------------------------------------------------------------------------------

    def _read(self) -> tuple[dict[str, bytes], dict[str, str]]:
        return read_file_tree([self.paths.default_file], [self.paths.acl_dir], ACL_SUFFIXES)

    def load(self) -> None:
        """Read the files now (at start; blocking)."""
        self._apply(*self._read())
        accounts = len(self.files.rules.accounts)
        logger.info(
            "%s ACL on: %d account(s), %d global white rule(s) from %s",
            self.what, accounts, len(self.files.rules.global_white), self.paths.home,
        )  # fmt: skip
        if not accounts and not self.files.rules.global_white:
            logger.warning(
                "%s ACL is on but %s defines no account and no white address: every request "
                "will be refused",
                self.what, self.paths.default_file,
            )  # fmt: skip

    async def reload(self) -> RefreshReport:
        """Re-read the files (in a worker thread) and apply what changed."""
        contents, unreadable = await asyncio.to_thread(self._read)
        return self._apply(contents, unreadable)

    def _apply(self, contents: dict[str, bytes], unreadable: dict[str, str]) -> RefreshReport:
        report = self.files.refresh(contents, unreadable)
        self.hook.rules = self.files.rules
        for level, line in report.log_records(len(self.files.rules.accounts)):
            logger.log(level, "%s", line)
        return report

    def start(self) -> None:
        """Start watching the files."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="acl-watch")

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watch_interval_ms / 1000)
            try:
                async with self._lock:
                    await self.reload()
            except Exception:
                logger.exception("reading the ACL files failed")

    # -- admin edits ---------------------------------------------------------------------------

    def _editable(self, path: str) -> AclDocument | None:
        broken = self.files.broken.get(path)
        if broken is not None:
            raise AclError(f"{path} does not load, fix it by hand first: {broken}")
        return self.files.documents.get(path)

    async def _write(self, path: str, mapping: dict[str, object]) -> None:
        data = dump_document(mapping).encode("utf-8")
        try:
            await asyncio.to_thread(write_file_atomically, path, data)
        except OSError as exc:
            raise AclError(f"cannot write {path}: {exc.strerror or exc}") from None
        await self.reload()

    async def update_account(self, config: PlainAccessConfig) -> None:
        """Create or update an account (in the file defining it, else ``plain_acl.yml``).

        Raises:
            AclError: the account is invalid, the file is broken or cannot be written.
        """
        async with self._lock:
            await self.reload()
            owner = self.files.document_of(config.access_key)
            path = owner.path if owner is not None else self.paths.default_file
            doc = self._editable(path)
            now = self.clock.now_ms()
            mapping = update_account(doc.mapping if doc else {}, config, path, now)
            await self._write(path, mapping)
            logger.info("ACL account %s written to %s", config.access_key, path)

    async def delete_account(self, access_key: str) -> bool:
        """Delete an account; False when no file defines it.

        Raises:
            AclError: the file is broken or cannot be written.
        """
        async with self._lock:
            await self.reload()
            owner = self.files.document_of(access_key)
            if owner is None:
                return False
            self._editable(owner.path)
            mapping = delete_account(owner.mapping, access_key, owner.path, self.clock.now_ms())
            if mapping is None:
                return False
            await self._write(owner.path, mapping)
            logger.info("ACL account %s deleted from %s", access_key, owner.path)
            return True

    async def set_global_white(self, rules: Sequence[str], path: str | None) -> None:
        """Replace the global white rules of ``path`` (default ``plain_acl.yml``).

        Raises:
            AclError: a rule is malformed, or ``path`` is not an ACL file of this home.
        """
        target = path or self.paths.default_file
        if not self.paths.owns(target):
            raise AclError(
                f"{target} is not an ACL file of this broker (expected {self.paths.default_file} "
                f"or a .yml file under {self.paths.acl_dir})"
            )
        async with self._lock:
            await self.reload()
            full = self.paths.default_file if path is None else _abs(target)
            doc = self._editable(full)
            mapping = set_global_white(doc.mapping if doc else {}, rules, full, self.clock.now_ms())
            await self._write(full, mapping)
            logger.info("ACL global white addresses of %s set to %s", full, list(rules))


def _abs(path: str) -> str:
    import os

    return os.path.abspath(path)


def _warn(line: str) -> None:
    logger.warning("%s", line)
