"""END_TRANSACTION (RocketMQ ``EndTransactionProcessor``).

Producers send it one-way after their local transaction, or in answer to a
CHECK_TRANSACTION_STATE (``fromTransactionCheck``). The work is done by
:class:`~ariane.broker.transaction.TransactionalMessageService`; this processor answers at once
under ASYNC_FLUSH and after the committed message and the op record are flushed under
SYNC_FLUSH (the appends themselves happen synchronously, in order). A slave refuses it with
SLAVE_NOT_AVAILABLE, as RocketMQ does.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING

from ariane.broker.processors import finish_on_loop
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer
from ariane.store import PutResult

if TYPE_CHECKING:
    from ariane.broker.transaction import TransactionBrokerContext

__all__ = ["EndTransactionProcessor"]

logger = logging.getLogger(__name__)


class EndTransactionProcessor:
    """Handles END_TRANSACTION.

    Args:
        broker: the broker whose transaction service is used.
    """

    def __init__(self, broker: TransactionBrokerContext) -> None:
        self.broker = broker
        self._loop: asyncio.AbstractEventLoop | None = None

    def register(self, server: RemotingServer) -> None:
        """Register the handler on ``server``."""
        self._loop = asyncio.get_running_loop()
        server.register_processor(RequestCode.END_TRANSACTION, self.end_transaction)

    def end_transaction(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """END_TRANSACTION (37): commit, roll back or (0) leave a half message pending."""
        if self.broker.role.is_slave:
            logger.warning("end transaction refused: this broker is a slave")
            return RemotingCommand.response(
                ResponseCode.SLAVE_NOT_AVAILABLE,
                "Message store is slave mode, so end transaction is forbidden.",
            )
        header = h.EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        response, futures = self.broker.transactions.end_transaction(header, request.remark)
        waiting = [f for f in futures if not f.done()]
        if not waiting:
            return response
        loop = self._loop
        assert loop is not None
        remaining = len(waiting)

        def one_done(_: Future[PutResult]) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                ctx.send_response(response)

        for future in waiting:
            future.add_done_callback(partial(finish_on_loop, loop, one_done))
        return None
