"""The NameServer's ACL shell: with ``aclEnable=true`` its write requests need an admin
account of the ACL files (the same ``plain_acl.yml`` format and hot reload as the broker's).

How it works: ``{rocketmqHome}/conf/plain_acl.yml`` and ``conf/acl/**/*.yml`` are read at start
and every ``aclWatchIntervalMs`` in a worker thread (``ariane.acl.files``); an ``AclHook``
checks only ``WRITE_CODES``: REGISTER_BROKER, UNREGISTER_BROKER, BROKER_HEARTBEAT,
PUT_KV_CONFIG, DELETE_KV_CONFIG, UPDATE_NAMESRV_CONFIG, WIPE_WRITE_PERM_OF_BROKER,
ADD_WRITE_PERM_OF_BROKER, DELETE_TOPIC_IN_NAMESRV and REGISTER_TOPIC_IN_NAMESRV. These are
admin-only codes, so a broker registers with an admin account (``accessKey``/``secretKey`` in
its broker.conf) or from a white-listed address. Route and cluster queries stay open to every
client, as RocketMQ's NameServer serves them.
"""

from __future__ import annotations

import asyncio
import logging

from ariane.acl.files import ACL_SUFFIXES, AclFileSet, AclPaths
from ariane.acl.hook import AclHook, throttled_refusal_log
from ariane.common.clock import Clock
from ariane.common.fileio import read_file_tree
from ariane.errors import ConfigError
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol.codes import RequestCode

__all__ = ["WRITE_CODES", "NamesrvAcl"]

logger = logging.getLogger(__name__)

#: The NameServer requests the ACL checks.
WRITE_CODES: frozenset[int] = frozenset(
    int(c)
    for c in (
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
    )
)


class NamesrvAcl:
    """The ACL files, hook and watcher of a NameServer.

    Args:
        home: ``rocketmqHome``.
        clock: time source (refusal log throttling).
        watch_interval_ms: how often the files are re-read.
    """

    def __init__(self, home: str, clock: Clock, watch_interval_ms: int) -> None:
        if not home:
            raise ConfigError(
                "rocketmqHome",
                "aclEnable=true needs rocketmqHome (or ROCKETMQ_HOME): the rules are read from "
                "{rocketmqHome}/conf/plain_acl.yml",
            )
        self.paths = AclPaths.of(home)
        self.files = AclFileSet(self.paths)
        self.hook = AclHook(
            self.files.rules,
            codes=WRITE_CODES,
            on_refused=throttled_refusal_log(_warn, clock.now_ms),
        )
        self.clock = clock
        self.watch_interval_ms = watch_interval_ms
        self._task: asyncio.Task[None] | None = None

    def _apply(self, found: tuple[dict[str, bytes], dict[str, str]]) -> None:
        report = self.files.refresh(*found)
        self.hook.rules = self.files.rules
        for level, line in report.log_records(len(self.files.rules.accounts)):
            logger.log(level, "%s", line)

    def _read(self) -> tuple[dict[str, bytes], dict[str, str]]:
        return read_file_tree([self.paths.default_file], [self.paths.acl_dir], ACL_SUFFIXES)

    def load(self) -> None:
        """Read the files now (at start) and start watching them."""
        self._apply(self._read())
        logger.info(
            "name server ACL on for its write requests: %d account(s) from %s",
            len(self.files.rules.accounts), self.paths.home,
        )  # fmt: skip
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="acl-watch")

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watch_interval_ms / 1000)
            try:
                self._apply(await asyncio.to_thread(self._read))
            except Exception:
                logger.exception("reading the ACL files failed")


def _warn(line: str) -> None:
    logger.warning("%s", line)
