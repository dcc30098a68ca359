"""The broker's request processors, one module per request family (RocketMQ
``broker/processor``): ``send`` (SEND_MESSAGE, V2, batch), ``send_back``
(CONSUMER_SEND_MSG_BACK), ``pull``,
``client_manage`` (heartbeat, unregister, client config check), ``consumer_manage`` (consumer
lists, offsets, queue locks), ``query`` (query/view messages, offset queries) and ``admin``
plus ``admin_consumer`` (what ``mqadmin`` needs).

Processors answer synchronously (a ``RemotingCommand``) wherever they can; only SYNC_FLUSH
sends, held pulls and requests that wait on a disk write or a client answer later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["error", "finish_on_loop", "ok"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


def ok(
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    remark: str | None = None,
) -> RemotingCommand:
    """A SUCCESS response."""
    return RemotingCommand.response(ResponseCode.SUCCESS, remark, ext_fields, body)


def error(code: int, remark: str) -> RemotingCommand:
    """An error response with a remark."""
    return RemotingCommand.response(code, remark)


def finish_on_loop(
    loop: asyncio.AbstractEventLoop,
    finish: Callable[[Future[_T]], None],
    future: Future[_T],
) -> None:
    """Run ``finish(future)`` on the event loop: a done-callback for a store future, which
    store threads complete (a DLedger leader completes them on the loop itself: then at once,
    so that a commit's answers leave in the loop turn that saw the quorum, not one turn per
    hop). A closed loop means the broker is gone: nobody to answer."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        finish(future)  # the future runs its callbacks each in a try: a failure stays here
        return
    try:
        loop.call_soon_threadsafe(finish, future)
    except RuntimeError:
        logger.debug("a put completed after the event loop closed")
